"""Benchmarks, each printing a ratio against a peer measured in the same run.

Run each one as a module from the repository root, so `bench`, `serving`, `drift` and the other
packages import by name with no path tricks: `python -m bench.bench_<name> [options]`. Every
`bench_<name>.py` writes its figures, with the machine and command, to bench/results/<name>.md
(`bench.results_table`); the other modules here are shared helpers.
"""
