"""The narrative state's change log (``engine.story.narrative``): one row per accepted or refused
change, naming the turn (node and take) that caused it, or the host's correction made there.

The state itself is a column of the adventure (``Adventure.story_state``) and rides in the
story's snapshots; the log is history, so rewinding keeps it (each row belongs to its turn).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, Column, DateTime, Index, String
from sqlmodel import Field, SQLModel

from engine.storage.models import _fk, utcnow


class StoryStateChange(SQLModel, table=True):
    __tablename__: ClassVar[str] = "story_state_changes"
    __table_args__ = (Index("ix_story_state_changes_node_take", "node_id", "take"),)

    id: int | None = Field(default=None, primary_key=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)
    #: The turn (its narrator node) that caused it, or where the head stood for a correction.
    node_id: int | None = _fk("story_nodes.id", ondelete="CASCADE")
    #: Which take of that turn: a retry's take has its own changes.
    take: int = 1
    #: The turn's index in the story, for people to read ("turn 12").
    turn_index: int = 0
    #: ``model`` (the narration) or ``host`` (a correction).
    by: str = Field(sa_column=Column(String(8), nullable=False))
    #: entity, location, possession, relationship, fact, thread; ``refused`` for a refusal.
    kind: str = Field(sa_column=Column(String(16), nullable=False))
    key: str = Field(default="", sa_column=Column(String(200), nullable=False))
    before: Any | None = Field(default=None, sa_column=Column(JSON))
    after: Any | None = Field(default=None, sa_column=Column(JSON))
    #: The event as proposed; for a refusal, why it was refused.
    event: Any | None = Field(default=None, sa_column=Column(JSON))
    reason: str = Field(default="", sa_column=Column(String(300), nullable=False))
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
