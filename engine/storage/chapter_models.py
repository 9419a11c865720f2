"""The tables of chapters and beats (``engine.story.chapters``): a scenario's plan, the copy an
adventure plays from, and the recaps written at each chapter's end.

An adventure's progress through its plan is not here: it is part of the world state
(``world_state["chapters"]``), so undo, retry and branches rewind it with everything else.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import Column, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from engine.storage.models import _fk, _json, _when


class ScenarioChapters(SQLModel, table=True):
    """A scenario's checked chapter plan (``engine.story.chapters.plan``), one row per scenario."""

    __tablename__: ClassVar[str] = "scenario_chapters"

    scenario_id: int = Field(
        sa_column=Column(Integer, ForeignKey("scenarios.id", ondelete="CASCADE"), primary_key=True)
    )
    plan: dict[str, Any] = _json({})


class AdventureChapters(SQLModel, table=True):
    """The plan an adventure plays, copied from its scenario at the start: a later change to
    the scenario does not move the goalposts of a story under way."""

    __tablename__: ClassVar[str] = "adventure_chapters"

    adventure_id: int = Field(
        sa_column=Column(Integer, ForeignKey("adventures.id", ondelete="CASCADE"), primary_key=True)
    )
    plan: dict[str, Any] = _json({})


class ChapterRecap(SQLModel, table=True):
    """A chapter's recap, written once when a turn ended the chapter and never changed after.

    Undo leaves it as it is; a retry of that turn that ends the chapter again writes another
    ``version`` beside it."""

    __tablename__: ClassVar[str] = "chapter_recaps"
    __table_args__ = (
        UniqueConstraint("adventure_id", "chapter_id", "version", name="uq_chapter_recaps"),
    )

    id: int | None = Field(default=None, primary_key=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)
    #: The chapter's id in the plan, and its place (0 is the first).
    chapter_id: str = Field(sa_column=Column(String(40), nullable=False))
    chapter_index: int = 0
    title: str = Field(sa_column=Column(String(100), nullable=False))
    version: int = 1
    #: The narrator turn that ended the chapter (no foreign key: the recap outlives nothing it
    #: needs from the node, and a node is never deleted while its adventure lives).
    node_id: int | None = None
    #: Which take of that turn (a retry with no turn after it adds a take to the same node).
    take: int = 1
    #: What the engine knows of the chapter: its beats and when each was done, its fields.
    facts: dict[str, Any] = _json({})
    #: The model's few sentences; "" when the call failed (the facts stand alone then).
    text: str = Field(default="", sa_column=Column(Text, nullable=False))
    #: The final chapter's authored epilogue, as it was when the recap was written.
    epilogue: str = Field(default="", sa_column=Column(Text, nullable=False))
    model: str = Field(default="", sa_column=Column(String(200), nullable=False))
    created_at: datetime = _when()
