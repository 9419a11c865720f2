"""Building what the model reads for a turn.

This is the plain builder: the narrator's instructions, the steering text and the recent story,
newest last. The budgeted context engine (sections, cards, memories, a token budget) replaces it
behind the same ``ContextBuilder`` shape, so the turn loop does not change.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from engine.providers.base import ChatMessage
from engine.storage.models import Adventure, Role, StoryNode
from engine.tokens import count_tokens

NARRATOR_PROMPT = (
    "You are the narrator of an interactive text adventure. Continue the story from where it "
    "stops, reacting to the player's last action. Write only the story: no headings, no "
    "commentary, no choices as a list, and never act or speak for the player."
)


@dataclass(frozen=True, slots=True)
class ContextSection:
    name: str
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class BuiltContext:
    messages: list[ChatMessage]
    sections: list[ContextSection] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(section.tokens for section in self.sections)

    def snapshot(self) -> bytes:
        """Exactly what is sent, as JSON, for the prompt snapshot."""
        return json.dumps(
            [{"role": m.role, "content": m.content} for m in self.messages], ensure_ascii=False
        ).encode()


class ContextBuilder(Protocol):
    #: How many of the newest story entries the builder wants to see.
    history_window: int

    def build(
        self, adventure: Adventure, history: Sequence[StoryNode], action_text: str
    ) -> BuiltContext: ...


class PlainContextBuilder:
    def __init__(self, history_window: int = 40) -> None:
        self.history_window = history_window

    def build(
        self, adventure: Adventure, history: Sequence[StoryNode], action_text: str
    ) -> BuiltContext:
        sections: list[ContextSection] = []

        def section(name: str, text: str) -> str:
            text = text.strip()
            if text:
                sections.append(ContextSection(name, text, count_tokens(text)))
            return text

        system_parts = [
            section("narrator", NARRATOR_PROMPT),
            section("ai_instructions", adventure.ai_instructions),
        ]
        essentials = section("plot_essentials", adventure.plot_essentials)
        if essentials:
            system_parts.append(f"World Lore:\n{essentials}")
        summary = section("story_summary", adventure.story_summary)
        if summary:
            system_parts.append(f"Story Summary:\n{summary}")

        entries = [node.text.strip() for node in history if node.text.strip()]
        if action_text:
            entries.append(action_text)
        story = section("history", "\n\n".join(entries))
        note = section("authors_note", adventure.authors_note)
        user = f"Recent Story:\n{story}" if story else "Begin the story."
        if note:
            user += f"\n\n[Author's note: {note}]"
        if history and history[-1].role == Role.NARRATOR and not action_text:
            user += "\n\nContinue the story."
        return BuiltContext(
            messages=[
                ChatMessage("system", "\n\n".join(p for p in system_parts if p)),
                ChatMessage("user", user),
            ],
            sections=sections,
        )
