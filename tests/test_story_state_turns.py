"""The narrative state in play: the model's events held back, validated and stored with the turn,
logged with the turn that caused them, rewound exactly by undo, redo, retry and branch
switches, corrected by the host, and shown to the model as the scene needs it."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from engine.errors import InvalidInput, NotAllowed
from engine.platform.events import TextDelta
from engine.storage.models import Adventure, StoryNode
from engine.storage.story_state_models import StoryStateChange
from engine.story.narrative.service import StoryStateService
from engine.story.tree import StoryTree
from engine.turns.events import TurnDone
from tests.helpers import new_adventure
from tests.test_story_tree import ALICE, BOB, CHANNEL, adventure_of, host, retry, turn
from tests.test_world_turns import bandit_camp


def story_block(*events: dict, delta: dict | None = None) -> str:
    return "```state\n" + json.dumps({**(delta or {}), "story": list(events)}) + "\n```"


MIRA = {"type": "add_entity", "id": "mira", "name": "Mira", "kind": "person"}
HARBOR = {"type": "add_entity", "id": "harbor", "name": "The Harbor", "kind": "place"}
INN = {"type": "add_entity", "id": "inn", "name": "The Inn", "kind": "place"}
LANTERN = {"type": "add_entity", "id": "lantern", "name": "lantern", "kind": "item"}


def at(place: str) -> dict:
    return {"type": "set_location", "entity": "mira", "place": place}


@pytest.fixture
def engine(db, provider):
    from engine.llm.providers.resolver import OperatorDefault
    from engine.turns.engine import TurnEngine

    return TurnEngine(db, OperatorDefault(provider))


@pytest.fixture
def tree(db) -> StoryTree:
    return StoryTree(db)


@pytest.fixture
def story(db) -> StoryStateService:
    return StoryStateService(db)


async def tracked(db, story: StoryStateService) -> int:
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    await story.track(CHANNEL, ALICE, True)
    return adventure_id


async def state_of(db, adventure_id: int) -> dict:
    return (await adventure_of(db, adventure_id)).story_state


async def log_of(db, adventure_id: int) -> list[StoryStateChange]:
    async with db.session() as session:
        return list(
            await session.scalars(
                select(StoryStateChange)
                .where(StoryStateChange.adventure_id == adventure_id)
                .order_by(StoryStateChange.id)
            )
        )


async def test_a_turn_applies_its_events_and_the_log_names_the_turn(db, engine, story, fake_model):
    adventure_id = await tracked(db, story)
    prose = "Mira lifts the lantern and walks down to the harbor."
    fake_model.queue(
        f"{prose}\n\n"
        + story_block(
            MIRA,
            HARBOR,
            LANTERN,
            at("harbor"),
            {"type": "set_possession", "item": "lantern", "holder": "mira"},
            {"type": "set_location", "entity": "ghost", "place": "harbor"},
            {"type": "open_thread", "id": "ship", "text": "Which ship will Mira take?"},
        )
    )
    events = [e async for e in engine.play(adventure_id, _action("follow Mira"))]
    done = events[-1]
    assert isinstance(done, TurnDone)
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "```" not in streamed and "story" not in streamed
    assert done.result.text == prose

    state = await state_of(db, adventure_id)
    assert state["locations"] == {"mira": "harbor"}
    assert state["possessions"] == {"lantern": "mira"}
    assert state["threads"] == {"ship": {"text": "Which ship will Mira take?"}}

    log = await log_of(db, adventure_id)
    narrator = done.result.narrator_node_id
    async with db.session() as session:
        index = (await session.get(StoryNode, narrator)).index
    assert {(row.node_id, row.take, row.turn_index, row.by) for row in log} == {
        (narrator, 1, index, "model")
    }
    location = next(row for row in log if row.kind == "location")
    assert (location.key, location.before, location.after) == ("mira", None, "harbor")
    (refused,) = [row for row in log if row.kind == "refused"]
    assert "ghost" in refused.reason and refused.event["entity"] == "ghost"

    # The next prompt: the rule in the system message, the scene's state near the story.
    fake_model.queue("The tide turns.")
    await turn(engine, adventure_id, "ask Mira about the ship")
    sent = fake_model.requests[-1]["messages"]
    assert "set_location" in sent[0]["content"]
    user = sent[-1]["content"]
    assert "Mira (person): at The Harbor; holds lantern" in user
    assert "Which ship will Mira take?" in user
    # The turn's own block is re-attached in history, so the model keeps writing it.
    assert '"story"' in user
    # Insights says what the section holds and why.
    async with db.session() as session:
        head = (await adventure_of(db, adventure_id)).head_node_id
        report = await session.scalar(select(StoryNode.context_report).where(StoryNode.id == head))
    (section,) = [s for s in report["sections"] if s["key"] == "story_state"]
    assert section["reason"].startswith("3 of 3 entities named in the scene, 1 open threads")

    view = await story.show(CHANNEL)
    assert view.tracking and "Mira (person): at The Harbor" in view.text
    # The head is the quiet turn: it changed nothing.
    assert view.last_turn == ()


def _action(text: str):
    from engine.storage.models import ActionType
    from engine.story.actions import PlayerAction

    return PlayerAction(ActionType.DO, text, ALICE.user_id)


async def test_undo_and_redo_restore_the_state_exactly(db, engine, tree, story, fake_model):
    adventure_id = await tracked(db, story)
    fake_model.queue(
        "Mira arrives.\n\n" + story_block(MIRA, HARBOR, INN, at("harbor")),
        "Mira leaves.\n\n"
        + story_block(at("inn"), {"type": "add_fact", "text": "Mira is soaked."}),
    )
    await turn(engine, adventure_id, "wait")
    first = await state_of(db, adventure_id)
    await turn(engine, adventure_id, "wait more")
    second = await state_of(db, adventure_id)
    assert second["locations"] == {"mira": "inn"} and second != first

    await tree.undo(ALICE, CHANNEL)
    assert await state_of(db, adventure_id) == first
    await tree.undo(ALICE, CHANNEL)
    assert await state_of(db, adventure_id) == {}
    await tree.redo(ALICE, CHANNEL)
    assert await state_of(db, adventure_id) == first
    await tree.redo(ALICE, CHANNEL)
    assert await state_of(db, adventure_id) == second


async def test_a_branch_switch_restores_its_lines_state_exactly(
    db, engine, tree, story, fake_model
):
    adventure_id = await tracked(db, story)
    fake_model.queue(
        "Mira arrives.\n\n" + story_block(MIRA, HARBOR, INN, at("harbor")),
        "Mira goes in.\n\n" + story_block(at("inn")),
        "Mira stays and opens a question.\n\n"
        + story_block({"type": "open_thread", "text": "Who rings the bell?"}),
    )
    await turn(engine, adventure_id, "wait")
    await turn(engine, adventure_id, "go in")
    main = await state_of(db, adventure_id)
    await tree.undo(ALICE, CHANNEL)
    await turn(engine, adventure_id, "stay")  # writes below a moved-back head: "fork 2"
    fork = await state_of(db, adventure_id)
    assert fork["locations"] == {"mira": "harbor"} and "who_rings_the_bell" in fork["threads"]

    await tree.switch_branch(ALICE, CHANNEL, "main")
    assert await state_of(db, adventure_id) == main
    await tree.switch_branch(ALICE, CHANNEL, "fork 2")
    assert await state_of(db, adventure_id) == fork


async def test_a_retry_starts_from_the_turns_state_and_each_take_keeps_its_own(
    db, engine, tree, story, fake_model
):
    adventure_id = await tracked(db, story)
    fake_model.queue(
        "Mira arrives.\n\n" + story_block(MIRA, HARBOR, INN, at("harbor")),
        "Mira walks to the inn.\n\n" + story_block(at("inn")),
        "Mira walks nowhere.\n\n" + story_block(at("harbor")),
    )
    await turn(engine, adventure_id, "wait")
    before = await state_of(db, adventure_id)
    first = await turn(engine, adventure_id, "walk")
    take_one = await state_of(db, adventure_id)
    assert take_one["locations"] == {"mira": "inn"}

    done = await retry(engine, adventure_id)
    assert isinstance(done, TurnDone) and done.result.take == 2
    # The retry saw the state before the turn, not the replaced take's: its event moved Mira
    # to where she already was, so the state is the turn's starting state and nothing changed.
    assert await state_of(db, adventure_id) == before
    log = await log_of(db, adventure_id)
    assert [(r.take, r.before, r.after) for r in log if r.node_id == first.narrator_node_id] == [
        (1, "harbor", "inn")
    ]

    await tree.choose_take(ALICE, CHANNEL, first.narrator_node_id, 1)
    assert await state_of(db, adventure_id) == take_one
    view = await story.show(CHANNEL)
    assert [c.line for c in view.last_turn] == ["location Mira: The Harbor → The Inn"]
    assert view.turn_number == 2  # as /insights counts the narrator's replies


async def test_the_hosts_correction_is_logged_at_the_head_and_rewinds_with_it(
    db, engine, tree, story, fake_model
):
    adventure_id = await tracked(db, story)
    fake_model.queue("Mira arrives.\n\n" + story_block(MIRA, HARBOR, INN, at("harbor")))
    done = await turn(engine, adventure_id, "wait")
    arrived = await state_of(db, adventure_id)

    changed = await story.correct(CHANNEL, ALICE, "location", "mira", "The Inn")
    assert changed == "location Mira: The Harbor → The Inn"
    await story.correct(CHANNEL, ALICE, "fact", "Mira is a smuggler.", "Mira")
    corrected = await state_of(db, adventure_id)
    assert corrected["facts"]["mira_is_a_smuggler"]["by"] == "host"
    view = await story.show(CHANNEL)
    assert [(c.by, c.turn_index) for c in view.last_turn][-2:] == [
        ("host", view.last_turn[0].turn_index)
    ] * 2
    hosted = [r for r in await log_of(db, adventure_id) if r.by == "host"]
    assert {r.node_id for r in hosted} == {done.narrator_node_id}

    # Refused corrections say why and change nothing.
    with pytest.raises(InvalidInput, match="no known entity"):
        await story.correct(CHANNEL, ALICE, "location", "mira", "the moon")
    with pytest.raises(InvalidInput, match="A > B"):
        await story.correct(CHANNEL, ALICE, "relation", "mira", "friends")
    with pytest.raises(NotAllowed, match="host"):
        await story.correct(CHANNEL, BOB, "location", "mira", "harbor")
    with pytest.raises(NotAllowed):
        await story.track(CHANNEL, BOB, False)
    assert await state_of(db, adventure_id) == corrected

    # The narration may not undo what the host set.
    fake_model.queue(
        "Mira denies it.\n\n" + story_block({"type": "retract_fact", "id": "mira_is_a_smuggler"})
    )
    await turn(engine, adventure_id, "accuse Mira")
    assert (await state_of(db, adventure_id))["facts"] == corrected["facts"]
    assert "set by the host" in (await log_of(db, adventure_id))[-1].reason

    # Undo over that turn, then over the corrected one: the correction goes with its turn;
    # redo brings it back.
    await tree.undo(ALICE, CHANNEL)
    assert await state_of(db, adventure_id) == corrected
    await tree.undo(ALICE, CHANNEL)
    assert await state_of(db, adventure_id) == {}
    await tree.redo(ALICE, CHANNEL)
    assert await state_of(db, adventure_id) == corrected
    assert corrected != arrived


async def test_untracked_adventures_ignore_story_events(db, engine, story, fake_model):
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    reply = "Mira arrives.\n\n" + story_block(MIRA)
    fake_model.queue(reply)
    await turn(engine, adventure_id, "wait")
    assert await state_of(db, adventure_id) == {} and await log_of(db, adventure_id) == []
    assert "set_location" not in fake_model.requests[-1]["messages"][0]["content"]


async def test_world_state_and_story_events_share_one_block(db, engine, story, fake_model):
    adventure_id = await bandit_camp(db, channel_id=CHANNEL)
    await host(db, adventure_id)
    await story.track(CHANNEL, ALICE, True)
    fake_model.queue("Gwen is hit.\n\n" + story_block(MIRA, delta={"player": {"hp": -15}}))
    done = await turn(engine, adventure_id, "duck")
    adventure = await adventure_of(db, adventure_id)
    assert adventure.world_state["values"]["player.hp"] == 85
    assert adventure.story_state["entities"] == {"mira": {"name": "Mira", "kind": "person"}}
    assert done.text == "Gwen is hit." and "hp 100 → 85" in done.state_chip


async def test_an_adventure_file_carries_the_state_and_a_crafted_one_is_cleaned(
    db, engine, tree, story, fake_model
):
    from engine.library.formats.adventure import parse_adventure, write_adventure
    from engine.library.formats.adventure_export import export_adventure
    from engine.library.formats.draft import ImportLimits

    adventure_id = await tracked(db, story)
    fake_model.queue(
        "Mira arrives.\n\n" + story_block(MIRA, HARBOR, at("harbor")),
        "Mira waits.\n\n" + story_block({"type": "open_thread", "text": "For whom?"}),
    )
    await turn(engine, adventure_id, "wait")
    first = await state_of(db, adventure_id)
    await turn(engine, adventure_id, "wait more")
    second = await state_of(db, adventure_id)
    async with db.session() as session:
        exported = await export_adventure(session, await session.get(Adventure, adventure_id))
    # A crafted entry of the wrong shape is dropped on the way in, the rest kept.
    raw = json.loads(json.dumps(exported))
    raw["story_state"]["entities"]["bad"] = ["not", "an", "entity"]
    parsed = parse_adventure(raw, ImportLimits())
    async with db.session() as session, session.begin():
        copy = await write_adventure(session, parsed, channel_id=2, server_id=None, host_id=101)
        copy_id = copy.id
    restored = await adventure_of(db, copy_id)
    assert restored.story_tracking and restored.story_state == second
    # Its turns' snapshots came with it: undo there rewinds the state too.
    await tree.undo(ALICE, 2)
    assert await state_of(db, copy_id) == first


async def test_after_tracking_is_turned_off_blocks_stay_hidden_and_change_nothing(
    db, engine, story, fake_model
):
    adventure_id = await tracked(db, story)
    fake_model.queue("Mira arrives.\n\n" + story_block(MIRA))
    await turn(engine, adventure_id, "wait")
    kept = await state_of(db, adventure_id)
    await story.track(CHANNEL, ALICE, False)
    # The model, shown its past blocks in history, writes another one.
    fake_model.queue("Mira leaves.\n\n" + story_block(HARBOR), "Quiet.")
    events = [e async for e in engine.play(adventure_id, _action("wave"))]
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "```" not in streamed and events[-1].result.text == "Mira leaves."
    assert await state_of(db, adventure_id) == kept
    await turn(engine, adventure_id, "sit")
    assert "set_location" not in fake_model.requests[-1]["messages"][0]["content"]
    assert "Story state:" not in fake_model.requests[-1]["messages"][-1]["content"]


async def test_a_canon_passage_of_the_scene_outranks_the_narration(db, provider, story, fake_model):
    """Canon (the knowledge library) protects the facts its passages state: the narration's
    events may not retract them, while a fact Canon does not state stays the narration's."""
    from engine.library.knowledge.classes import KnowledgeClass
    from engine.library.knowledge.library import KnowledgeLibrary, Target
    from engine.library.knowledge.retrieval import KnowledgeRetriever
    from engine.llm.providers.resolver import OperatorDefault
    from engine.story.memory.retrieval import MemoryRetriever
    from engine.turns.context import ContextEngine
    from engine.turns.engine import TurnEngine

    adventure_id = await tracked(db, story)
    library = KnowledgeLibrary(db, max_bytes=64 * 1024)
    setting = (
        b"# The harbour\n\nThe harbour of Brindlemoor never freezes. Its lanterns burn green, "
        b"and the harbourmaster keeps a ledger of every ship that anchors in the fen.\n"
    )
    draft = await library.preview(
        ALICE, CHANNEL, setting, "harbour.md", KnowledgeClass.CANON, target=Target.ADVENTURE
    )
    await library.save(ALICE, draft)
    engine = TurnEngine(
        db,
        OperatorDefault(provider),
        context=ContextEngine(retrievers=[MemoryRetriever(), KnowledgeRetriever()]),
    )
    facts = [
        {"type": "add_fact", "id": "ice", "text": "The harbour of Brindlemoor never freezes."},
        {"type": "add_fact", "id": "fog", "text": "Fog rolls in at dusk."},
    ]
    fake_model.queue("The harbour lanterns burn green." + "\n\n" + story_block(*facts))
    await turn(engine, adventure_id, "look at the harbour lanterns")
    assert set((await state_of(db, adventure_id))["facts"]) == {"ice", "fog"}

    retract = [{"type": "retract_fact", "id": "ice"}, {"type": "retract_fact", "id": "fog"}]
    fake_model.queue("The harbour ice cracks under the lanterns.\n\n" + story_block(*retract))
    await turn(engine, adventure_id, "walk on the harbour")
    # The passage came in for this scene; the fact it states stays, the other goes.
    assert set((await state_of(db, adventure_id))["facts"]) == {"ice"}
    refused = [c for c in await log_of(db, adventure_id) if c.reason and "Canon" in c.reason]
    assert len(refused) == 1
