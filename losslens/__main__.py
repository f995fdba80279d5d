"""`python -m losslens` and the `losslens` script: the command line.

A command runs for seconds: its imports (polars, numpy, rich, typer) leave some 500,000
long-lived objects, and the collector's default young-generation threshold (700 allocations)
re-scans them over and over: ~90 ms of CPU in a 0.8 s `check`. Collections are made rare here,
before anything is imported; reference counting frees the run's records as before (they hold no
cycles), and a cycle is still collected after 100,000 allocations. The library leaves the
collector to its host."""

import gc

gc.set_threshold(100_000, 20, 10)

from losslens.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
