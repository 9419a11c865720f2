"""Chapter recaps: written once at a chapter's end, kept as they were written.

When a turn ends a chapter (``engine.story.chapters.progress``), once the turn is stored, the engine
writes the chapter's recap: the facts it knows (the beats and the turn each was done at, the
chapter's fields, its turns) and a few sentences from one short model call over the chapter's
story. A recap row is never updated: an undo leaves it, and a retry of the turn that ends the
chapter again adds the next ``version`` beside it. A model that fails (or says nothing) leaves
a recap of facts alone; the turn is never failed for it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from engine.llm.providers.base import (
    ChatMessage,
    ChatProvider,
    GenerationParams,
    ReplyLimits,
    whole_text,
)
from engine.people.content import BannedWords
from engine.platform.sanitise import sanitise
from engine.storage.chapter_models import ChapterRecap
from engine.storage.database import Database
from engine.story.chapters.progress import ChapterEnd
from engine.story.chapters.words import humanised
from engine.story.line.read import line_window
from engine.story.narration_hygiene import tidy_narration
from engine.story.world.parser import extract_state

log = logging.getLogger(__name__)

#: The recap call is short: a few sentences.
RECAP_MAX_TOKENS = 220
RECAP_SECONDS = 45.0
RECAP_MAX_CHARS = 1200
#: How much of the chapter's story the recap call reads (its end, where the chapter closed).
EXCERPT_TOKENS = 1500
EXCERPT_ENTRIES = 60

RECAP_SYSTEM = (
    "You write the recap of a chapter of an interactive story that has just ended: two to "
    "four sentences, past tense, in the story's voice. Use only what the story and the facts "
    "below show; invent nothing. No heading, no list, nothing outside the story."
)


def facts_lines(facts: dict[str, Any], words: Mapping[str, str] | None = None) -> list[str]:
    """The engine's facts of a chapter, as lines for people and for the recap call: the
    fields and set values in the scenario's words (``words.chapter_words``; ids missing there,
    as the words of a chapter no longer in the plan, are ``humanised``)."""

    def said(name: object) -> str:
        return (words or {}).get(str(name)) or humanised(str(name))

    lines = []
    beats = facts.get("beats") or []
    if beats:
        done = " · ".join(f"{b.get('title', '?')} (turn {b.get('at', '?')})" for b in beats)
        lines.append(f"Beats: {done}")
    fields = facts.get("fields") or {}
    if fields:
        shown = []
        for name, value in fields.items():
            if isinstance(value, bool):
                shown.append(f"{said(name)}: {'yes' if value else 'no'}")
            elif isinstance(value, list):
                shown.append(f"{said(name)}: {', '.join(map(said, value)) or 'none'}")
            else:
                shown.append(f"{said(name)}: {value}")
        lines.append("Tally: " + " · ".join(shown))
    if "from_turn" in facts and "to_turn" in facts:
        lines.append(f"Turns {facts['from_turn']}–{facts['to_turn']}")
    return lines


async def write_recap(
    db: Database,
    provider: ChatProvider,
    *,
    adventure_id: int,
    node_id: int,
    take: int,
    end: ChapterEnd,
    banned: BannedWords | None = None,
) -> ChapterRecap:
    """Write and store the recap of the chapter ``node_id``'s turn ended; never raises for
    the model (a failed call leaves the facts alone). ``banned``: the words banned where the
    adventure runs, masked in the model's text as in a narration (the facts are the engine's
    own and the story's, already masked, so they are left as they are)."""
    async with db.session() as session:
        nodes = await line_window(
            session, node_id, token_limit=EXCERPT_TOKENS, max_entries=EXCERPT_ENTRIES
        )
    story = "\n\n".join(
        node.text.strip()
        for node in nodes
        if node.index > end.facts.get("from_index", 0) and node.text.strip()
    )
    text = (banned or BannedWords()).mask(await _model_recap(provider, end, story))
    for _ in range(2):  # a retry written at the same moment may take the version first
        try:
            async with db.transaction() as session:
                newest = await session.scalar(
                    select(func.max(col(ChapterRecap.version))).where(
                        col(ChapterRecap.adventure_id) == adventure_id,
                        col(ChapterRecap.chapter_id) == end.chapter_id,
                    )
                )
                recap = ChapterRecap(
                    adventure_id=adventure_id,
                    chapter_id=end.chapter_id,
                    chapter_index=end.index,
                    title=end.title[:100],
                    version=(newest or 0) + 1,
                    node_id=node_id,
                    take=take,
                    facts=end.facts,
                    text=text,
                    epilogue=end.epilogue,
                    model=provider.label[:200],
                )
                session.add(recap)
                await session.flush()
            return recap
        except IntegrityError:
            continue
    raise RuntimeError("could not number the chapter's recap")


async def _model_recap(provider: ChatProvider, end: ChapterEnd, story: str) -> str:
    facts = "\n".join(facts_lines(end.facts, end.words))
    messages = [
        ChatMessage("system", RECAP_SYSTEM),
        ChatMessage(
            "user",
            f"Chapter {end.index + 1}: {end.title}\n{facts}\n\nThe chapter's story:\n{story}"
            "\n\nWrite the recap.",
        ),
    ]
    params = GenerationParams(max_tokens=RECAP_MAX_TOKENS, temperature=0.5)
    try:
        text = await whole_text(provider, messages, params, ReplyLimits(seconds=RECAP_SECONDS))
    except Exception as error:  # noqa: BLE001 - the facts stand without the model's words
        log.warning("chapter recap: the model gave none (%s)", error.__class__.__name__)
        return ""
    # The model's words enter the archive here: sanitised, any block taken out, tidied.
    text = tidy_narration(extract_state(sanitise(text)).prose).strip()
    return text[:RECAP_MAX_CHARS]
