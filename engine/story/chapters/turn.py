"""Chapters in a turn: what the context gets, and what the reply's events do.

The turn pipeline (``engine.turns.generate``) asks three things of an adventure that plays
chapters: the context's chapter sections (``context``), whether its block must be held back
from the stream (always, then), and, once the reply is in, the fold of the block's ``events``
into the progress kept in the new world state (``settle``). The fold's outcome is reported to
Insights with the turn's context report, and a beat or chapter done is shown under the turn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from engine.prompt.inputs import ContextInputs
from engine.prompt.report import ContextReport, ItemReport, SectionReport
from engine.storage.models import Adventure
from engine.story.chapters.progress import PROGRESS_KEY, ChapterEnd, Fold, fold
from engine.story.chapters.prompt import chapter_guide, chapter_nudge, events_part
from engine.story.chapters.store import adventure_plan, plays_chapters
from engine.story.world.apply import SettledWorld
from engine.story.world.parser import extract_state


@dataclass(frozen=True, slots=True)
class ChapterOutcome:
    """What a turn did to the chapters, for the turn's result."""

    #: The line under the narration ("" when no beat was done).
    note: str = ""
    #: The chapter the turn ended (its recap is written after the turn is stored).
    end: ChapterEnd | None = None


class ChapterTurn:
    """One turn of an adventure that plays chapters."""

    def __init__(self, adventure: Adventure, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.progress = (adventure.world_state or {}).get(PROGRESS_KEY)
        self.outcome = ChapterOutcome()

    @classmethod
    async def load(cls, session: AsyncSession, adventure: Adventure) -> ChapterTurn | None:
        """None for an adventure without chapters (and then no query is made)."""
        if not plays_chapters(adventure):
            return None
        assert adventure.id is not None
        plan = await adventure_plan(session, adventure.id)
        return cls(adventure, plan) if plan else None

    def context(self, inputs: ContextInputs) -> ContextInputs:
        nudge = chapter_nudge(self.plan, self.progress)
        events = events_part(self.plan, self.progress)
        return replace(
            inputs,
            chapter_guide=chapter_guide(self.plan, self.progress),
            block_parts=(*inputs.block_parts, *([events] if events else [])),
            chapter_nudge=nudge.text if nudge else "",
            chapter_nudge_reason=nudge.reason if nudge else "",
        )

    def settle(
        self, world: SettledWorld, output: str, *, turn_index: int, report: ContextReport
    ) -> SettledWorld:
        """Fold the reply's events into the progress of the world state the turn leaves."""
        found = extract_state(output)
        result = fold(self.plan, self.progress, found.lists.get("events"), turn_index=turn_index)
        report.sections.append(_events_report(result))
        self.outcome = ChapterOutcome(note=_note(result), end=result.chapter_end)
        state = {**world.state, PROGRESS_KEY: result.progress}
        # settle() took the block out of the prose (it holds the block for chapters).
        return replace(world, state=state)


def _events_report(result: Fold) -> SectionReport:
    """Insights' account of the reply's events: none of it went into the prompt."""
    accepted = sum(1 for o in result.outcomes if o.accepted)
    refused = len(result.outcomes) - accepted
    parts = [f"{accepted} accepted, {refused} refused"] if result.outcomes else ["none reported"]
    if result.beat_done:
        parts.append(f"beat “{result.beat_done['title']}” done")
    if result.chapter_end:
        parts.append(f"chapter “{result.chapter_end.title}” ended")
    elif not result.beat_done and not result.changed and not result.progress["done"]:
        parts.append(f"no progress ({result.progress['stalled']} stalled turns)")
    return SectionReport(
        key="chapter_events",
        title="Chapter events (from the reply)",
        tokens=0,
        reason="; ".join(parts),
        items=[
            ItemReport(label=o.event, tokens=0, included=o.accepted, reason=o.reason)
            for o in result.outcomes
        ],
    )


def _note(result: Fold) -> str:
    if result.chapter_end is not None:
        end = result.chapter_end
        if end.final:
            return (
                f"📖 Final chapter “{end.title}” complete: the story is told. "
                "/chapters shows the recaps and the epilogue."
            )
        return (
            f"📖 Chapter {end.index + 1} “{end.title}” complete · next: “{result.opened}” · "
            "/chapters shows its recap"
        )
    if result.beat_done is not None:
        return f"✦ {result.beat_done['title']}"
    return ""
