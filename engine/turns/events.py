"""A turn's events: what the engine tells the front end as a turn goes.

A turn is an async stream of ``TurnEvent``: the model's deltas (``engine.platform.events``) are
forwarded as they arrive, framed by what the engine did before and after. Front ends decide how
to show them; none of these is a Discord object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.platform.events import ReasoningDelta, TextDelta

if TYPE_CHECKING:
    from engine.errors import CampfireError
    from engine.story.rounds import RoundState
    from engine.turns.result import TurnResult


@dataclass(frozen=True, slots=True)
class ActionAccepted:
    """The player's action passed validation; ``text`` is how it reads in the story.

    Empty for ``continue``. Nothing is written to the database until the whole turn succeeds,
    so a failure later leaves no half-saved turn.
    """

    text: str


@dataclass(frozen=True, slots=True)
class TurnFailed:
    """The turn was rolled back; ``error.message`` is written for the player."""

    error: CampfireError


@dataclass(frozen=True, slots=True)
class TurnDone:
    result: TurnResult


@dataclass(frozen=True, slots=True)
class Queued:
    """The action waits behind ``position`` other turns of the same adventure."""

    position: int


@dataclass(frozen=True, slots=True)
class TurnInterrupted:
    """A turn of this adventure was cut off by a process that died; nothing of it was saved.

    ``request_id`` names the stored request, so the front end can offer to retry it.
    """

    request_id: int
    action_text: str


@dataclass(frozen=True, slots=True)
class AlreadyHandled:
    """This request arrived before (the same interaction id and payload): nothing runs again.

    ``status`` is what became of the first delivery: ``queued`` or ``running`` (still being
    played), ``done`` (``node_id`` is its narration, ``version`` the story's version after it),
    ``failed`` or ``refused`` (``error`` is what its player was told), ``interrupted``.
    """

    request_id: int
    status: str
    version: int | None = None
    node_id: int | None = None
    error: str = ""


@dataclass(frozen=True, slots=True)
class RoundSubmitted:
    """The player's action is in for the adventure's open round (``engine.story.rounds``), which
    stands as ``state`` says; when it closed the round, the round's turn follows."""

    state: RoundState
    #: The player had acted this round already: this action replaced theirs.
    replaced: bool = False


TurnEvent = (
    Queued
    | RoundSubmitted
    | TurnInterrupted
    | ActionAccepted
    | ReasoningDelta
    | TextDelta
    | TurnFailed
    | TurnDone
    | AlreadyHandled
)
