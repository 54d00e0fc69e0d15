"""Vectors that came inside records live under `client:` model names, apart from the sidecar's
own. A client model is its tenant's: the first vector a tenant stores under a `client:` name
fixes that name's dimension for that tenant only (another tenant's vectors under the same name
neither fix nor block it), and a record whose vector differs is refused, so one tenant's rows of
one model always stack into one matrix."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.models import Embedding, Sample
from storage.records import ParsedSample, RecordError
from vigil.sample_record import CLIENT_MODEL_PREFIX


def is_client_model(model: str) -> bool:
    return model.startswith(CLIENT_MODEL_PREFIX)


def stored_dimension(session: Session, model: str, tenant: str | None) -> int | None:
    """The dimension of `tenant`'s stored vectors of `model`, None before its first (indexed:
    the tenant's samples, then each one's vectors of the model)."""
    owner = Sample.tenant.is_(None) if tenant is None else Sample.tenant == tenant
    return session.scalar(
        select(Embedding.dim)
        .join(Sample, Sample.id == Embedding.sample_id)
        .where(Embedding.model == model, owner)
        .limit(1)
    )


def check_client_dimensions(session: Session, samples: Iterable[ParsedSample]) -> None:
    """RecordError naming the sample and field whose vector's dimension differs from the one its
    tenant stored (or, for a model new to the tenant, the first one in `samples`)."""
    known: dict[tuple[str | None, str], int | None] = {}
    for item in samples:
        key = (item.row.get("tenant"), item.embedding_model)
        for field, vector in item.embeddings.items():
            if key not in known:
                known[key] = stored_dimension(session, key[1], key[0])
            if known[key] is None:
                known[key] = len(vector)
            elif len(vector) != known[key]:
                raise RecordError(
                    f"sample {item.id!r}: {field}_embedding has {len(vector)} values; "
                    f"{key[1]} vectors have {known[key]} for this tenant (its first one stored "
                    "fixes it)"
                )
