"""`vigil schema`: print the sample record's JSON Schema (`vigil schema > sample.schema.json`)."""

from __future__ import annotations

import argparse
import json

from vigil.sample_record import SampleRecord

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"  # what pydantic emits


def schema_command(args: argparse.Namespace) -> int:
    schema = {"$schema": JSON_SCHEMA_DIALECT, **SampleRecord.model_json_schema()}
    print(json.dumps(schema, indent=2, sort_keys=True))
    return 0
