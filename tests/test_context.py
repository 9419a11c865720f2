"""The context engine: budgets, sections, cards, history windows, and what a turn reads."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from itertools import pairwise

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import undefer

from engine.library.knowledge.prompt import KNOWLEDGE_RULE
from engine.llm.providers.resolver import OperatorDefault
from engine.prompt.cards import Card
from engine.prompt.held_block import BlockPart, instruction
from engine.prompt.inputs import ContextInputs, HistoryEntry, reattach_state_block
from engine.prompt.report import ContextReport
from engine.prompt.sections import authors_note_line, output_hint, output_words
from engine.prompt.tokens import count_tokens
from engine.storage.memory_models import Memory
from engine.storage.models import ActionType, Adventure, AdventureCard, Role, StoryNode
from engine.story.line.read import line_length, line_window
from engine.story.memory.retrieval import MemoryRetriever
from engine.turns.context import ANCHOR_STEP, CONTINUE_CUE, HEADINGS, ContextEngine
from engine.turns.engine import TurnEngine
from tests.benchmarks.bench_context import seed_adventure
from tests.helpers import new_adventure, node_count, play

ENGINE = ContextEngine()


def story(n: int, tokens: int | None = 50, *, start: int = 0) -> list[HistoryEntry]:
    """``n`` entries, alternating narrator and player, each claiming ``tokens`` tokens."""
    return [
        HistoryEntry(
            id=i + 1,
            index=i,
            role=Role.NARRATOR if i % 2 == 0 else Role.PLAYER,
            text=f"Entry {i} of the story." if i % 2 == 0 else f"> You try thing {i}.",
            tokens=tokens,
        )
        for i in range(start, start + n)
    ]


def user_text(built) -> str:
    return built.messages[-1].content


#: How the length hint begins (``engine.turns.context.output_hint``).
HINT_START = "Write only as much as the moment needs"


def recent_story(built) -> list[str]:
    """The paragraphs of the "Recent Story:" block (before the cue, hint and reminder)."""
    text = user_text(built).split(HEADINGS["history"] + "\n", 1)[1]
    tail = {CONTINUE_CUE, "Remember the state block."}
    return [p for p in text.split("\n\n") if p not in tail and not p.startswith(HINT_START)]


def sections(built) -> dict:
    return {section.key: section for section in built.report.sections}


#: A world state's part of the held-back block, short (the real one: engine.story.world.render).
STATE = BlockPart("state", "World-state changes", "what changed.", {"hp": -5})

FULL = ContextInputs(
    budget=2048,
    max_output_tokens=300,
    ai_instructions="Write in the second person.",
    plot_essentials="You are Ash, a ferryman.",
    story_summary="Ash found a lantern that whispers.",
    authors_note="Keep it eerie.",
    world_state_guide="hp: 0-100 (low under 30)",
    world_state="hp 55",
    block_parts=(STATE,),
    world_state_reminder="Remember the state block.",
    memories=[("the ring", "Ash lost a ring in the river.", "score 0.81")],
    knowledge=[("lanterns", "Lanterns here burn whale oil.", "score 0.77")],
    cards=[Card.of("Mira", "Mira smuggles salt.", "Mira"), Card.of("Sea", "The sea rises.")],
    history=story(6),
    line_length=6,
    action_text="> You ask Mira about the lantern.",
)


# --- the budget ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "reserved", "available"), [(4096, 300, 3796), (500, 300, 256), (256, 512, 256)]
)
def test_available_is_the_budget_less_the_reply_with_a_floor(budget, reserved, available):
    built = ENGINE.build(ContextInputs(budget=budget, max_output_tokens=reserved))
    report = built.report
    assert (report.budget, report.reserved, report.available) == (budget, reserved, available)


def test_history_fills_newest_first_until_the_budget_is_spent():
    inputs = ContextInputs(budget=1300, max_output_tokens=300, history=story(100), line_length=100)
    built = ENGINE.build(inputs)
    history = sections(built)["history"]
    kept = [p for p in recent_story(built)]
    # The newest entries, contiguous, oldest of them first, newest last.
    assert kept[-1] == "> You try thing 99."
    first = int(re.search(r"\d+", kept[0]).group())
    assert kept == [e.text for e in story(100)[first:]]
    assert built.report.used <= built.report.available
    # The window starts at a step (engine.turns.context), and one more step of entries (50
    # tokens each) would not have fitted.
    assert first % ANCHOR_STEP == 0
    assert built.report.used + 50 * ANCHOR_STEP > built.report.available
    (whole, older) = history.items
    assert (whole.included, whole.label) == (
        True,
        f"{100 - first} newest entries (entries {first}–99)",
    )
    assert (older.included, older.label, older.reason) == (
        False,
        f"{first} older entries",
        f"no room left, or before the window's start (it moves {ANCHOR_STEP} at a time)",
    )
    assert history.reason == f"{100 - first} of 100 entries, newest first"
    assert not history.truncated


def test_history_has_a_hard_cap_on_entries():
    engine = ContextEngine(max_history_entries=5)
    built = engine.build(ContextInputs(history=story(40, tokens=3), line_length=40))
    assert len(recent_story(built)) == 5
    older = sections(built)["history"].items[-1]
    assert (older.label, older.reason) == ("35 older entries", "past the 5-entry cap")


def test_an_oversized_newest_entry_is_truncated_not_dropped():
    words = [f"w{i}" for i in range(3000)]
    huge = HistoryEntry(id=9, index=9, role=Role.NARRATOR, text=" ".join(words))
    inputs = ContextInputs(
        budget=1000, max_output_tokens=300, history=[*story(9), huge], line_length=10
    )
    built = ENGINE.build(inputs)
    history = sections(built)["history"]
    assert history.truncated
    (kept,) = recent_story(built)
    assert kept.endswith("w2999") and not kept.startswith("w0 ")  # the end is kept
    assert kept in huge.text
    assert built.report.used <= built.report.available
    truncated, older = history.items
    assert (truncated.label, truncated.included, truncated.reason) == (
        "entry 9",
        True,
        "truncated to fit",
    )
    assert (older.label, older.included) == ("9 older entries", False)


def test_the_newest_entry_keeps_something_even_when_fixed_sections_fill_the_budget():
    inputs = ContextInputs(
        budget=600,
        max_output_tokens=300,
        plot_essentials="lore " * 400,
        history=story(3, tokens=None),
        line_length=3,
    )
    built = ENGINE.build(inputs)
    assert recent_story(built)[-1] == "Entry 2 of the story."
    kept, older = sections(built)["history"].items
    assert (kept.label, kept.reason) == ("1 newest entry (entry 2)", "kept though over the budget")
    assert (older.label, older.included) == ("2 older entries", False)


# --- placement ---------------------------------------------------------------------------------


def test_the_adventures_note_closes_the_system_message():
    """It is the same every turn: after the story it would be read again each turn (and cut a
    provider's cached prefix short, were it inside the story, as AI Dungeon places it)."""
    built = ENGINE.build(FULL)
    system, user = (m.content for m in built.messages)
    hint = output_hint(output_words(FULL.max_output_tokens) or 0)
    note = authors_note_line(FULL.authors_note)
    assert system.startswith("You are the narrator")
    assert system.endswith(f"{instruction([STATE])}\n\n{hint}\n\n{note}")
    assert "Author's note" not in user and hint not in user
    assert sections(built)["authors_note"].reason == "in the system message (the same every turn)"
    # A continue, or a story of one entry, changes nothing of that.
    for inputs in (
        replace(FULL, action_text=""),
        replace(FULL, history=story(1), line_length=1),
    ):
        other = ENGINE.build(inputs)
        assert other.messages[0].content == system
        assert "Author's note" not in user_text(other)


def test_stable_sections_come_first_what_changes_after_the_story_and_the_reminder_last():
    built = ENGINE.build(FULL)
    system, user = (m.content for m in built.messages)
    assert [m.role for m in built.messages] == ["system", "user"]
    order = [
        "You are the narrator",
        FULL.ai_instructions,
        FULL.world_state_guide,
        instruction([STATE]),
        "Keep your reply under 168 words.",
        "[Author's note: Keep it eerie.]",
    ]
    assert [system.index(part) for part in order] == sorted(system.index(p) for p in order)
    order = [
        "You are Ash",
        "Story Summary:\nAsh found",
        "Recent Story:\n",
        "Memories:\nAsh lost a ring",
        f"Knowledge:\n{KNOWLEDGE_RULE}\n\nLanterns here",
        "World Lore:\nMira smuggles salt.",
        "World State:\nhp 55",
        FULL.action_text,
        "Remember the state block.",
    ]
    positions = [user.index(part) for part in order]
    assert positions == sorted(positions)
    assert user.splitlines()[-1] == FULL.world_state_reminder
    # The story section holds the story alone; the action follows the rest.
    story_text = user.split("Recent Story:\n", 1)[1].split("\n\nMemories:", 1)[0]
    assert FULL.action_text not in story_text
    assert story_text.split("\n\n") == [e.text for e in FULL.history]
    # The report lists the sections in the order they are sent.
    assert [s.key for s in built.report.sections] == [
        "narrator",
        "ai_instructions",
        "world_state_guide",
        "held_block",
        "output_hint",
        "authors_note",
        "plot_essentials",
        "story_summary",
        "history",
        "memories",
        "knowledge",
        "story_cards",
        "world_state",
        "action",
        "world_state_reminder",
    ]


def test_the_prefix_stays_the_same_from_turn_to_turn():
    first = ENGINE.build(FULL)
    later = ENGINE.build(
        replace(FULL, history=story(8), line_length=8, action_text="> You ask Mira again.")
    )
    assert first.messages[0] == later.messages[0]
    # The user message reads on from the last one's, to the end of its story.
    cut = user_text(first).index("Memories:")
    assert user_text(later)[:cut] == user_text(first)[:cut]


def test_a_note_a_script_sets_follows_the_story():
    """A script may change its note every turn: in the system message it would make the model
    read the whole prompt again each time."""
    built = ENGINE.build(replace(FULL, authors_note_from_script=True))
    user = user_text(built)
    note = authors_note_line(FULL.authors_note)
    assert note not in built.messages[0].content
    assert user.index("World State:\nhp 55") < user.index(note) < user.index(FULL.action_text)
    assert sections(built)["authors_note"].reason == (
        "after the story, before the action (a script may change it)"
    )


def _turns(engine: ContextEngine, count: int) -> list[tuple[str, str, int]]:
    """``count`` turns of a growing story (two entries a turn, more than the window holds: a
    budget that leaves room for more than one step of entries, else the window slides),
    each with other memories and cards: each turn's user message, its text up to the end of
    its story, and the index of the first story entry it holds."""
    turns = []
    for t in range(count):
        n = 30 + 2 * t
        inputs = replace(
            FULL,
            budget=1100,
            history=story(n),
            line_length=n,
            memories=[(f"memory {t}", f"A memory of turn {t}.", "score 0.5")],
            action_text=f"> You try thing {n}.",
        )
        text = user_text(engine.build(inputs))
        last = inputs.history[-1].text
        (start,) = re.findall(r"Recent Story:\n(?:Entry |> You try thing )(\d+)", text)
        turns.append((text, text[: text.index(last) + len(last)], int(start)))
    return turns


def test_each_turn_reads_on_from_the_last():
    """The model keeps what it evaluated for a turn (llama.cpp reuses the longest common
    prefix, hosted providers cache it): the next prompt must begin with the last one's, up to
    the end of its story, except when the window's start takes its step."""
    turns = _turns(ENGINE, 16)
    read_on = [nxt.startswith(story_end) for (_, story_end, _), (nxt, _, _) in pairwise(turns)]
    # The window moves 8 entries a step and the story 2 entries a turn: one step in 4 turns.
    assert sum(read_on) >= 11, read_on
    # The turns that do not read on are exactly those where the window's start moved.
    stepped = [a != b for (_, _, a), (_, _, b) in pairwise(turns)]
    assert read_on == [not step for step in stepped]
    assert all(start % ANCHOR_STEP == 0 for _, _, start in turns)


def test_the_window_starts_at_a_step_and_keeps_the_whole_short_story():
    long = ENGINE.build(replace(FULL, budget=1100, history=story(41), line_length=41))
    kept = [e for e in recent_story(long) if e.startswith(("Entry", "> You try"))]
    first = int(kept[0].split()[1] if kept[0].startswith("Entry") else kept[0].split()[3][:-1])
    assert first % ANCHOR_STEP == 0
    report = sections(long)["history"]
    assert "window's start" in report.items[-1].reason
    short = ENGINE.build(replace(FULL, history=story(5), line_length=5))
    assert "Entry 0 of the story." in user_text(short)


def test_empty_sections_cost_nothing_and_do_not_appear():
    inputs = ContextInputs(
        plot_essentials="   ",
        story_summary="",
        authors_note="\n",
        memories=[("blank", "  ", "score 1")],
        history=story(2),
        line_length=2,
        action_text="> You wait.",
    )
    built = ENGINE.build(inputs)
    text = built.script_text
    for heading in ("World Lore:", "Story Summary:", "Memories:", "Knowledge:"):
        assert heading not in text
    assert "World State:" not in text and "[Author's note" not in text
    assert [s.key for s in built.report.sections] == [
        "narrator",
        "output_hint",
        "history",
        "action",
    ]
    assert all(s.tokens > 0 for s in built.report.sections)

    # No narrator prompt and no length hint (too short a reply for one): no system message.
    bare = ENGINE.build(replace(inputs, narrator_prompt="", max_output_tokens=100))
    assert [m.role for m in bare.messages] == ["user"]
    assert bare.report.used < built.report.used


def test_a_continue_asks_to_continue():
    built = ENGINE.build(replace(FULL, action_text=""))
    assert "Continue the story." in user_text(built)
    assert "action" not in sections(built)


# --- cards -------------------------------------------------------------------------------------


def test_cards_are_triggered_by_the_recent_story_and_the_new_action():
    history = story(10)
    history[3] = replace(history[3], text="> You look for Oren.")  # 6 entries back: too old
    history[7] = replace(history[7], text="> You hail the Ferry.")
    cards = [
        Card.of("Oren", "Oren is a guard.", "Oren"),
        Card.of("Ferry", "The ferry leaks.", "ferry"),
        Card.of("Mira", "Mira smuggles salt.", "Mira, the smuggler"),
        Card.of("Sea", "The sea rises.", always_on=True),
        Card.of("Miranda", "Miranda sings.", "Miranda"),
    ]
    inputs = ContextInputs(history=history, line_length=10, cards=cards, action_text="> Ask mira.")
    built = ENGINE.build(inputs)
    items = [*sections(built)["always_cards"].items, *sections(built)["story_cards"].items]
    assert [(i.label, i.included, i.reason) for i in items] == [
        ("Sea", True, "always on"),  # before the story (tests/test_context_cards.py)
        ("Ferry", True, "trigger: ferry"),
        ("Mira", True, "trigger: Mira"),
    ]
    text = user_text(built)
    assert "World Lore:\nThe ferry leaks.\nMira smuggles salt." in text
    assert "Oren is a guard." not in text and text.count("The sea rises.") == 1
    assert sections(built)["story_cards"].reason == "2 of 4 cards triggered"


def test_cards_take_at_most_40_percent_and_the_rest_are_reported_excluded():
    big = "salt " * 150  # about 150 tokens each
    cards = [Card.of(f"Big {i}", f"Card {i}: {big}", "salt") for i in range(6)]
    cards.append(Card.of("Small", "A small card about salt.", "salt"))
    inputs = ContextInputs(
        budget=1300,
        max_output_tokens=300,
        cards=cards,
        history=story(40),
        line_length=40,
        action_text="> You taste the salt.",
    )
    remainder = ENGINE.history_ceiling(inputs)
    built = ENGINE.build(inputs)
    section = sections(built)["story_cards"]
    assert 0 < section.tokens <= int(remainder * 0.40)
    included = [i.label for i in section.items if i.included]
    excluded = [i for i in section.items if not i.included]
    assert included[-1] == "Small"  # a smaller card after a big one that did not fit still goes in
    assert excluded and all(
        i.reason == "over the 40% card budget (trigger: salt)" for i in excluded
    )
    # The report lists them with what else was left out (history's older entries come first,
    # the story being sent before the cards).
    assert [i for i in built.report.excluded if i in excluded] == excluded
    assert "Card 5:" not in user_text(built)
    # History gets what the cards left, less what the window's step leaves out (entries of 50
    # tokens, ANCHOR_STEP at a time).
    assert built.report.used <= built.report.available
    assert built.report.used + 50 * ANCHOR_STEP > built.report.available


def test_always_on_cards_claim_the_card_budget_first():
    big = "salt " * 150
    cards = [
        Card.of("Triggered", f"Triggered: {big}", "salt"),
        Card.of("Pinned", f"Pinned: {big}", always_on=True),
    ]
    inputs = ContextInputs(budget=1000, max_output_tokens=300, cards=cards, action_text="> salt")
    found = sections(ENGINE.build(inputs))  # Pinned is always on, Triggered is not
    assert found["always_cards"].items[0].included and not found["story_cards"].items[0].included


# --- memories and knowledge ------------------------------------------------------------------


def test_memories_always_go_in_and_knowledge_keeps_to_its_own_budget():
    chunk = "whale oil " * 30
    inputs = replace(
        FULL,
        memories=[(f"m{i}", f"Memory {i}: {chunk}", "score 0.9") for i in range(3)],
        knowledge=[(f"k{i}", f"Fact {i}: {chunk}", "score 0.8") for i in range(5)],
        # The section's rule (engine.library.knowledge.prompt) comes out of its budget too.
        knowledge_budget=200 + count_tokens(KNOWLEDGE_RULE),
    )
    built = ENGINE.build(inputs)
    memories, knowledge = sections(built)["memories"], sections(built)["knowledge"]
    assert all(i.included for i in memories.items) and len(memories.items) == 3
    assert knowledge.tokens <= 200 + count_tokens(KNOWLEDGE_RULE)
    assert [i.included for i in knowledge.items] == [True, True, True, False, False]
    assert knowledge.items[-1].reason == "over the knowledge budget"
    assert "Fact 3:" not in user_text(built)

    # By default knowledge may use 15% of what is available.
    default = sections(ENGINE.build(replace(inputs, knowledge_budget=None)))["knowledge"]
    assert default.reason.endswith(f"budget of {int(1748 * 0.15)} tokens")


@dataclass(frozen=True)
class Fact:
    label: str
    text: str
    reason: str


@dataclass(frozen=True)
class Facts:
    chosen: tuple[Fact, ...]
    summary: str


class Glossary:
    """A second retriever, as a knowledge library will be: it fills its own section."""

    def __init__(self, facts: dict[str, str], section: str = "knowledge") -> None:
        self.facts = facts  # a keyword → its fact
        self.section = section
        self.queries: list[tuple[int, list[str]]] = []

    async def retrieve(self, session, adventure_id, recent) -> Facts:
        self.queries.append((adventure_id, list(recent)))
        chosen = tuple(
            Fact(key, fact, f"keyword: {key}")
            for key, fact in self.facts.items()
            if key in recent[0]
        )
        return Facts(chosen, f"{len(chosen)} of {len(self.facts)} facts")


async def test_each_retriever_fills_its_own_section_with_its_own_budget(db):
    adventure_id = await new_adventure(db)
    async with db.session() as session, session.begin():
        session.add(
            Memory(adventure_id=adventure_id, text="Mira hid the lantern key.", pinned=True)
        )
    glossary = Glossary(
        {"lantern": "Lantern oil is whale oil.", "salt": "Salt is taxed.", "trim": "wick " * 800}
    )
    engine = ContextEngine(retrievers=[MemoryRetriever(), glossary])
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        inputs = await engine.gather(session, adventure, "> You trim the lantern.")
    # The query: the new action first, then the story, newest first.
    [(asked_for, recent)] = glossary.queries
    assert asked_for == adventure_id and recent[0] == "> You trim the lantern."
    built = engine.build(inputs)
    memories, knowledge = sections(built)["memories"], sections(built)["knowledge"]
    assert [i.reason.split(" · ")[0] for i in memories.items] == ["pinned"]
    assert memories.reason.startswith("1 of 1 memories (1 pinned)")
    assert [(i.label, i.included, i.reason) for i in knowledge.items] == [
        ("lantern", True, "keyword: lantern"),
        ("trim", False, "over the knowledge budget"),
    ]
    assert knowledge.reason.startswith("2 of 3 facts, within its own budget of ")
    assert f"Knowledge:\n{KNOWLEDGE_RULE}\n\nLantern oil is whale oil." in user_text(built)


def test_a_retriever_needs_a_section_of_its_own():
    with pytest.raises(ValueError, match="no context section 'glossary'"):
        ContextEngine(retrievers=[Glossary({}, section="glossary")])
    with pytest.raises(ValueError, match="two retrievers fill the 'knowledge' section"):
        ContextEngine(retrievers=[Glossary({}), Glossary({})])


# --- the world-state seam ----------------------------------------------------------------------


def test_past_narrator_turns_get_their_state_block_back():
    node = StoryNode(
        adventure_id=1,
        index=4,
        role=Role.NARRATOR,
        action=ActionType.CONTINUE,
        text="The gate opens.",
        state_block="[hp 55 | gold 3]",
    )
    assert reattach_state_block(node) == "The gate opens.\n[hp 55 | gold 3]"
    plain = StoryNode(adventure_id=1, role=Role.NARRATOR, action=ActionType.CONTINUE, text="Hi.")
    assert reattach_state_block(plain) == "Hi."
    player = StoryNode(
        adventure_id=1,
        role=Role.PLAYER,
        action=ActionType.DO,
        text="> You wave.",
        state_block="[x]",
    )
    assert reattach_state_block(player) == "> You wave."

    entry = HistoryEntry.from_node(node)
    built = ENGINE.build(ContextInputs(history=[*story(2), entry], line_length=5))
    assert recent_story(built)[-1] == "The gate opens.\n[hp 55 | gold 3]"
    assert entry.cost == count_tokens("The gate opens.") + count_tokens("[hp 55 | gold 3]")


# --- the length hint ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_tokens", "words"), [(300, 168), (1000, 641), (110, 40), (109, None), (50, None)]
)
def test_the_length_hint_is_a_ceiling_and_left_out_below_40_words(max_tokens, words):
    assert output_words(max_tokens) == words
    built = ENGINE.build(ContextInputs(max_output_tokens=max_tokens, action_text="> You wait."))
    assert built.report.output_words == words
    if words is None:
        assert "output_hint" not in sections(built)
        assert "words" not in user_text(built)
    else:
        # The same every turn, it closes the system message (engine.turns.context).
        assert built.messages[0].content.endswith(f"Keep your reply under {words} words.")
        assert "Keep your reply" not in user_text(built)
        assert output_hint(words) == (
            "Write only as much as the moment needs; a typical turn is much shorter. "
            f"Keep your reply under {words} words."
        )
        # The guidance comes before the ceiling.
        text = built.messages[0].content
        assert text.index("a typical turn is much shorter") < text.index("Keep your reply under")


