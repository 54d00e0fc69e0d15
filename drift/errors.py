"""The one error the drift code raises for bad input: the message says what is wrong and where.

Everything else that escapes the drift code is a bug. Callers (`vigil check`, the sidecar's
drift job) turn an `InputError` into an exit code or a monitoring alert, never a traceback.
"""

from __future__ import annotations


class InputError(ValueError):
    """Input the drift code cannot use (a file line, a row, a field); the message names it."""
