"""The tables of the operator's budget and the rate limits (``engine.people.limits``)."""

from __future__ import annotations

from datetime import date, datetime
from typing import ClassVar

from sqlalchemy import (
    BigInteger,
    Column,
    Date,
    Index,
    String,
)
from sqlmodel import Field, SQLModel

from engine.storage.models import _when


class TokenUse(SQLModel, table=True):
    """Tokens used on the operator's model in one UTC day by a player or a server.

    No foreign key: a player who deletes their data (/profile delete) does not get a fresh
    day's budget with it; the row holds nothing but an id and two numbers, and is dropped the
    next day (``engine.people.limits``)."""

    __tablename__: ClassVar[str] = "token_use"

    #: "user" or "server".
    scope: str = Field(sa_column=Column(String(8), primary_key=True))
    subject_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    day: date = Field(sa_column=Column(Date, primary_key=True))
    tokens: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    turns: int = 0


class LimitEvent(SQLModel, table=True):
    """One use of something limited per window (a /script test, an import), by a player."""

    __tablename__: ClassVar[str] = "limit_events"
    __table_args__ = (Index("ix_limit_events_user_kind_at", "user_id", "kind", "at"),)

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(sa_column=Column(String(16), nullable=False))
    user_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    at: datetime = _when()


class Cooldown(SQLModel, table=True):
    """A player's refusals by the rate limits: the later ones in a row lengthen the wait."""

    __tablename__: ClassVar[str] = "limit_cooldowns"

    user_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    #: Refusals in a row, each within ``engine.people.limits.STRIKE_WINDOW`` of the one before.
    strikes: int = 0
    last_strike_at: datetime = _when()
    #: Nothing rate-limited is played for the player before this.
    until: datetime = _when()
