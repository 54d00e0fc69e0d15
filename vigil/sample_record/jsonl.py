"""Reading a JSONL file of sample records (`vigil check`): every line through the one schema,
errors as "file:line: field: message"."""

from __future__ import annotations

import json
from pathlib import Path

from vigil.sample_record.schema import EMBEDDING_FIELDS, SampleRecord
from vigil.sample_record.validate import RecordError, validate_record


class RecordFileError(ValueError):
    """A file of records cannot be used; the message names the file and line."""


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def read_records(path: str | Path) -> list[tuple[int, SampleRecord]]:
    """(line number, record) for each non-blank line. Within one file each embedding field has
    one dimension (the first line carrying it fixes it)."""
    path = Path(path)
    if not path.is_file():
        raise RecordFileError(f"{path}: no such file")
    records: list[tuple[int, SampleRecord]] = []
    dims: dict[str, tuple[int, int]] = {}  # field -> (dim, first line)
    # binary, one physical line (b"\n") at a time, decoded on its own: a text-mode file decodes
    # whole buffers ahead of the line being read, so a decode error would name an earlier line
    with open(path, "rb") as fh:
        lineno = 0
        try:
            for lineno, raw in enumerate(fh, 1):  # noqa: B007 - read in the except below
                line = raw.decode("utf-8", errors="strict")
                if not line.strip():
                    continue
                record = validate_record(json.loads(line, parse_constant=_reject_constant))
                for field in EMBEDDING_FIELDS:
                    vector = getattr(record, field)
                    if vector is not None:
                        dim, first = dims.setdefault(field, (len(vector), lineno))
                        if len(vector) != dim:
                            raise RecordError(
                                f"{field} has {len(vector)} values, line {first} had {dim}"
                            )
                records.append((lineno, record))
        except UnicodeDecodeError as exc:
            raise RecordFileError(f"{path}:{lineno}: not UTF-8 ({exc.reason})") from None
        except json.JSONDecodeError as exc:
            raise RecordFileError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        except (RecordError, ValueError, RecursionError) as exc:
            raise RecordFileError(f"{path}:{lineno}: {exc}") from None
    if not records:
        raise RecordFileError(f"{path}: no records")
    return records
