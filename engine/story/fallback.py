"""Authored fallback (issue 22, Deliver 5): when the model fails, a line the scenario's author
wrote keeps the scene going instead of a dead end.

A scenario's bundle may carry ``"fallback": ["…", …]``. When the model cannot give a usable
reply (any ``ModelError``: refused, unreachable, timed out, broken or empty, after the provider
client's own handling), the turn is stored with one of those lines as its narration, marked as
the author's (its model is ``FALLBACK_MODEL``, and the turn says why under it), the world
state left as it was; the players' Retry asks the model again for that turn as another take.
Without lines, a failed turn is what it always was: nothing stored, a Retry button.

No model call is made for a fallback line, and none is made again on its own: a turn cut off
with its process (an expired claim) is only told to its channel with its Retry (DESIGN §6),
whatever lines the scenario has.

Where the lines come from is ``fallback_lines``: in an adventure that plays chapters
(``engine.story.chapters``), the open beat's lines, else its chapter's; else the scenario's. The
most specific author's words fit the scene best.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from engine.platform.sanitise import sanitise
from engine.storage.models import Adventure
from engine.storage.play_models import ScenarioPlayOptions
from engine.story.chapters.progress import PROGRESS_KEY, open_lines
from engine.story.chapters.store import adventure_plan, plays_chapters

#: The model a fallback turn is stored as made by (Insights shows it).
FALLBACK_MODEL = "authored fallback"
#: The most of the model's error quoted under a fallback line.
FALLBACK_REASON_MAX = 300
#: At most this many lines are kept from a bundle, each at most this long.
MAX_LINES = 20
MAX_LINE_CHARS = 1000


def read_lines(raw: Any) -> list[str]:
    """A bundle's ``fallback`` value as the lines kept: text only, trimmed, bounded."""
    if not isinstance(raw, list):
        return []
    lines = [sanitise(item).strip() for item in raw if isinstance(item, str)]
    return [line[:MAX_LINE_CHARS] for line in lines if line][:MAX_LINES]


async def fallback_lines(session: AsyncSession, adventure: Adventure) -> list[str]:
    """The authored lines that may stand in for a failed narration of ``adventure`` (none:
    a failure stays a failure)."""
    if plays_chapters(adventure):
        assert adventure.id is not None
        lines = open_lines(
            await adventure_plan(session, adventure.id),
            (adventure.world_state or {}).get(PROGRESS_KEY),
        )
        if lines:
            return lines
    if adventure.scenario_id is None:
        return []
    options = await session.get(ScenarioPlayOptions, adventure.scenario_id)
    return list(options.fallback) if options is not None else []


def choose_line(lines: Sequence[str], turn_index: int) -> str:
    """One of ``lines`` for the turn at ``turn_index``: in turn, so that failures one after
    another do not repeat the same line, and the same for the same turn (a test can say
    which)."""
    return lines[turn_index % len(lines)]


def fallback_note(reason: str) -> str:
    """What the players are told under a fallback line: why the model did not narrate, and that
    Retry asks it again."""
    note = f"✍ An authored line stands in for the narrator, who faltered: {reason}"
    return note if "Retry" in reason else f"{note} Retry asks the model again."
