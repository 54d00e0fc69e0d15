"""The `page_sessions` table: one row per browser login to the sidecar's pages.

The cookie carries a random session id (signed); the row, keyed by the id's SHA-256, says whose
session it is, until when, and whether it was ended. Logout revokes the row, so a copied cookie
stops working with it; removing the key ends its sessions too (the key is looked up each time).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from storage.models.base import Base
from storage.types import UTCDateTime


class PageSession(Base):
    __tablename__ = "page_sessions"

    id: Mapped[str] = mapped_column(
        String(64), primary_key=True
    )  # SHA-256 hex of the cookie's session id
    key_id: Mapped[str] = mapped_column(String(64))  # whose key logged in (vigil.keys.key_id)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
