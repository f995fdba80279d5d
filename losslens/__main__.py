from losslens.cli import main

main()
