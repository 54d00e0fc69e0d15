"""Detectors the registered tests wrap (drift.stattests): new values, clusters, eval trend,
canaries, and the prompt-conditioned collectors."""
