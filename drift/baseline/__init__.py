"""The reference: building a baseline, validating and calibrating it, and its power."""
