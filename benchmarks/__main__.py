"""``python -m benchmarks``: run every benchmark and rewrite benchmarks/results.md."""

from benchmarks.run import main

main()
