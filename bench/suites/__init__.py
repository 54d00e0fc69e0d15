"""The runnable benchmarks: `python -m bench.suites.bench_<name> [options]`, each writing its
figures to bench/results/<name>.md."""
