"""The tables of what is decided once across processes: turn and job leases, and request
records (``engine.platform.coordination``, ``engine.turns.requests``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ForeignKey,
    Integer,
    String,
)
from sqlmodel import Field, SQLModel

from engine.storage.models import _fk, _when

# --- coordination ------------------------------------------------------------------------------


class TurnLease(SQLModel, table=True):
    """Who is generating for an adventure right now. A row, so it holds across processes."""

    __tablename__: ClassVar[str] = "turn_leases"

    adventure_id: int = Field(
        sa_column=Column(Integer, ForeignKey("adventures.id", ondelete="CASCADE"), primary_key=True)
    )
    holder: str
    fencing_token: int = 0
    expires_at: datetime = _when()
    heartbeat_at: datetime = _when()


class JobLease(SQLModel, table=True):
    """Which process runs a background job now (``engine.platform.coordination.jobs``).

    One row per job name, never deleted, so its fencing token only grows."""

    __tablename__: ClassVar[str] = "job_leases"

    name: str = Field(sa_column=Column(String(100), primary_key=True))
    holder: str
    fencing_token: int = 0
    expires_at: datetime = _when()
    # Asked for while it ran: the holder looks for work again before it lets go.
    asked_again: bool = False


class RequestRecord(SQLModel, table=True):
    """One Discord interaction's request and result, so a repeat is answered, not re-run."""

    __tablename__: ClassVar[str] = "request_records"

    interaction_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    adventure_id: int | None = _fk("adventures.id", ondelete="CASCADE")
    user_id: int | None = _fk("users.id", ondelete="CASCADE", big=True)
    payload_digest: str
    # What was asked (an action's type and text), so a failed or interrupted turn can be retried.
    payload: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    seen_version: int | None = None
    # Pressed on a button drawn for ``seen_version`` (which acts once), not typed as a command.
    from_button: bool = False
    status: str = "pending"
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    created_at: datetime = _when()
