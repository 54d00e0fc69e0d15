"""The old home of stored baselines, now `sidecar.jobs.baselines`. Only the drift job's import
still reads it (that file moves it on its own branch); delete this module with that import, and
the entry it holds in tests/test_import_graph.py KNOWN_CIRCLES."""

from sidecar.jobs.baselines import load_baseline_with_frame

__all__ = ["load_baseline_with_frame"]
