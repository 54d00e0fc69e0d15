"""The sidecar's OTLP/HTTP traces receiver (`POST /v1/traces`): OpenTelemetry GenAI spans,
including vLLM's, become sample records on the ingest API's own write path."""
