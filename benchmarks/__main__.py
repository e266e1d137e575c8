"""``python -m benchmarks``: run every benchmark and rewrite the results files (see :mod:`benchmarks.run`)."""

from benchmarks.run import main

main()
