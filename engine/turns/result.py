"""What a stored turn gives back: ``TurnResult``, which the turn's plan, its commit, its events
and the request log all name; in a module of its own so that none of them has to import another
to name it."""

from __future__ import annotations

from dataclasses import dataclass

from engine.platform.events import Usage


@dataclass(frozen=True, slots=True)
class TurnResult:
    adventure_id: int
    version: int
    #: The first player node the turn wrote (a round writes several, in order after it).
    action_node_id: int | None
    narrator_node_id: int
    action_text: str
    text: str
    reasoning: str
    model: str
    usage: Usage | None
    latency_ms: int
    first_token_ms: int | None
    #: What the turn changed in the world state, in a line ("hp 100 → 85 (hurt) · …").
    state_chip: str = ""
    #: Which take of the turn this is, of how many (a retry adds one).
    take: int = 1
    take_count: int = 1
    #: A retry that could not replace its turn in place (later turns follow it) wrote this
    #: new turn beside it on a branch of its own; the replaced turn's node.
    replaced_node_id: int | None = None
    #: What the adventure's scripts set in ``state.message``, shown under the turn.
    script_message: str = ""
    #: A beat or chapter the turn completed, in a line shown under the turn (engine.story.chapters).
    chapter_note: str = ""
    #: The suggested actions the turn offers (``engine.story.suggestions``), as buttons.
    suggestions: tuple[str, ...] = ()
    #: Why an authored line narrates this turn instead of the model ("": the model did).
    fallback_reason: str = ""
