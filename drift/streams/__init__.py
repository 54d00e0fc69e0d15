"""Change detection across windows and requests: CUSUM streams and their state."""
