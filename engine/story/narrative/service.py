"""``/story`` for the front end: the narrative state shown, the host's corrections, tracking
turned on or off.

A correction goes through the same validator as the model's events (``by`` the host, who
outranks Canon and the narration), is logged at the turn the head stands on, and moves the
story's version on, so a turn being written meanwhile is not saved over it. The state stays in
the head's snapshot the way a world-state correction does (``engine.story.snapshots``): undoing past
the turn takes the correction with it, redoing brings it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.errors import InvalidInput
from engine.people.access.checks import check_may_correct_story
from engine.people.access.rules import adventure_here
from engine.platform.sanitise import QUOTE_MAX, echo, sanitise
from engine.storage.models import ActionType, Role, StoryNode
from engine.story.line.read import narrator_turns
from engine.story.narrative.events import BY_HOST, apply_events
from engine.story.narrative.log import REFUSED, TurnCause, changes_at, record
from engine.story.narrative.render import change_line, describe
from engine.story.narrative.state import normalised, stored
from engine.story.versions import advance_version

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
    from engine.storage.database import Database

MOVED_ON = "The story moved on meanwhile; nothing was changed."

#: What ``/narrative correct`` can fix, each with the event it makes from ``subject`` and ``value``.
CORRECTIONS = (
    "entity",
    "location",
    "possession",
    "fact",
    "retract fact",
    "relation",
    "open thread",
    "close thread",
)


@dataclass(frozen=True, slots=True)
class LoggedChange:
    line: str
    by: str
    turn_index: int


@dataclass(frozen=True, slots=True)
class StoryView:
    title: str
    tracking: bool
    text: str
    #: What changed at the turn the head stands on (and why), the host's corrections there too.
    last_turn: tuple[LoggedChange, ...] = ()
    #: That turn's number as /insights counts them (the narrator's replies); 0: the opening.
    turn_number: int = 0


def correction_event(what: str, subject: str, value: str) -> dict[str, Any]:
    """The typed event a host's correction makes; ``value`` "" means none where it may."""
    held = value or None
    if what == "entity":
        return {"type": "add_entity", "name": subject, "kind": value}
    if what == "location":
        return {"type": "set_location", "entity": subject, "place": held}
    if what == "possession":
        return {"type": "set_possession", "item": subject, "holder": held}
    if what == "fact":
        return {"type": "add_fact", "text": subject, **({"about": held} if held else {})}
    if what == "retract fact":
        return {"type": "retract_fact", "id": subject}
    if what == "relation":
        a, sep, b = subject.partition(">")
        if not sep:
            raise InvalidInput("Name a relation as “A > B” (how A stands to B); nothing changed.")
        return {"type": "relate", "a": a.strip(), "b": b.strip(), "relation": value}
    if what == "open thread":
        return {"type": "open_thread", "text": subject}
    if what == "close thread":
        return {"type": "close_thread", "id": subject}
    raise InvalidInput(f"There is no correction “{echo(what, QUOTE_MAX)}”.")


class StoryStateService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def show(self, channel_id: int) -> StoryView:
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            state = normalised(adventure.story_state)
            last: tuple[LoggedChange, ...] = ()
            number = 0
            if adventure.head_node_id is not None:
                head = await session.get(StoryNode, adventure.head_node_id)
                if head is not None:
                    if head.role == Role.NARRATOR and head.action != ActionType.START:
                        number = len(await narrator_turns(session, adventure.head_node_id))
                    rows = await changes_at(session, adventure.head_node_id, head.live_take)
                    last = tuple(
                        LoggedChange(
                            f"refused: {row.reason}"
                            if row.kind == REFUSED
                            else change_line(row.kind, row.key, row.before, row.after, state),
                            row.by,
                            row.turn_index,
                        )
                        for row in rows
                    )
            return StoryView(
                adventure.title, adventure.story_tracking, describe(state), last, number
            )

    async def track(self, channel_id: int, actor: Actor, on: bool) -> str:
        async with self.db.transaction() as session:
            adventure = await adventure_here(session, channel_id, for_update=True)
            assert adventure.id is not None
            await check_may_correct_story(session, adventure, actor)
            if adventure.story_tracking == on:
                return "Story state tracking was already " + ("on." if on else "off.")
            await advance_version(
                session, adventure.id, adventure.version, moved_on=MOVED_ON, story_tracking=on
            )
        if on:
            return (
                "Story state tracking is on: the narrator records who is where, who holds what, "
                "what is true and which threads are open. `/narrative state` shows it."
            )
        return (
            "Story state tracking is off; what it holds is kept, and shown by `/narrative state`."
        )

    async def correct(
        self, channel_id: int, actor: Actor, what: str, subject: str, value: str = ""
    ) -> str:
        """Apply one correction; the lines of what changed."""
        what, subject, value = sanitise(what).strip(), sanitise(subject), sanitise(value)
        value = value.strip()
        async with self.db.transaction() as session:
            adventure = await adventure_here(session, channel_id, for_update=True)
            assert adventure.id is not None
            await check_may_correct_story(session, adventure, actor)
            event = correction_event(what, subject.strip(), value)
            outcome = apply_events(adventure.story_state, [event], by=BY_HOST)
            if outcome.refused:
                raise InvalidInput(f"Nothing was changed: {outcome.refused[0].reason}.")
            if not outcome.changes:
                return "Nothing changed: the story's state already says so."
            head = (
                await session.get(StoryNode, adventure.head_node_id)
                if adventure.head_node_id is not None
                else None
            )
            await advance_version(
                session,
                adventure.id,
                adventure.version,
                moved_on=MOVED_ON,
                story_state=stored(outcome.state),
            )
            cause = TurnCause(
                head.id if head else None,
                head.live_take if head else 1,
                head.index if head else 0,
                BY_HOST,
            )
            await record(session, adventure.id, cause, outcome)
            return "\n".join(
                change_line(c.kind, c.key, c.before, c.after, outcome.state)
                for c in outcome.changes
            )
