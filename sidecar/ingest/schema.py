"""The body and answer of `POST /v1/ingest`. Each sample is the one record schema,
`vigil.sample_record.SampleRecord` (its module doc lists the rules)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from vigil.sample_record import SampleRecord

SampleIn = SampleRecord  # one sample of the body: the record schema itself, no ingest variant


class IngestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    samples: list[SampleRecord] = Field(min_length=1)


class IngestResult(BaseModel):
    received: int
    inserted: int
    duplicates: int  # already stored for the caller's tenant
    weights_clipped: int = 0  # sample weights bounded by the ingest policy (sidecar.ingest.policy)
