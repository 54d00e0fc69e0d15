"""Profiling aids for bench_profile_step: host-side step phases, kernel classes and traces."""
