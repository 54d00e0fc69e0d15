"""The monitoring sidecar: scheduler and leader lease, jobs (embed, evaluate, drift,
retention), LLM judges, the ingest API and the app that serves it beside the dashboards."""
