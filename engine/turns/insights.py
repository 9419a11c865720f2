"""Insights: what went into one narrator turn, and what it cost.

A turn is named either by its number as players see it (the narrator's replies on the current
line, 1 = the first reply after the opening) or by its node id (the 🔍 button under a turn).
Finding it walks the line's light columns in one recursive query; the heavy columns (the prompt
snapshot, the context and state reports) are then loaded for that one node only.
"""

from __future__ import annotations

import json
import logging
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotFound
from engine.library.knowledge.prompt import withhold_narrator_only
from engine.llm.providers.local import EMBEDDED_MARK
from engine.people.access.rules import adventure_here
from engine.prompt.report import ContextReport
from engine.storage.models import ActionType, Adventure, Role, StoryNode, undefer_field
from engine.story.line.read import narrator_turns

if TYPE_CHECKING:
    from engine.storage.database import Database

log = logging.getLogger(__name__)

#: Keys of a turn's state report that hold script output rather than world-state changes.
SCRIPT_LOG_KEYS = ("script_logs", "script_log", "logs", "script_errors")


@dataclass(frozen=True, slots=True)
class TurnInsights:
    """One narrator turn as Insights shows it. Plain data: no ORM object escapes."""

    number: int  # the turn's position as players see it (1 = first reply after the opening)
    node_id: int
    adventure_id: int
    model: str | None
    latency_ms: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    created_at: datetime | None
    report: ContextReport | None  # None for a turn played before reports were recorded
    state_report: dict[str, Any] | None
    prompt_text: str  # the exact prompt, readable; "" when none was stored
    script_logs: list[str] = field(default_factory=list)
    #: The model gave a reasoning trace for this turn (read on demand: ``Insights.reasoning``).
    has_reasoning: bool = False

    @property
    def has_prompt(self) -> bool:
        return bool(self.prompt_text)

    @property
    def cached_tokens(self) -> int | None:
        """Of the prompt tokens, how many the model did not read again (the context report
        keeps the figure the model's usage gave); None when it did not say."""
        return self.report.cached_tokens if self.report is not None else None

    @property
    def embedded(self) -> bool:
        """The turn was narrated by the embedded model (its label says so)."""
        return (self.model or "").endswith(EMBEDDED_MARK)


