"""The cards the story proposes to an adventure's host every few turns
(``engine.story.steering.card_proposals``).

A row is the claim on one proposal, made before the model is asked: ``(adventure_id, turn)``
is unique, so of several processes that saw the same turn stored, one inserts it and the
others find it there and do nothing. It then holds the card the model wrote until the host
adds or discards it (the buttons in the host's DM name the row, so any process, a restarted
one included, answers a press), or why none was proposed ("skipped": never asked again).
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from sqlalchemy import Column, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from engine.storage.models import _fk, _when


class CardProposalState:
    """Where a proposal stands; plain text in the table."""

    #: Claimed: the model is being asked.
    WRITING = "writing"
    #: Written, waiting for the host's Add or Discard.
    READY = "ready"
    #: No subject, no room, no budget, or no card in the model's answer: nothing to show.
    SKIPPED = "skipped"
    ADDED = "added"
    DISCARDED = "discarded"


class CardProposalRecord(SQLModel, table=True):
    __tablename__: ClassVar[str] = "card_proposals"
    __table_args__ = (UniqueConstraint("adventure_id", "turn", name="uq_card_proposals_turn"),)

    id: int | None = Field(default=None, primary_key=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)
    #: The adventure's turn count the proposal was made at (a multiple of its setting).
    turn: int = 0
    #: Whom it was proposed to: the host then; only they may add it.
    host_id: int | None = _fk("users.id", ondelete="SET NULL", big=True)
    state: str = Field(
        default=CardProposalState.WRITING, sa_column=Column(String(12), nullable=False)
    )
    #: The draft card (``engine.story.steering.cards.CardDraft``), once written.
    title: str = Field(default="", sa_column=Column(String(100), nullable=False))
    type: str = Field(default="", sa_column=Column(String(40), nullable=False))
    keys: str = Field(default="", sa_column=Column(Text, nullable=False))
    entry: str = Field(default="", sa_column=Column(Text, nullable=False))
    created_at: datetime = _when()
