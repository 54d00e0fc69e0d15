"""Ingest: samples other engines send, into storage through one write path.

routes      `POST /v1/ingest` (the body bounded to VIGIL_INGEST_MAX_SAMPLES) and the API
            key dependency every `/v1/` route shares
schema      the body and answer (each sample is `vigil.sample_record.SampleRecord`)
write_path  IngestPath: the caller's rules, its quota, then storage — used by every ingest
            route, the OTLP receiver (sidecar.otlp) included
policy      what one caller may write (tenants, timestamps, weights, eval scores)
quota       rows per minute per tenant
records     validate each record and insert idempotently (storage)
"""
