"""What the suites feed the system under test: prompts, task items, drift windows, OTLP bodies,
scale texts and simulated traffic."""