class Insights:
    """What the front end calls for /insights and the 🔍 button. Anyone may look."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def for_turn(
        self, channel_id: int, *, turn: int | None = None, node_id: int | None = None
    ) -> TurnInsights:
        """Insights for turn number ``turn`` of the story running in ``channel_id`` (the
        newest when None), or for the narrator node ``node_id`` of an adventure played there.

        Raises ``NotFound``/``InvalidInput`` with a message for players when there is no such
        turn.
        """
        async with self.db.session() as session:
            if node_id is not None:
                number = await _number_of(session, channel_id, node_id)
            else:
                node_id, number = await _node_for_turn(session, channel_id, turn)
            loaded = await _load_one(session, node_id)
        if loaded is None:  # removed between the two reads
            raise NotFound("That turn no longer exists.")
        node, has_reasoning = loaded
        return TurnInsights(
            number=number,
            node_id=node_id,
            adventure_id=node.adventure_id,
            model=node.model,
            latency_ms=node.latency_ms,
            prompt_tokens=node.prompt_tokens,
            completion_tokens=node.completion_tokens,
            created_at=node.created_at,
            report=_report(node.context_report, node_id),
            state_report=node.state_report or None,
            prompt_text=render_prompt(node.prompt_snapshot),
            script_logs=script_runs(node.context_report) + script_logs(node.state_report),
            has_reasoning=has_reasoning,
        )

    async def reasoning(self, channel_id: int, node_id: int) -> tuple[int, str]:
        """The model's reasoning trace for narrator node ``node_id`` (of an adventure played in
        ``channel_id``) and its turn number; "" when it gave none. Never part of the story:
        shown only to whoever asks, privately."""
        async with self.db.session() as session:
            number = await _number_of(session, channel_id, node_id)
            text = await session.scalar(
                select(col(StoryNode.reasoning)).where(col(StoryNode.id) == node_id)
            )
        return number, text or ""


# --- finding the turn --------------------------------------------------------------------------


async def _node_for_turn(
    session: AsyncSession, channel_id: int, turn: int | None
) -> tuple[int, int]:
    adventure = await adventure_here(session, channel_id)
    turns = await narrator_turns(session, adventure.head_node_id) if adventure.head_node_id else []
    if not turns:
        raise NotFound("The narrator has not replied yet, so there is nothing to show.")
    if turn is None:
        return turns[-1], len(turns)
    if not 1 <= turn <= len(turns):
        count = len(turns)
        so_far = "1 AI turn" if count == 1 else f"{count} AI turns"
        choose = "turn 1" if count == 1 else f"a turn from 1 to {count}"
        raise InvalidInput(
            f"There is no turn {turn}: this story has {so_far} so far. "
            f"Choose {choose}, or leave it empty for the newest."
        )
    return turns[turn - 1], turn


async def _number_of(session: AsyncSession, channel_id: int, node_id: int) -> int:
    """The position of narrator node ``node_id`` on its own line (it may be a take or branch
    no longer current); it must belong to an adventure played in ``channel_id``."""
    found = (
        await session.execute(
            select(col(StoryNode.role), col(StoryNode.action), col(Adventure.channel_id))
            .join(Adventure, col(Adventure.id) == col(StoryNode.adventure_id))
            .where(col(StoryNode.id) == node_id)
        )
    ).first()
    if found is None or found.channel_id != channel_id:
        raise NotFound("That turn no longer exists.")
    if found.role != Role.NARRATOR or found.action == ActionType.START:
        raise NotFound("Insights are kept for the narrator's replies only.")
    turns = await narrator_turns(session, node_id)
    return len(turns)


async def _load_one(session: AsyncSession, node_id: int) -> tuple[StoryNode, bool] | None:
    """The node with the heavy columns Insights needs, for this one node only, and whether it
    has a reasoning trace (its length only: the trace itself is read on demand)."""
    row = (
        await session.execute(
            select(StoryNode, func.length(col(StoryNode.reasoning)))
            .where(col(StoryNode.id) == node_id)
            .options(
                undefer_field(StoryNode.prompt_snapshot),
                undefer_field(StoryNode.state_report),
                undefer_field(StoryNode.context_report),
            )
            .execution_options(populate_existing=True)
        )
    ).first()
    return None if row is None else (row[0], bool(row[1]))


# --- reading what was stored -------------------------------------------------------------------


def _report(data: dict[str, Any] | None, node_id: int) -> ContextReport | None:
    if not data:
        return None
    try:
        return ContextReport.from_json(data)
    except (TypeError, KeyError, ValueError):
        log.warning("unreadable context report on node %s", node_id, exc_info=True)
        return None


def render_prompt(snapshot: bytes | None) -> str:
    """A stored prompt snapshot as readable text: each message under its role's heading."""
    if not snapshot:
        return ""
    try:
        messages = json.loads(zlib.decompress(snapshot))
    except (zlib.error, ValueError):
        log.warning("unreadable prompt snapshot", exc_info=True)
        return "(The stored prompt could not be read.)\n"
    if not isinstance(messages, list):
        return json.dumps(messages, ensure_ascii=False, indent=2) + "\n"
    parts = []
    for message in messages:
        if isinstance(message, dict):
            role = str(message.get("role", "?"))
            content = message.get("content", "")
            if not isinstance(content, str):
                content = json.dumps(content, ensure_ascii=False, indent=2)
        else:
            role, content = "?", str(message)
        # Players read this: a narrator-only setting file's passages are withheld.
        content = withhold_narrator_only(content)
        parts.append(f"=== {role} ===\n{content.rstrip()}")
    return "\n\n".join(parts) + "\n"


def script_runs(context_report: dict[str, Any] | None) -> list[str]:
    """The turn's script runs (``ContextReport.scripts``) as lines: per hook and script, its
    time and note, then its error and its logs."""
    if not context_report:
        return []
    lines: list[str] = []
    for run in context_report.get("scripts") or []:
        if not isinstance(run, dict):
            continue
        where = f"{run.get('hook', '?')} · {run.get('script', '?')}"
        head = f"{where}: {run.get('ms', 0)} ms"
        if run.get("note"):
            head += f", {run['note']}"
        lines.append(head)
        if run.get("error"):
            lines.append(f"error: {where}: {run['error']}")
        lines += [f"  {line}" for line in run.get("logs") or []]
    return lines


def script_logs(state_report: dict[str, Any] | None) -> list[str]:
    """Script output recorded with a turn (log lines and errors), if any."""
    if not state_report:
        return []
    lines: list[str] = []
    for key in SCRIPT_LOG_KEYS:
        value = state_report.get(key)
        if not value:
            continue
        entries = value if isinstance(value, list) else [value]
        for entry in entries:
            if isinstance(entry, dict):
                text = entry.get("message") or entry.get("text")
                where = entry.get("script") or entry.get("hook")
                if text is None:
                    text = json.dumps(entry, ensure_ascii=False)
                line = f"{where}: {text}" if where else str(text)
            else:
                line = str(entry)
            lines.append(f"error: {line}" if key == "script_errors" else line)
    return lines
