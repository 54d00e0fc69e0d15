"""The sidecar's OTLP/HTTP receivers (`POST /v1/traces`, `POST /v1/logs`): OpenTelemetry GenAI
spans (vLLM's included) and OpenInference LLM spans, with content sent as log records joined to
them in the database, become sample records on the ingest API's own write path."""
