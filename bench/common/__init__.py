"""Helpers the suites share: the results table writer, random-weight HF checkpoints, the tiny
model, roofline bytes, GPU timing, pinned CPUs and per-process CPU time."""
