"""What the context engine takes in and gives out: the story entries it sees, its inputs, the
built context, and the two-step ``ContextBuilder`` shape the turn loop uses."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from engine.llm.providers.base import ChatMessage
from engine.people.content import ContentPolicy, Rating
from engine.prompt.cards import Card
from engine.prompt.held_block import BlockPart, LeftOut
from engine.prompt.narrator import Voice, narrator_rules
from engine.prompt.report import ContextReport
from engine.prompt.tokens import count_tokens
from engine.storage.models import Adventure, Role, StoryNode

DEFAULT_BUDGET = 4096
DEFAULT_MAX_OUTPUT_TOKENS = 300

#: A solo story's narrator rules, as ``engine.prompt.narrator`` composes them.
NARRATOR_PROMPT = narrator_rules(group=False).text


# --- inputs ------------------------------------------------------------------------------------


def with_state_block(text: str, block: str) -> str:
    """A narrator entry's text with its state block after it (when it has one)."""
    block = block.strip()
    return f"{text.rstrip()}\n{block}" if block else text


def state_block_of(node: StoryNode) -> str:
    """The state block stored with a past narrator turn, or ""."""
    if node.role != Role.NARRATOR:
        return ""
    return node.state_block or ""


def reattach_state_block(node: StoryNode) -> str:
    """A past narrator turn's text with its state block re-attached, so the model keeps
    emitting the block; other entries' text as it is."""
    return with_state_block(node.text, state_block_of(node))


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One story entry as the builder sees it."""

    id: int | None
    index: int
    role: str
    text: str
    #: Measured when the entry was stored; None means "count it now".
    tokens: int | None = None
    #: A narrator turn's state block, re-attached after its text.
    state_block: str = ""

    @classmethod
    def from_node(cls, node: StoryNode) -> HistoryEntry:
        return cls(
            id=node.id,
            index=node.index,
            role=node.role,
            text=node.text,
            tokens=node.token_count,
            state_block=state_block_of(node),
        )

    @property
    def rendered(self) -> str:
        return with_state_block(self.text.strip(), self.state_block)

    @property
    def cost(self) -> int:
        text_tokens = self.tokens if self.tokens is not None else count_tokens(self.text)
        if self.state_block.strip():
            text_tokens += count_tokens(self.state_block.strip())
        return text_tokens


#: A retrieved memory or knowledge chunk: (label, text, why it was retrieved).
Retrieved = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class ContextInputs:
    """Everything ``build`` needs; gathered once per turn. Empty strings mean "absent"."""

    budget: int = DEFAULT_BUDGET
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    #: The adventure's settings held to the operator's ceilings this turn, in words
    #: (``engine.llm.ceilings``).
    clamped: tuple[str, ...] = ()
    #: The narrator's rules, solo or group (``engine.prompt.narrator``).
    narrator_prompt: str = NARRATOR_PROMPT
    #: A group adventure (one in a server): its party is listed after the narrator's rules.
    group: bool = False
    #: The voice the story is told in, which the narration's tidying holds it to.
    voice: Voice = Voice.SECOND
    #: The scenario's AI instructions as sent (their voice made the group's where it clashed).
    ai_instructions: str = ""
    #: Why the instructions sent differ from the scenario's, for Insights ("" when they do not).
    ai_instructions_note: str = ""
    #: The place's content rating, and what it allows (``engine.people.content``).
    content_rating: Rating = Rating.MODERATE
    content_rule: str = ""
    #: The words and phrases banned in the adventure (the operator's, server's, its own).
    banned: tuple[str, ...] = ()
    #: The players' characters, in the order they were made: (name, about).
    party: Sequence[tuple[str, str]] = ()
    #: Tokens the party may use; None means ``PARTY_SHARE`` of what is available.
    party_budget: int | None = None
    plot_essentials: str = ""
    story_summary: str = ""
    authors_note: str = ""
    #: Whether a script set the note (``state.memory.authorsNote``): it may then change every
    #: turn, so the layout keeps it after the story.
    authors_note_from_script: bool = False
    #: How many entries from the end of the story the note goes, the new action counted as the
    #: newest (SillyTavern's and AI Dungeon's depth); None: the layout's own place for it.
    authors_note_depth: int | None = None
    # World state (stats): the guide (stat legend with bands) is stable and goes in the system
    # message; the live state near the story; the one-line reminder last.
    world_state_guide: str = ""
    world_state: str = ""
    world_state_reminder: str = ""
    # The narrative state (engine.story.narrative): the scene's part of it near the story, and
    # why that part (for Insights).
    story_state: str = ""
    story_state_note: str = ""
    #: What the held-back block carries, one part per feature that reads it (the world state,
    #: chapter events, the narrative state, suggested actions): asked for in one instruction.
    block_parts: tuple[BlockPart, ...] = ()
    #: Parts the engine did not ask for this turn, with why (suggested actions on a model that
    #: does not write them).
    block_left_out: tuple[LeftOut, ...] = ()
    #: What players told the characters in the scene, quoted as theirs (``engine.story.claims``).
    claims: str = ""
    memories: Sequence[Retrieved] = ()
    #: What Insights says about the memory section as a whole (how many were considered, why
    #: semantic admission is off); shown even when no memory was admitted.
    memory_note: str = ""
    #: The chosen memories' ids: the turn's commit counts their use.
    memory_ids: tuple[int, ...] = ()
    knowledge: Sequence[Retrieved] = ()
    #: What Insights says about the knowledge section as a whole, as ``memory_note`` does.
    knowledge_note: str = ""
    #: Tokens knowledge may use; None means 15% of what is available.
    knowledge_budget: int | None = None
    #: The adventure's cards, in their order (always-on or not, triggered or not).
    cards: Sequence[Card] = ()
    #: The adventure's id: with ``line_length`` it seeds the cards' probability rolls, so the
    #: same turn rolls the same (``engine.prompt.card_scan.scan_cards``).
    adventure_id: int | None = None
    #: The newest entries of the story line, oldest first; the last is the head.
    history: Sequence[HistoryEntry] = ()
    #: How many entries the whole line has (the head's index + 1); None if unknown.
    line_length: int | None = None
    #: The player's new action as it goes into the story ("> You open the door."); "" for a
    #: continue.
    action_text: str = ""
    #: A script's ``state.memory.frontMemory``: placed after the newest action, unseen by players.
    front_memory: str = ""
    # Chapters (engine.story.chapters): the open chapter and beat with their events, in the system
    # message; a nudge after a stall near the story, with Insights' reason for it.
    chapter_guide: str = ""
    chapter_nudge: str = ""
    chapter_nudge_reason: str = ""

    @property
    def head(self) -> HistoryEntry | None:
        return self.history[-1] if self.history else None


# --- output ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BuiltContext:
    messages: list[ChatMessage]
    report: ContextReport = field(
        default_factory=lambda: ContextReport(
            budget=0, reserved=0, available=0, used=0, output_words=None
        )
    )
    #: The whole context as one text, with AI Dungeon's headings: what scripts see.
    script_text: str = ""

    @property
    def tokens(self) -> int:
        return self.report.used

    def snapshot(self) -> bytes:
        """Exactly what is sent, as JSON, for the prompt snapshot."""
        return json.dumps(
            [{"role": m.role, "content": m.content} for m in self.messages], ensure_ascii=False
        ).encode()


class ContextBuilder(Protocol):
    #: The operator's context budget: an adventure's own setting stands in for it, held to it
    #: on the operator's model (``engine.llm.ceilings``).
    budget: int
    #: The operator's content rules: the turn engine reads the banned words by them for what
    #: the model and the scripts write outside the narration (a chapter's recap, cards).
    content: ContentPolicy

    async def gather(
        self,
        session: AsyncSession,
        adventure: Adventure,
        action_text: str,
        *,
        script_state: dict[str, Any] | None = None,
    ) -> ContextInputs:
        """Read what the turn needs; what is read does not grow with the story.

        ``script_state``: the scripts' state as this turn's onInput left it (None: the stored
        one); its ``memory`` texts override the adventure's."""
        ...

    def build(self, inputs: ContextInputs) -> BuiltContext:
        """Fit ``inputs`` into the budget and render them. Pure: no I/O."""
        ...
