"""An adventure written out as Campfire's adventure file (``engine.library.formats.adventure``
reads it back): its story tree with every take, branches, save points, steering, cards, scripts,
memories, characters, chapters and their recaps, and narrative state; heavy columns read only
here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import undefer
from sqlmodel import col

from engine.library.formats.adventure import KIND, VERSION
from engine.library.formats.adventure_recaps import KEY as RECAPS_KEY
from engine.library.formats.adventure_recaps import export_recaps
from engine.library.knowledge.files import KEY as KNOWLEDGE_KEY
from engine.library.knowledge.files import (
    export_sources,
)
from engine.storage.memory_models import Memory
from engine.storage.models import (
    Adventure,
    AdventureCard,
    AdventureScript,
    Branch,
    SavePoint,
    StoryNode,
    Take,
)
from engine.storage.party_models import Character
from engine.story.chapters.plan import write_plan
from engine.story.chapters.store import adventure_plan
from engine.story.steering.settings import SAMPLING_RANGES

_NODE_LIGHT = (
    "index",
    "role",
    "action",
    "author_id",
    "text",
    "live_take",
    "take_count",
    "token_count",
    "model",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "state_block",
)
_NODE_HEAVY = ("reasoning", "state_before", "state_after", "state_report", "context_report")
_TAKE_HEAVY = ("text", "reasoning", "state_after")


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


async def export_adventure(session: AsyncSession, adventure: Adventure) -> dict[str, Any]:
    assert adventure.id is not None
    nodes = list(
        await session.scalars(
            select(StoryNode)
            .where(col(StoryNode.adventure_id) == adventure.id)
            .order_by(col(StoryNode.id))
            # The whole tree is the point here, heavy columns included (bar the prompt).
            .options(*(undefer(getattr(StoryNode, name)) for name in _NODE_HEAVY))
        )
    )
    number = {node.id: i for i, node in enumerate(nodes)}
    node_rows = []
    for node in nodes:
        row: dict[str, Any] = {"parent": number.get(node.parent_id)}
        row |= {name: getattr(node, name) for name in _NODE_LIGHT}
        row |= {name: getattr(node, name) for name in _NODE_HEAVY}
        row["role"], row["action"] = str(node.role), str(node.action)
        row["created_at"] = _iso(node.created_at)
        node_rows.append(row)
    takes = await session.scalars(
        select(Take)
        .join(StoryNode, col(Take.node_id) == col(StoryNode.id))
        .where(col(StoryNode.adventure_id) == adventure.id)
        .order_by(col(Take.node_id), col(Take.number))
        .options(*(undefer(getattr(Take, name)) for name in _TAKE_HEAVY))
    )
    branches = list(
        await session.scalars(
            select(Branch).where(col(Branch.adventure_id) == adventure.id).order_by(col(Branch.id))
        )
    )
    branch_name = {b.id: b.name for b in branches}
    save_points = await session.scalars(
        select(SavePoint)
        .where(col(SavePoint.adventure_id) == adventure.id)
        .order_by(col(SavePoint.id))
    )
    cards = await session.scalars(
        select(AdventureCard)
        .where(col(AdventureCard.adventure_id) == adventure.id)
        .order_by(col(AdventureCard.position), col(AdventureCard.id))
    )
    scripts = await session.scalars(
        select(AdventureScript)
        .where(col(AdventureScript.adventure_id) == adventure.id)
        .order_by(col(AdventureScript.position), col(AdventureScript.id))
    )
    memories = await session.scalars(
        select(Memory).where(col(Memory.adventure_id) == adventure.id).order_by(col(Memory.id))
    )
    characters = await session.scalars(
        select(Character)
        .where(col(Character.adventure_id) == adventure.id)
        .order_by(col(Character.id))
    )
    return {
        "campfire": KIND,
        "version": VERSION,
        "title": adventure.title,
        "icon": adventure.icon,
        "prompt": adventure.prompt,
        "plot_essentials": adventure.plot_essentials,
        "authors_note": adventure.authors_note,
        "ai_instructions": adventure.ai_instructions,
        "stat_schema": adventure.stat_schema,
        "story_summary": adventure.story_summary,
        "world_state": adventure.world_state,
        "script_state": adventure.script_state,
        # The plan it plays (its progress is in the world state), and the recaps of the
        # chapters it ended, which no later turn would write again.
        **write_plan(await adventure_plan(session, adventure.id)),
        RECAPS_KEY: await export_recaps(session, adventure.id, number),
        "story_state": adventure.story_state,
        "story_tracking": adventure.story_tracking,
        "settings": {
            "context_tokens": adventure.context_tokens,
            "max_output_tokens": adventure.max_output_tokens,
            "temperature": adventure.temperature,
            # Its sampling (``engine.llm.sampling``); None: the model server's own.
            **{name: getattr(adventure, name) for name in SAMPLING_RANGES},
            "stop_strings": list(adventure.stop_strings),
            "authors_note_depth": adventure.authors_note_depth,
            "message_play": adventure.message_play,
            "card_proposals": adventure.card_proposals,
            "banned_words": list(adventure.banned_words),
        },
        "memory_cursor": adventure.memory_cursor,
        "summary_cursor": adventure.summary_cursor,
        "story_version": adventure.version,
        "created_at": _iso(adventure.created_at),
        "story_cards": [
            {
                "title": c.title,
                "type": c.type,
                "keys": c.keys,
                "entry": c.entry,
                "description": c.description,
                "always_on": c.always_on,
                **({"lore": c.lore} if c.lore else {}),
                # The id a script gave the card, which the script looks it up by again.
                **({"script_id": c.script_id} if c.script_id else {}),
            }
            for c in cards
        ],
        "scripts": [
            {
                "name": s.name,
                "description": s.description,
                "enabled": s.enabled,
                "shared_library": s.shared_library,
                "on_input": s.on_input,
                "on_model_context": s.on_model_context,
                "on_output": s.on_output,
            }
            for s in scripts
        ],
        "nodes": node_rows,
        "takes": [
            {
                "node": number[t.node_id],
                "number": t.number,
                "text": t.text,
                "reasoning": t.reasoning,
                "state_after": t.state_after,
                "created_at": _iso(t.created_at),
            }
            for t in takes
        ],
        "branches": [
            {"name": b.name, "tip": number.get(b.tip_node_id), "created_at": _iso(b.created_at)}
            for b in branches
        ],
        "save_points": [
            {
                "name": p.name,
                "node": number[p.node_id],
                "branch": branch_name.get(p.branch_id),
                "created_at": _iso(p.created_at),
            }
            for p in save_points
        ],
        "memories": [
            {
                "text": m.text,
                "source_start": m.source_start,
                "source_end": m.source_end,
                "pinned": m.pinned,
                "forgotten": m.forgotten,
                "use_count": m.use_count,
                "last_used_at": _iso(m.last_used_at),
                "created_at": _iso(m.created_at),
            }
            for m in memories
        ],
        # Its players' characters, by Discord id as the nodes' authors are: restored where
        # those players are known, as authors are (the people themselves are not exported).
        "characters": [
            {"user_id": c.user_id, "name": c.name, "about": c.about, "pronouns": c.pronouns}
            for c in characters
        ],
        "head": number.get(adventure.head_node_id),
        "active_branch": branch_name.get(adventure.active_branch_id),
        # Its own setting files (not narrator-only ones); their passages are cut again.
        KNOWLEDGE_KEY: await export_sources(session, adventure.id),
    }
