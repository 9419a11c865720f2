"""Building what the model reads for a turn: the context engine (docs/DESIGN.md §3).

Two steps, so the turn loop stays thin and the rules can be tested without a database:

* ``gather`` reads what a turn needs (the adventure's cards, the tail of the story line sized
  by the tokens stored with each entry, and what its retrievers find for the recent story)
  into a ``ContextInputs``;
* ``build`` is pure: it fits the inputs into the token budget and renders the messages, the
  text AI Dungeon scripts see, and the ``ContextReport`` Insights shows.

The budget: ``available = max(256, budget − reserved)``, where ``reserved`` is the reply's
maximum output tokens. Fixed sections always go in (the narrator's rules, solo or group, the
party (within its own budget), AI instructions, the world-state guide, the held-back block, plot
essentials, story summary, memories, knowledge (within its own budget), the live world state,
the author's note, the player's new action, the length hint and the world-state reminder).
What is left is elastic: story cards (always-on or triggered by their keys in the recent
story, always-on ones first) take at most 40% of it together, then history fills the rest,
newest first. Cards that do not fit
are reported as excluded; if even the newest entry does not fit it is truncated (its end kept),
not dropped. Empty sections cost nothing and do not appear.

Layout: one for every model, laid out so that each turn's prompt begins with the last turn's.
Hosted providers cache the longest prompt prefix they have seen (OpenAI, DeepSeek, OpenRouter,
llama.cpp's server) and bill or wait less for it; the embedded llama.cpp model skips the prefix
it has already evaluated (on a small CPU, reading the prompt is most of a turn's wait). Only
the story is ever appended to, so everything that changes from turn to turn goes after it:

* the system message: the narrator's rules (``engine.prompt.narrator``: solo or group, and the
  story's voice), the content rating, the party (within its own budget: ``party_share`` of what
  is available), AI instructions, the world-state guide, the chapter, and the one instruction
  for the held-back block (``engine.prompt.held_block``: the world state, chapter events, the
  narrative state and suggested actions, as one block with one example), then the length hint
  and the adventure's own author's note, which are the same every turn;
* the user message: plot essentials (unlabelled, as AI Dungeon sends them), the always-on
  story cards ("World Lore:", section ``always_cards``) and the story summary, then "Recent
  Story:" (its window's start moves ``ANCHOR_STEP`` entries at a time rather than every turn),
  then memories, knowledge, the triggered cards (a second "World Lore:", ``story_cards``), the
  live world state, a note a script set, the player's new action, a script's front memory, and
  the one-line world-state reminder as the very last line. A card's own ``position`` may put
  it elsewhere: before the story, around the author's note, or at a depth in the story
  (``engine.prompt.lore_places``).

A turn then reads again only the newest turn and what follows it (``bench_context``'s prefix
line: p50 83 %). Always-on cards go before the story because they are the same every turn
(after it, the p50 was 79 %). On a turn the window's start moves, only what comes before the
story repeats (the min, 10 %); DESIGN §3 gives the figures that kept the step at 8.

The author's note is where AI Dungeon's classic layout differs: it puts the note 3 entries
from the end, inside the story, which moves it every turn and so cuts the shared prefix at the
last turn's note. Here the adventure's own note, a standing instruction, closes the system
message, where chat models take their standing instructions; a note a script sets may change
every turn, so it goes after the story, just before the action, near where AI Dungeon puts it.
An adventure may ask for its note at a depth, entries from the story's end as SillyTavern and
AI Dungeon count them (``note_place``); the shared prefix then ends where it stood last turn.

Costs do not grow with the story: token counts are taken once per section text (``count_tokens``
is cached by text) or from the count stored with each story entry, and history is read as a
window that stops once it holds more tokens than the history can use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from engine.library.knowledge.prompt import knowledge_section
from engine.library.scripting.hooks import script_memory
from engine.llm.providers.base import ChatMessage
from engine.llm.retrieval.retriever import CountsUse, Found, Retriever
from engine.people.content import RATING_RULES, ContentPolicy, adventure_rating, banned_words
from engine.prompt.card_scan import ScanWindow
from engine.prompt.cards import DEFAULT_SCAN_ENTRIES, load_context_cards, scan_text
from engine.prompt.inputs import (
    DEFAULT_BUDGET,
    DEFAULT_MAX_OUTPUT_TOKENS,
    BuiltContext,
    ContextInputs,
    HistoryEntry,
)
from engine.prompt.lore_places import insert_at_depths, lay_out, place_cards
from engine.prompt.narrator import narrator_rules
from engine.prompt.report import ContextReport
from engine.prompt.sections import (
    ANCHOR_STEP,
    HEADINGS,
    Section,
    authors_note_line,
    block,
    block_section,
    history_section,
    listed,
    output_hint,
    output_words,
    party,
)
from engine.prompt.tokens import count_tokens, truncate_to_tokens
from engine.storage.models import Adventure, Role
from engine.story.characters import party_sheets
from engine.story.line.read import line_window
from engine.story.narrative.turn import story_context
from engine.story.pronouns import named
from engine.story.world.apply import world_sections

#: The context budget when neither the adventure nor the operator sets one (bot.config's).
MIN_AVAILABLE = 256
CARD_SHARE = 0.40
KNOWLEDGE_SHARE = 0.15
PARTY_SHARE = 0.10
#: A hard cap on history entries, whatever their size.
MAX_HISTORY_ENTRIES = 200
#: Sections that may change from one turn to the next (what retrievers found): they go after
#: the story.
TURN_BY_TURN = frozenset(("memories", "knowledge"))
#: When nothing is left for history, the newest entry still keeps this many tokens.
MIN_NEWEST_TOKENS = 64

CONTINUE_CUE = "Continue the story."

#: The sections retrievers fill, each with the ContextInputs fields it goes into: the chosen
#: items, the summary Insights shows for the section, and the ids whose use the turn's commit
#: counts (None: the section counts none). Where they go and what budget they get is the
#: layout's business (``_fixed``), not the retriever's.
RETRIEVED_SECTIONS: dict[str, tuple[str, str, str | None]] = {
    "memories": ("memories", "memory_note", "memory_ids"),
    "knowledge": ("knowledge", "knowledge_note", None),
}

# Sections and entries are counted apart and joined with newlines, which cost nothing more:
# cl100k merges "\n\n" into the tokens around it (".\n\n" is one token), so the sum of the
# parts' counts is within a token or two of the whole's (tests/test_context.py checks it).


def available_tokens(budget: int, reserved: int) -> int:
    """What the prompt may use: ``max(256, budget − reserved)``."""
    return max(MIN_AVAILABLE, budget - reserved)


# --- the engine --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Fixed:
    """The sections that always go in, and what they cost."""

    system: list[Section]
    before_cards: list[Section]  # plot essentials, summary, memories, knowledge
    after_cards: list[Section]  # the live world state
    note: Section | None
    action: Section | None
    front: Section | None  # a script's frontMemory, after the action
    tail: list[Section]  # continue cue, length hint, reminder (last)
    tokens: int
    output_words: int | None


class ContextEngine:
    """The context builder: budgets, cards, history windows, the Insights report."""

    def __init__(
        self,
        *,
        budget: int = DEFAULT_BUDGET,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
        card_share: float = CARD_SHARE,
        knowledge_share: float = KNOWLEDGE_SHARE,
        party_share: float = PARTY_SHARE,
        scan_entries: int = DEFAULT_SCAN_ENTRIES,
        max_history_entries: int = MAX_HISTORY_ENTRIES,
        retrievers: Sequence[Retriever] = (),
        content: ContentPolicy | None = None,
    ) -> None:
        self.budget = budget
        #: The operator's content rules: the rating the narrator is told, the banned words.
        self.content = content or ContentPolicy()
        self.max_output_tokens = max_output_tokens
        self.card_share = card_share
        self.knowledge_share = knowledge_share
        self.party_share = party_share
        self.scan_entries = scan_entries
        self.max_history_entries = max_history_entries
        sections = [retriever.section for retriever in retrievers]
        for section in sections:
            if section not in RETRIEVED_SECTIONS:
                raise ValueError(f"no context section {section!r} for a retriever to fill")
            if sections.count(section) > 1:
                raise ValueError(f"two retrievers fill the {section!r} section")
        self.retrievers = tuple(retrievers)

    # --- gather: the database reads ---

    async def gather(
        self,
        session: AsyncSession,
        adventure: Adventure,
        action_text: str,
        *,
        script_state: dict[str, Any] | None = None,
    ) -> ContextInputs:
        assert adventure.id is not None
        banned = await banned_words(session, adventure, self.content)
        # Scripts' state.memory overrides the adventure's texts; an empty value falls back.
        # Masked here too, not only as a run leaves it: a state stored before a word was banned
        # still reaches the narrator, with or without a script to run.
        state = adventure.script_state if script_state is None else script_state
        memory = script_memory(state, banned)
        rating = await adventure_rating(session, adventure, self.content)
        group = adventure.server_id is not None
        rules = narrator_rules(group=group, instructions=adventure.ai_instructions)
        inputs = ContextInputs(
            budget=adventure.context_tokens or self.budget,
            max_output_tokens=adventure.max_output_tokens or self.max_output_tokens,
            narrator_prompt=rules.text,
            group=group,
            voice=rules.voice,
            ai_instructions=rules.instructions,
            ai_instructions_note=rules.note,
            content_rating=rating,
            content_rule=RATING_RULES[rating],
            banned=banned.words,
            party=tuple(
                (named(sheet.name, sheet.pronouns), sheet.about)
                for sheet in await party_sheets(session, adventure.id)
            ),
            plot_essentials=memory.get("context") or adventure.plot_essentials,
            story_summary=adventure.story_summary,
            authors_note=memory.get("authorsNote") or adventure.authors_note,
            authors_note_from_script=bool(memory.get("authorsNote")),
            authors_note_depth=adventure.authors_note_depth,
            front_memory=memory.get("frontMemory", ""),
            # Memories and knowledge are filled in below, by the retrievers.
            cards=await load_context_cards(session, adventure.id),
            adventure_id=adventure.id,
            action_text=action_text,
        )
        world = world_sections(
            adventure.stat_schema, adventure.world_state, recent_text=action_text
        )
        inputs = replace(
            inputs,
            world_state_guide=world.guide,
            world_state=world.state,
            world_state_reminder=world.reminder,
            block_parts=(world.rule,) if world.rule else (),
        )
        if adventure.head_node_id is None:
            return inputs
        nodes = await line_window(
            session,
            adventure.head_node_id,
            token_limit=self.history_ceiling(inputs),
            max_entries=self.max_history_entries,
        )
        if world.state:
            # Which NPCs are in scene depends on the recent story, known only now.
            recent = scan_text(
                [n.text for n in nodes if n.text.strip()], action_text, self.scan_entries
            )
            inputs = replace(
                inputs,
                world_state=world_sections(
                    adventure.stat_schema, adventure.world_state, recent_text=recent
                ).state,
            )
        if adventure.story_tracking:
            # The scene's entities are those the recent story names, known only now.
            recent = scan_text(
                [n.text for n in nodes if n.text.strip()], action_text, self.scan_entries
            )
            story = story_context(
                adventure.story_state,
                tracking=True,
                recent_text=recent,
                available=available_tokens(inputs.budget, inputs.max_output_tokens),
            )
            inputs = replace(
                inputs,
                block_parts=(*inputs.block_parts, *([story.rule] if story.rule else [])),
                story_state=story.section,
                story_state_note=story.note,
            )
        if self.retrievers:
            # The query is the new action and the newest entries, newest first. One session:
            # the retrievers take their turns.
            recent = [action_text, *(n.text for n in reversed(nodes))]
            for retriever in self.retrievers:
                found = await retriever.retrieve(session, adventure.id, recent)
                inputs = _with_found(inputs, retriever.section, found)
        return replace(
            inputs,
            history=tuple(HistoryEntry.from_node(node) for node in nodes),
            line_length=nodes[-1].index + 1 if nodes else 0,
        )

    def history_ceiling(self, inputs: ContextInputs) -> int:
        """The most tokens history could get (no cards), to size the window read for it."""
        return max(self._remainder(inputs, self._fixed(inputs)), MIN_NEWEST_TOKENS)

    # --- build: pure ---

    def build(self, inputs: ContextInputs) -> BuiltContext:
        reserved = inputs.max_output_tokens
        available = available_tokens(inputs.budget, reserved)
        fixed = self._fixed(inputs)
        remainder = self._remainder(inputs, fixed)

        history = list(inputs.history)
        told = [entry for entry in history if entry.text.strip()]
        window = ScanWindow(
            [entry.text for entry in told],
            inputs.action_text,
            self.scan_entries,
            indices=[entry.index for entry in told],
            turn=inputs.line_length,
            # A turn began after each narration (an action, or a continue's narration).
            starts=[
                entry.index
                for before, entry in zip(history, history[1:], strict=False)
                if before.role == Role.NARRATOR
            ],
        )
        placed = place_cards(
            inputs.cards,
            window,
            int(remainder * self.card_share),
            self.card_share,
            # With the window's turn, the entry being written: a retry or an undo writes the same
            # one again, so it rolls the same.
            seed=str(inputs.adventure_id),
        )
        history_room = remainder - placed.tokens
        # The length hint and the adventure's own note are the same every turn: they close the
        # system message rather than be read again after each turn's story. A note a script
        # sets may change every turn; it stays with the turn's other changes. A depth the
        # adventure sets puts it that far from the story's end (``note_place``); cards placed
        # in the note or at a depth go with it (``engine.prompt.lore_places``).
        laid = lay_out(
            placed,
            fixed.note,
            note_depth=inputs.authors_note_depth,
            from_script=inputs.authors_note_from_script,
            action=fixed.action is not None,
            story=any(entry.text.strip() for entry in history),
        )
        story = self._history(inputs, history_room, [(n, s.text) for n, s in laid.in_story])
        system = [*fixed.system, *(s for s in fixed.tail if s.key == "output_hint"), *laid.system]
        beside = [*laid.before_action, fixed.action, *laid.after_action, fixed.front]
        beside = [s for s in beside if s is not None]
        tail = [s for s in fixed.tail if s.key != "output_hint"]
        # Before the story, what is the same every turn: plot essentials, the always-on cards
        # (as AI Dungeon orders them, before the summary) and the story summary.
        stable = [
            *(s for s in fixed.before_cards if s.key == "plot_essentials"),
            *([placed.before] if placed.before else []),
            *(s for s in fixed.before_cards if s.key not in {*TURN_BY_TURN, "plot_essentials"}),
        ]
        changing = [s for s in fixed.before_cards if s.key in TURN_BY_TURN]
        found = [placed.after] if placed.after and placed.after.text else []
        user = [
            *stable,
            story,
            *changing,
            *found,
            *fixed.after_cards,
            *beside,
            *tail,
        ]
        user = [section for section in user if section.text]
        system_text = "\n\n".join(section.text for section in system if section.text)
        user_text = "\n\n".join(section.text for section in user)
        messages = []
        if system_text:
            messages.append(ChatMessage("system", system_text))
        messages.append(ChatMessage("user", user_text))

        # Reported in the order sent; a section with nothing in it (cards all left out, no
        # memory found) is reported still, to say why.
        reported = [
            *system,
            *stable,
            story,
            *(section for _, section in laid.in_story),
            *changing,
            *([placed.after] if placed.after else []),
            *fixed.after_cards,
            *beside,
            *tail,
        ]
        used = sum(section.tokens for section in reported)
        report = ContextReport(
            budget=inputs.budget,
            reserved=reserved,
            available=available,
            used=used,
            output_words=fixed.output_words,
            sections=[section.report() for section in reported],
            clamped=list(inputs.clamped),
        )
        return BuiltContext(
            messages=messages,
            report=report,
            script_text="\n\n".join(text for text in (system_text, user_text) if text),
        )

    # --- the parts ---

    def _remainder(self, inputs: ContextInputs, fixed: _Fixed) -> int:
        available = available_tokens(inputs.budget, inputs.max_output_tokens)
        return max(0, available - fixed.tokens)

    def _fixed(self, inputs: ContextInputs) -> _Fixed:
        available = available_tokens(inputs.budget, inputs.max_output_tokens)
        instructions = block("ai_instructions", "AI instructions", inputs.ai_instructions)
        if instructions and inputs.ai_instructions_note:
            instructions.reason = inputs.ai_instructions_note
        system = [
            s
            for s in (
                # The narrator's rules, solo or group, composed in one place (prompt.narrator).
                block("narrator", "Narrator rules", inputs.narrator_prompt),
                block("content_rule", "Content rating", inputs.content_rule),
                party(
                    inputs.party,
                    inputs.party_budget
                    if inputs.party_budget is not None
                    else int(available * self.party_share),
                ),
                instructions,
                block("world_state_guide", "World-state guide", inputs.world_state_guide),
                block("chapter", "Chapter", inputs.chapter_guide),
                # One instruction for the block every feature reads (prompt.held_block).
                block_section(inputs.block_parts, inputs.block_left_out),
            )
            if s
        ]
        before = [
            s
            for s in (
                block("plot_essentials", "Plot essentials", inputs.plot_essentials),
                block("story_summary", "Story summary", inputs.story_summary),
                listed("memories", "Memories", inputs.memories, None, inputs.memory_note),
                # Quoted and framed by class, under its rule (engine.library.knowledge.prompt).
                knowledge_section(
                    inputs.knowledge,
                    inputs.knowledge_budget
                    if inputs.knowledge_budget is not None
                    else int(available * self.knowledge_share),
                    inputs.knowledge_note,
                ),
            )
            if s
        ]
        after = [
            s
            for s in (
                block("world_state", "World state", inputs.world_state),
                block("claims", "What players told characters", inputs.claims),
            )
            if s
        ]
        if nudge := block("chapter_nudge", "Chapter nudge", inputs.chapter_nudge):
            nudge.reason = inputs.chapter_nudge_reason or nudge.reason
            after.append(nudge)
        story = block("story_state", "Story state", inputs.story_state)
        if story:
            story.reason = inputs.story_state_note
            after.append(story)

        note = None
        if inputs.authors_note.strip():
            line = authors_note_line(inputs.authors_note.strip())
            note = Section("authors_note", "Author's note", line, count_tokens(line))
        action = None
        if inputs.action_text.strip():
            text = inputs.action_text.strip()
            action = Section(
                "action", "Player's action", text, count_tokens(text), "the new action"
            )
        front = None
        if inputs.front_memory.strip():
            text = inputs.front_memory.strip()
            front = Section(
                "front_memory", "Front memory", text, count_tokens(text), "set by a script"
            )
        tail: list[Section] = []
        if not action:
            tail.append(
                Section(
                    "continue_cue",
                    "Continue cue",
                    CONTINUE_CUE,
                    count_tokens(CONTINUE_CUE),
                    "a continue",
                )
            )
        words = output_words(inputs.max_output_tokens)
        if words is not None:
            hint = output_hint(words)
            tail.append(
                Section(
                    "output_hint",
                    "Length hint",
                    hint,
                    count_tokens(hint),
                    f"a ceiling from {inputs.max_output_tokens} max output tokens",
                )
            )
        reminder = block(
            "world_state_reminder", "World-state reminder", inputs.world_state_reminder
        )
        if reminder:
            reminder.reason = "always last"
            tail.append(reminder)

        sections = [*system, *before, *after, *tail]
        tokens = sum(s.tokens for s in sections)
        tokens += (note.tokens if note else 0) + (action.tokens if action else 0)
        tokens += front.tokens if front else 0
        tokens += count_tokens(HEADINGS["history"])
        return _Fixed(system, before, after, note, action, front, tail, tokens, words)

    def _history(
        self, inputs: ContextInputs, room: int, inserts: Sequence[tuple[int, str]] = ()
    ) -> Section:
        """The story's window within ``room`` tokens; ``inserts``: ``(n, text)``, the author's
        note or cards at a depth, each put before the window's last ``n`` entries (their tokens
        are their own sections')."""
        entries = [entry for entry in inputs.history if entry.text.strip()]
        kept: list[tuple[HistoryEntry, str, int]] = []  # newest first
        used = 0
        truncated = over = capped = False
        for entry in reversed(entries):
            if len(kept) >= self.max_history_entries:
                capped = True
                break
            cost = entry.cost
            if used + cost <= room:
                kept.append((entry, entry.rendered, cost))
                used += cost
                continue
            if not kept:
                # Even the newest entry does not fit: keep its end rather than drop it, and
                # keep a little of it even when the fixed sections left no room at all.
                limit = max(room, MIN_NEWEST_TOKENS)
                if cost <= limit:
                    kept.append((entry, entry.rendered, cost))
                    over = True
                else:
                    text = truncate_to_tokens(entry.rendered, limit, keep="end")
                    kept.append((entry, text, count_tokens(text)))
                    truncated = True
                used += kept[-1][2]
            break
        kept.reverse()
        whole_line = (
            bool(inputs.history)
            and inputs.history[0].index == 0
            and (not kept or kept[0][0] is entries[0])
        )
        if len(kept) > ANCHOR_STEP and not truncated and not whole_line:
            # The window starts at a multiple of ANCHOR_STEP entries, so it keeps its start
            # (and the model or its provider the prefix it has read) for that many turns,
            # instead of sliding by an entry or two every turn; up to ANCHOR_STEP - 1 older
            # entries make way. A window of a step or less (a small budget, a low entry cap)
            # slides: a step would leave out most of it.
            anchor = -(-kept[0][0].index // ANCHOR_STEP) * ANCHOR_STEP
            kept = [k for k in kept if k[0].index >= anchor] or kept[-1:]
            used = sum(cost for _, _, cost in kept)

        # The story, and the note and cards where their depths put them inside; the action and
        # a script's front memory follow the turn's other changing sections, after it.
        texts = insert_at_depths([t for _, t, _ in kept], inserts) if kept else []
        text = HEADINGS["history"] + "\n" + "\n\n".join(texts) if kept else ""
        return history_section(
            inputs, kept, text, used, truncated, over, capped, self.max_history_entries
        )


def _with_found(inputs: ContextInputs, section: str, found: Found) -> ContextInputs:
    """``inputs`` with a retriever's answer in its section."""
    items, note, used = RETRIEVED_SECTIONS[section]
    chosen = tuple((item.label, item.text, item.reason) for item in found.chosen)
    fields: dict[str, Any] = {items: chosen, note: found.summary}
    if used is not None and isinstance(found, CountsUse):
        fields[used] = tuple(found.used_ids)
    return replace(inputs, **fields)
