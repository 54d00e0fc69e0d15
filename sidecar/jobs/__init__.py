"""The sidecar's scheduled jobs. Each is a plain function `(settings, session_factory, now)`
returning a small dataclass, so tests call them directly and the scheduler only wraps them."""
