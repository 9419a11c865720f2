"""What the narrator is told of the chapters: the open chapter and beat, the events it may
report, and (after a stall) a nudge. Pure text from the plan and the progress."""

from __future__ import annotations

from typing import Any

from engine.prompt.held_block import BlockPart
from engine.story.chapters.progress import Nudge, nudge_for, repaired

#: What the held-back block carries for the chapter (``engine.prompt.held_block``); its
#: example names no event of the chapter's own, which a small model would report as done.
EVENTS_RULE = (
    '"events": the events of this chapter listed above that happen in the story this '
    "turn{example}; nothing that did not happen, and never mention chapters, beats or events in "
    "the story itself."
)


def events_part(plan: dict[str, Any], progress: Any) -> BlockPart | None:
    """The chapter's part of the held-back block; None once the chapters are done."""
    state = repaired(plan, progress)
    if state["done"]:
        return None
    events = plan["chapters"][state["chapter"]]["events"]
    valued = [(n, e["values"][0]) for n, e in events.items() if e["fold"] == "set"]
    example = (
        f' (a value after a colon where one is listed, e.g. "{valued[0][0]}:{valued[0][1]}")'
        if valued
        else ""
    )
    return BlockPart(
        "events", "Chapter events", EVENTS_RULE.format(example=example), {"events": ["found_clue"]}
    )


def chapter_guide(plan: dict[str, Any], progress: Any) -> str:
    """The system-message section for the open chapter; "" once the chapters are done."""
    state = repaired(plan, progress)
    if state["done"]:
        return ""
    chapters = plan["chapters"]
    chapter = chapters[state["chapter"]]
    beat = chapter["beats"][state["beat"]]
    lines = [f"Chapter {state['chapter'] + 1} of {len(chapters)}: {chapter['title']}"]
    if chapter["notes"]:
        lines.append(chapter["notes"])
    lines.append(f"Now: {beat['title']}." + (f" {beat['notes']}" if beat["notes"] else ""))
    lines.append("Events of this chapter:")
    for name, event in chapter["events"].items():
        shown = f"{name}:<{'|'.join(event['values'])}>" if event["fold"] == "set" else name
        lines.append(f"- {shown}" + (f": {event['about']}" if event["about"] else ""))
    return "\n".join(lines)


def chapter_nudge(plan: dict[str, Any], progress: Any) -> Nudge | None:
    """The nudge for this turn, worded for the narrator, with Insights' reason."""
    nudge = nudge_for(plan, progress)
    if nudge is None:
        return None
    return Nudge(
        text=(
            "Gently, within the story and without forcing the players' hand, let something "
            f"happen that points them onward: {nudge.text}"
        ),
        reason=nudge.reason,
    )
