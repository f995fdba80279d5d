"""`python -m losslens`: the command line."""
from losslens.cli import main

main()
