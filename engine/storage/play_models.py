"""Tables of the authored-play helpers (issue 22): suggested actions (and whether the model
writes them), the scenario's and the server's play options, the players' claims to characters,
and a scenario's openings to choose from at /start.

Kept apart from ``engine.storage.models`` so the features that use them stay in files of their
own; imported with it wherever the metadata is assembled (the migrations' env, this package).
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from sqlalchemy import JSON, Column, ForeignKey, Index, Integer, String, Text
from sqlmodel import Field, SQLModel

from engine.storage.models import _fk, _when


class TurnSuggestions(SQLModel, table=True):
    """The suggested actions one take of a narrator turn offered, in order (``engine.
    suggestions``): kept with the turn, so a restart still shows and accepts them, and a retry's
    take has its own."""

    __tablename__: ClassVar[str] = "turn_suggestions"

    node_id: int = Field(
        sa_column=Column(
            Integer,
            ForeignKey("story_nodes.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        )
    )
    take: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    texts: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))


class ScenarioPlayOptions(SQLModel, table=True):
    """A scenario's bundle options for play (``suggestions``, ``fallback``); a scenario without
    a row has the defaults (suggestions on, no authored fallback)."""

    __tablename__: ClassVar[str] = "scenario_play_options"

    scenario_id: int = Field(
        sa_column=Column(
            Integer,
            ForeignKey("scenarios.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        )
    )
    suggestions: bool = True
    fallback: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))


class SuggestionFit(SQLModel, table=True):
    """Whether the adventure's model writes suggested actions (``engine.story.suggestions.fit``):
    the model that last answered (its label) and how many of its replies in a row offered none.
    """

    __tablename__: ClassVar[str] = "suggestion_fit"

    adventure_id: int = Field(
        sa_column=Column(
            Integer,
            ForeignKey("adventures.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        )
    )
    model: str = Field(sa_column=Column(Text, nullable=False))
    missed: int = Field(default=0, sa_column=Column(Integer, nullable=False))


class CharacterClaim(SQLModel, table=True):
    """A short personal statement a player made to a character (``engine.story.claims``): kept as
    that player's word, never as a fact. It belongs to the action that made it, so it is on the
    story's line exactly while that action is (undo, retry and branches rewind it)."""

    __tablename__: ClassVar[str] = "character_claims"
    __table_args__ = (
        Index("ix_character_claims_adventure_character", "adventure_id", "character"),
    )

    id: int | None = Field(default=None, primary_key=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)
    node_id: int = _fk("story_nodes.id", ondelete="CASCADE", nullable=False)
    #: The player's own words: they go with the player's data (/profile delete).
    author_id: int | None = _fk("users.id", ondelete="CASCADE", big=True)
    #: The character addressed, case-folded (a card's title or a character's name).
    character: str = Field(sa_column=Column(String(160), nullable=False))
    #: Who said it, as the story names them (their character's name, or theirs).
    speaker: str = Field(sa_column=Column(String(160), nullable=False))
    #: What the statement is about ("favourite colour", "prefer"): a correction replaces it.
    slot: str = Field(sa_column=Column(String(80), nullable=False))
    text: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = _when()


class ScenarioOpening(SQLModel, table=True):
    """One more opening of a scenario, besides its own prompt (the first): a player chooses one
    at /start. A character card's ``alternate_greetings`` are these; its V3
    ``group_only_greetings`` are offered only to a group (in a server)."""

    __tablename__: ClassVar[str] = "scenario_openings"

    scenario_id: int = Field(
        sa_column=Column(
            Integer,
            ForeignKey("scenarios.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        )
    )
    position: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    text: str = Field(sa_column=Column(Text, nullable=False))
    group_only: bool = False