# --- what comes out ----------------------------------------------------------------------------


def test_script_text_has_ai_dungeon_headings_and_is_what_was_sent():
    built = ENGINE.build(FULL)
    text = built.script_text
    for heading in ("World Lore:\n", "Story Summary:\n", "Memories:\n", "Recent Story:\n"):
        assert heading in text
    assert "[Author's note: Keep it eerie.]" in text
    assert text == "\n\n".join(m.content for m in built.messages)
    assert json.loads(built.snapshot()) == [
        {"role": m.role, "content": m.content} for m in built.messages
    ]


def test_the_report_is_close_to_the_real_count_and_round_trips():
    inputs = replace(FULL, history=story(60, tokens=None), line_length=60)
    built = ENGINE.build(inputs)
    actual = sum(count_tokens(m.content) for m in built.messages)
    assert abs(built.report.used - actual) <= max(5, actual * 0.03)
    assert built.tokens == built.report.used
    assert ContextReport.from_json(json.loads(json.dumps(built.report.to_json()))) == built.report


# --- reading from the database -----------------------------------------------------------------


async def test_the_history_window_is_sized_by_tokens_not_by_story_length(db):
    adventure_id = await seed_adventure(db, 300, channel_id=7, cards=10, memories=0, heavy=False)
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        inputs = await ENGINE.gather(session, adventure, "> You ask Name003 about it.")
        head = await session.get(StoryNode, adventure.head_node_id)
    assert inputs.line_length == 601 == line_length(head)
    assert inputs.head.id == head.id
    ceiling = ENGINE.history_ceiling(inputs)
    tokens = [entry.tokens for entry in inputs.history]
    # The window stops just past the ceiling: everything but its oldest entry is under it.
    assert sum(tokens[1:]) < ceiling <= sum(tokens)
    assert len(inputs.history) < 100
    assert [e.index for e in inputs.history] == list(range(601 - len(tokens), 601))
    assert [c.title for c in inputs.cards if c.title.startswith("Name")] == [
        f"Name{i:03d}" for i in range(10)
    ]
    built = ENGINE.build(inputs)
    cards = sections(built)["story_cards"]
    assert ("Name003", True, "trigger: Name003") in [
        (i.label, i.included, i.reason) for i in cards.items
    ]


