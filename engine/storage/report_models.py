"""Turns players reported to their server's moderators (``engine.play.reports``).

A report is kept so that a player reports a turn once, a flood of reports is bounded per
player, and the moderators' Undo button (its ``custom_id`` names the report) finds the turn and
says who undid it, after a restart too.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from sqlalchemy import BigInteger, Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from engine.storage.models import _fk, _when


class TurnReport(SQLModel, table=True):
    __tablename__: ClassVar[str] = "turn_reports"
    __table_args__ = (
        # One report of a turn per player: a second press is told it was sent.
        UniqueConstraint("node_id", "reporter_id", name="uq_turn_reports_node_reporter"),
        # A player's reports of the last hour, for the bound on them.
        Index("ix_turn_reports_reporter_created", "reporter_id", "created_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    server_id: int = _fk("servers.id", ondelete="CASCADE", nullable=False, big=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)
    node_id: int = _fk("story_nodes.id", ondelete="CASCADE", nullable=False)
    reporter_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    #: The message in the moderators' channel that shows the report (None until it is sent).
    channel_id: int | None = Field(default=None, sa_column=Column(BigInteger))
    message_id: int | None = Field(default=None, sa_column=Column(BigInteger))
    #: Who undid the turn from the report, if anyone did.
    undone_by: int | None = Field(default=None, sa_column=Column(BigInteger))
    created_at: datetime = _when()
