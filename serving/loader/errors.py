"""The one error type model loading raises: callers catch it to report a bad model path/file."""

from __future__ import annotations


class ModelLoadError(Exception):
    """A model file is missing, truncated, or of an unsupported architecture/quantization.

    The message always names the file and what is wrong with it.
    """
