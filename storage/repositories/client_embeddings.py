"""Vectors that came inside records live under `client:` model names, apart from the sidecar's
own. The first vector stored for a `client:` model fixes its dimension: a record whose vector
differs is refused, so one model's rows always stack into one matrix."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.models import Embedding
from storage.records import ParsedSample, RecordError
from vigil.sample_record import CLIENT_MODEL_PREFIX


def is_client_model(model: str) -> bool:
    return model.startswith(CLIENT_MODEL_PREFIX)


def stored_dimension(session: Session, model: str) -> int | None:
    """The dimension of `model`'s stored vectors (an index lookup), None before the first."""
    return session.scalar(select(Embedding.dim).where(Embedding.model == model).limit(1))


def check_client_dimensions(session: Session, samples: Iterable[ParsedSample]) -> None:
    """RecordError naming the sample and field whose vector's dimension differs from the one
    stored (or, for a model new to the database, the first one in `samples`)."""
    known: dict[str, int | None] = {}
    for item in samples:
        model = item.embedding_model
        for field, vector in item.embeddings.items():
            if model not in known:
                known[model] = stored_dimension(session, model)
            if known[model] is None:
                known[model] = len(vector)
            elif len(vector) != known[model]:
                raise RecordError(
                    f"sample {item.id!r}: {field}_embedding has {len(vector)} values; "
                    f"{model} vectors have {known[model]} (the first one stored fixes it)"
                )