async def test_line_window_caps_entries_and_always_has_the_head(db):
    adventure_id = await seed_adventure(db, 20, channel_id=8, cards=0, memories=0, heavy=False)
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        head_id = adventure.head_node_id
        capped = await line_window(session, head_id, token_limit=10**9, max_entries=7)
        tiny = await line_window(session, head_id, token_limit=1, max_entries=50)
        whole = await line_window(session, head_id, token_limit=10**9, max_entries=1000)
    assert [n.index for n in capped] == list(range(34, 41))
    assert [n.id for n in tiny] == [head_id]
    assert [n.index for n in whole] == list(range(41))


async def test_a_turn_uses_the_engine_and_stores_its_report(db, provider, fake_model):
    adventure_id = await new_adventure(db)
    async with db.session() as session, session.begin():
        session.add(
            AdventureCard(
                adventure_id=adventure_id, title="Mira", keys="Mira", entry="Mira smuggles salt."
            )
        )
    fake_model.queue("Mira shrugs.")
    events = await play(
        TurnEngine(db, OperatorDefault(provider)), adventure_id, ActionType.SAY, "Hello, Mira"
    )
    done = events[-1]
    prompt = fake_model.requests[-1]["messages"][-1]["content"]
    assert "Mira smuggles salt." in prompt
    assert prompt.index("Recent Story:") < prompt.index('> You say "Hello, Mira."')
    async with db.session() as session:
        node = await session.get(
            StoryNode, done.result.narrator_node_id, options=[undefer(StoryNode.context_report)]
        )
    report = ContextReport.from_json(node.context_report)
    assert 0 < report.used <= report.available
    keys = [s.key for s in report.sections]
    assert "story_cards" in keys and "history" in keys and "action" in keys
    assert report.available == 4096 - 300


