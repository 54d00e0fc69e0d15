"""The monitoring sidecar: scheduler and leader lease, watchdog, jobs (embed, evaluate, drift,
sequential, retention, baseline reminder), LLM judges, engine canaries, the ingest API and the
app that serves it beside the dashboards."""
