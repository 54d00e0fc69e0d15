"""Benchmarks, each printing a ratio against a peer measured in the same run.

Run each suite as a module from the repository root, so `bench`, `serving`, `drift` and the other
packages import by name with no path tricks: `python -m bench.suites.bench_<name> [options]`.
Every suite writes its figures, with the machine and command, to bench/results/<name>.md
(`bench.common.results_table`). bench/README.md maps the folders.
"""