HEAVY = ("prompt_snapshot", "reasoning", "state_before", "state_report", "context_report")


async def test_a_turn_never_reads_heavy_columns_in_bulk(db, provider, fake_model):
    adventure_id = await new_adventure(db)
    engine = TurnEngine(db, OperatorDefault(provider))
    fake_model.queue("The reeds whisper.", "The lantern dims.")
    await play(engine, adventure_id, ActionType.DO, "listen")  # heavy columns now have values

    statements: list[str] = []

    def capture(_conn, _cursor, statement, _params, _context, _many):
        statements.append(statement)

    event.listen(db.engine.sync_engine, "before_cursor_execute", capture)
    try:
        events = await play(engine, adventure_id, ActionType.DO, "wait")
        assert events[-1].__class__.__name__ == "TurnDone"
        assert await node_count(db, adventure_id) == 5
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", capture)

    reads = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH"))]
    story_reads = [s for s in reads if "story_nodes" in s]
    assert story_reads, statements
    for statement in story_reads:
        named = [c for c in HEAVY if re.search(rf"\b{c}\b", statement)]
        assert not named, f"{named} read in: {statement}"
    counts = [s for s in reads if re.search(r"\bcount\(", s, re.IGNORECASE)]
    assert counts
    for statement in counts:
        assert not [c for c in HEAVY if c in statement], statement
    # Cards are read without their (author-facing) descriptions; memories are not read at all.
    card_reads = [s for s in reads if "adventure_cards" in s]
    assert card_reads and not any("description" in s for s in card_reads)
    assert not any("memories" in s for s in reads)


async def test_a_story_without_entries_still_builds(db):
    adventure_id = await new_adventure(db)
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        inputs = await ENGINE.gather(session, adventure, "> You look around.")
        opening = await session.scalar(
            select(StoryNode.text).where(StoryNode.id == adventure.head_node_id)
        )
    built = ENGINE.build(inputs)
    assert recent_story(built)[-1] == "> You look around."
    assert (opening.strip() in user_text(built)) == bool(opening.strip())
