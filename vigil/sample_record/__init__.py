"""The sample record's one schema (`schema.py` lists the rules), shared by the ingest API,
storage and `vigil check`. A leaf: it imports nothing from the other packages."""

from vigil.sample_record.limits import (
    CLIENT_MODEL_PREFIX,
    DEFAULT_MAX_FUTURE_SKEW_S,
    MAX_SAMPLE_WEIGHT,
    MIN_SAMPLE_RATE,
)
from vigil.sample_record.schema import EMBEDDING_FIELDS, SampleRecord, client_model_name
from vigil.sample_record.validate import RecordError, check_not_future, describe, validate_record

__all__ = [
    "CLIENT_MODEL_PREFIX",
    "DEFAULT_MAX_FUTURE_SKEW_S",
    "EMBEDDING_FIELDS",
    "MAX_SAMPLE_WEIGHT",
    "MIN_SAMPLE_RATE",
    "RecordError",
    "SampleRecord",
    "check_not_future",
    "client_model_name",
    "describe",
    "validate_record",
]
