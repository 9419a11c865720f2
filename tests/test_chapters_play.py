"""Chapters in play, on both databases with the fake model server: the block's events are held
back and folded, progress rides in the snapshot (undo, redo and retry rewind it), a stalled
beat's nudge reaches the model and Insights, and a chapter's end writes a recap that is never
rewritten (a retry of the chapter's end adds a version beside it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlmodel import col

from engine.library.archive import AdventureArchive
from engine.library.formats.adventure_content import masked_story
from engine.library.formats.draft import ImportLimits
from engine.library.reading.errors import ImportRejected
from engine.library.scenarios.library import ScenarioLibrary
from engine.library.scenarios.start import start_adventure
from engine.llm.providers.resolver import OperatorDefault
from engine.people.access.rules import Actor
from engine.people.content import BannedWords
from engine.platform.events import TextDelta
from engine.storage.chapter_models import ChapterRecap
from engine.storage.models import ActionType, Adventure, Scenario, StoryNode
from engine.story.actions import PlayerAction
from engine.story.chapters.plan import read_plan
from engine.story.chapters.service import ChapterService
from engine.story.chapters.store import add_scenario_plan, adventure_plan
from engine.story.tree import StoryTree
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from tests.fakes.openai_server import Reply
from tests.test_chapters import SHIPPED
from tests.test_story_tree import ALICE, host, retry, turn


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


def said(prose: str, *events: str, **stats) -> str:
    """A reply: prose, then its block."""
    return f"{prose}\n\n```state\n{json.dumps({'events': list(events), **stats})}\n```"


async def tidewatch(db) -> int:
    async with db.session() as session, session.begin():
        scenario_id = await session.scalar(
            select(col(Scenario.id)).where(col(Scenario.builtin_key) == "tidewatch-light")
        )
        assert scenario_id is not None
        adventure = await start_adventure(session, scenario_id, channel_id=1)
        adventure_id = adventure.id
    assert adventure_id is not None
    await host(db, adventure_id)
    return adventure_id


async def progress(db, adventure_id: int) -> dict:
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        return adventure.world_state["chapters"]


async def context_report(db, node_id: int) -> dict:
    async with db.session() as session:
        report = await session.scalar(
            select(col(StoryNode.context_report)).where(col(StoryNode.id) == node_id)
        )
    assert report is not None
    return report


async def recaps(db, adventure_id: int) -> list[ChapterRecap]:
    async with db.session() as session:
        rows = await session.scalars(
            select(ChapterRecap)
            .where(col(ChapterRecap.adventure_id) == adventure_id)
            .order_by(col(ChapterRecap.version))
        )
        return list(rows)


async def test_events_are_held_back_folded_and_reported(db, engine, fake_model):
    adventure_id = await tidewatch(db)
    assert (await progress(db, adventure_id))["beat"] == 0
    fake_model.queue(said("You climb to the lamp room.", "searched:lamp_room", "lamp_lit"))
    events = [e async for e in engine.play(adventure_id, _action("climb the stair"))]
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "```" not in streamed and "events" not in streamed
    done = events[-1]
    assert isinstance(done, TurnDone)
    assert done.result.text == "You climb to the lamp room."
    assert done.result.chapter_note == "✦ Reach the lamp room"
    now = await progress(db, adventure_id)
    assert now["beat"] == 1 and now["fields"]["places"] == ["lamp_room"]

    # The model read the open chapter's guide; Insights has what became of each event.
    system = fake_model.requests[-1]["messages"][0]["content"]
    assert "Chapter 1 of 3: The Dark Lamp" in system and "Now: Reach the lamp room." in system
    report = await context_report(db, done.result.narrator_node_id)
    section = next(s for s in report["sections"] if s["key"] == "chapter_events")
    assert section["reason"] == "1 accepted, 1 refused; beat “Reach the lamp room” done"
    assert [(i["label"], i["included"]) for i in section["items"]] == [
        ("searched:lamp_room", True),
        ("lamp_lit", False),
    ]
    # The next turn's narrator is on the next beat.
    fake_model.queue("The wind howls.")
    result = await turn(engine, adventure_id, "look around")
    assert result.chapter_note == ""
    assert "Now: Learn why the light failed." in fake_model.requests[-1]["messages"][0]["content"]


async def test_undo_redo_and_retry_rewind_the_progress(db, engine, fake_model):
    adventure_id = await tidewatch(db)
    tree = StoryTree(db)
    fake_model.queue(said("The lamp room.", "searched:lamp_room"))
    await turn(engine, adventure_id, "climb")
    fake_model.queue(said("A clue.", "found_clue"))
    await turn(engine, adventure_id, "search the lens")
    assert (await progress(db, adventure_id))["fields"]["clues"] == 1

    await tree.undo(ALICE, 1)
    assert (await progress(db, adventure_id))["fields"]["clues"] == 0
    await tree.undo(ALICE, 1)
    assert (await progress(db, adventure_id))["beat"] == 0
    await tree.redo(ALICE, 1)
    assert (await progress(db, adventure_id))["beat"] == 1

    # A retry starts from the state the turn first saw: its new take's events decide.
    fake_model.queue(said("Nothing up here.", "found_clue"))
    await turn(engine, adventure_id, "search")
    assert (await progress(db, adventure_id))["fields"]["clues"] == 1
    fake_model.queue("Still nothing.")
    assert isinstance(await retry(engine, adventure_id), TurnDone)
    assert (await progress(db, adventure_id))["fields"]["clues"] == 0


async def test_a_stalled_beat_nudges_the_narrator_and_insights_says_why(db, engine, fake_model):
    adventure_id = await tidewatch(db)
    for n in range(5):
        fake_model.queue(f"Waves, {n}.")
        await turn(engine, adventure_id, "wait")
    assert (await progress(db, adventure_id))["stalled"] == 5
    assert all(
        "The lighthouse door bangs open" not in r["messages"][-1]["content"]
        for r in fake_model.requests
    )
    fake_model.queue("The door bangs.")
    result = await turn(engine, adventure_id, "wait more")
    user = fake_model.requests[-1]["messages"][-1]["content"]
    assert "The lighthouse door bangs open in the wind" in user
    report = await context_report(db, result.narrator_node_id)
    nudge = next(s for s in report["sections"] if s["key"] == "chapter_nudge")
    assert nudge["reason"].startswith("5 turns without progress on beat “Reach the lamp room”")
    # The turn after a nudge is not nudged again (until five more stalled turns).
    fake_model.queue("Quiet.")
    await turn(engine, adventure_id, "wait")
    assert "bangs open" not in fake_model.requests[-1]["messages"][-1]["content"]


async def end_chapter_one(db, engine, fake_model, adventure_id: int, recap: Reply | str):
    fake_model.queue(said("The lamp room.", "searched:lamp_room"))
    await turn(engine, adventure_id, "climb")
    fake_model.queue(said("Wren waves; a log page.", "found_clue", "met_wren"))
    await turn(engine, adventure_id, "read the log")
    fake_model.queue(said("Chisel marks on the lens.", "found_clue"), recap)
    return await turn(engine, adventure_id, "look at the lens")


async def test_a_chapters_end_writes_a_recap_that_is_never_rewritten(db, engine, fake_model):
    adventure_id = await tidewatch(db)
    ended = await end_chapter_one(
        db, engine, fake_model, adventure_id, "Maren's apprentice found the lamp broken."
    )
    assert ended.chapter_note.startswith("📖 Chapter 1 “The Dark Lamp” complete")
    assert "“The Drowned Chapel”" in ended.chapter_note
    # The recap call read the engine's facts and the chapter's story.
    asked = fake_model.requests[-1]["messages"][-1]["content"]
    assert "Beats: Reach the lamp room (turn 1) · Learn why the light failed (turn 3)" in asked
    assert "Turns 1–3" in asked
    assert "Chisel marks on the lens." in asked
    (first,) = await recaps(db, adventure_id)
    assert (first.chapter_id, first.version, first.node_id) == (
        "dark_lamp",
        1,
        ended.narrator_node_id,
    )
    assert first.text == "Maren's apprentice found the lamp broken."
    assert first.facts["fields"] == {"places": ["lamp_room"], "clues": 2, "met_wren": True}
    assert (await progress(db, adventure_id))["chapter"] == 1

    # Undo takes the story back into chapter 1; the recap stays as written.
    await StoryTree(db).undo(ALICE, 1)
    assert (await progress(db, adventure_id))["chapter"] == 0
    assert [(r.version, r.text) for r in await recaps(db, adventure_id)] == [(1, first.text)]
    await StoryTree(db).redo(ALICE, 1)

    # A retry of the chapter's end that ends it again writes version 2 beside the first.
    fake_model.queue(said("The lens is cut.", "found_clue"), "The light was put out on purpose.")
    assert isinstance(await retry(engine, adventure_id), TurnDone)
    kept = await recaps(db, adventure_id)
    assert [(r.version, r.text) for r in kept] == [
        (1, "Maren's apprentice found the lamp broken."),
        (2, "The light was put out on purpose."),
    ]
    view = await ChapterService(db).overview(1, ALICE)
    assert [(r.version, r.versions, r.stands) for r in view.recaps] == [(1, 2, False), (2, 2, True)]
    # One that does not end it writes none, and the chapter is open again.
    fake_model.queue("You stare at the sea.")
    await retry(engine, adventure_id)
    assert len(await recaps(db, adventure_id)) == 2
    assert (await progress(db, adventure_id))["chapter"] == 0
    view = await ChapterService(db).overview(1, ALICE)
    assert [r.stands for r in view.recaps] == [False, False]
    assert view.outline[0].startswith("▶️ 1. The Dark Lamp · beat 2 of 2")


async def test_a_recap_the_model_fails_keeps_the_facts_and_the_turn(db, engine, fake_model):
    adventure_id = await tidewatch(db)
    ended = await end_chapter_one(db, engine, fake_model, adventure_id, Reply(fault="401"))
    assert ended.text == "Chisel marks on the lens."
    (recap,) = await recaps(db, adventure_id)
    assert recap.text == "" and recap.facts["beats"][1]["id"] == "why"


async def test_chapters_with_stats_share_the_block(db, engine, fake_model):
    raw = json.loads(SHIPPED.read_text(encoding="utf-8"))
    schema = {"player": {"hp": {"min": 0, "max": 100, "initial": 100}}}
    async with db.session() as session, session.begin():
        scenario = Scenario(title="Stats and chapters", prompt="Go.", stat_schema=schema)
        session.add(scenario)
        await session.flush()
        assert scenario.id is not None
        add_scenario_plan(session, scenario.id, read_plan(raw))
        await session.flush()
        adventure = await start_adventure(session, scenario.id, channel_id=1)
        adventure_id = adventure.id
        assert adventure_id is not None
    await host(db, adventure_id)
    fake_model.queue(said("You slip on the stair.", "searched:lamp_room", player={"hp": -10}))
    result = await turn(engine, adventure_id, "run up")
    assert result.text == "You slip on the stair."
    assert "hp 100 → 90" in result.state_chip and result.chapter_note == "✦ Reach the lamp room"
    async with db.session() as session:
        state = (await session.get(Adventure, adventure_id)).world_state
    assert state["values"]["player.hp"] == 90 and state["chapters"]["beat"] == 1
    system = fake_model.requests[-1]["messages"][0]["content"]
    assert "Chapter 1 of 3" in system and '- "events": the events of this chapter' in system
    # One block asked for, once, with one example holding both the stats and the events.
    assert system.count("add one fenced ```state block") == 1
    assert '{"player": {"hp": -15}' in system and '"events": ["found_clue"]' in system


async def test_deleting_an_adventure_takes_its_chapters_and_recaps(db, engine, fake_model):
    adventure_id = await tidewatch(db)
    await end_chapter_one(db, engine, fake_model, adventure_id, "Recap.")
    async with db.session() as session, session.begin():
        adventure = await session.get(Adventure, adventure_id)
        await session.delete(adventure)
    async with db.session() as session:
        left = await session.scalar(select(func.count()).select_from(ChapterRecap))
    assert left == 0


def _action(text: str) -> PlayerAction:
    return PlayerAction(ActionType.DO, text, ALICE.user_id)


PLAYTHROUGH = Path(__file__).parent / "data" / "replies" / "tidewatch-light.json"


async def test_the_shipped_scenario_plays_through_its_three_chapters(db, engine, fake_model):
    """The replies the console demo is played with (tests/data/README.md), in order."""
    fake_model.queue(*json.loads(PLAYTHROUGH.read_text(encoding="utf-8")))
    adventure_id = await tidewatch(db)
    notes = [(await turn(engine, adventure_id, f"act {n}")).chapter_note for n in range(14)]
    beats = [n for n in notes if n.startswith("✦")]
    assert beats == ["✦ Reach the lamp room", "✦ Cross the causeway", "✦ Mend the great lens"]
    assert [n.split(" “")[0] for n in notes if n.startswith("📖")] == [
        "📖 Chapter 1",
        "📖 Chapter 2",
        "📖 Final chapter",
    ]
    # Five turns without an event in chapter 3, and the sixth's narrator was nudged.
    nudged = [
        i
        for i, r in enumerate(fake_model.requests)
        if "The brass tin of resin rattles" in r["messages"][-1]["content"]
    ]
    assert len(nudged) == 1
    assert (await progress(db, adventure_id))["done"]
    kept = await recaps(db, adventure_id)
    assert [(r.chapter_id, r.version) for r in kept] == [
        ("dark_lamp", 1),
        ("chapel", 1),
        ("relight", 1),
    ]
    assert kept[-1].epilogue.startswith("At dawn the storm is gone")
    assert not kept[0].epilogue
    assert isinstance(await retry(engine, adventure_id), TurnDone)
    assert [r.version for r in await recaps(db, adventure_id) if r.chapter_id == "relight"] == [
        1,
        2,
    ]
    assert fake_model.queued == 0


async def test_an_adventure_file_carries_its_plan_and_progress(db, engine, fake_model):
    adventure_id = await tidewatch(db)
    fake_model.queue(said("The lamp room.", "searched:lamp_room"))
    await turn(engine, adventure_id, "climb")
    archive = AdventureArchive(db, ImportLimits())
    exported = await archive.export(ALICE, 1)
    raw = json.loads(exported.content)
    assert [c["id"] for c in raw["chapters"]] == ["dark_lamp", "chapel", "relight"]
    assert raw["world_state"]["chapters"]["beat"] == 1
    await archive.restore(ALICE, 2, await archive.read(exported.content))
    async with db.session() as session:
        restored = await session.scalar(
            select(Adventure).where(
                col(Adventure.channel_id) == 2, col(Adventure.ended_at).is_(None)
            )
        )
        assert restored is not None and restored.id is not None
        assert await adventure_plan(session, restored.id) == read_plan(raw)
    # Played on from where it was: the second beat is open.
    fake_model.queue("A clue.")
    await turn(engine, restored.id, "look")
    assert "Now: Learn why the light failed." in fake_model.requests[-1]["messages"][0]["content"]


async def test_an_imported_scenario_keeps_its_chapters_and_exports_them(db):
    library = ScenarioLibrary(db, ImportLimits())
    actor = Actor(user_id=11, user_name="alice")
    raw = json.loads(SHIPPED.read_text(encoding="utf-8"))
    raw["title"] = "My own lighthouse"
    data = json.dumps(raw).encode()
    saved = await library.save(actor, await library.preview(actor, data, "mine.json"))
    exported = json.loads((await library.export(actor, str(saved.scenario_id))).files[0].content)
    assert exported["chapters"] == read_plan(raw)["chapters"] and exported["nudge_after"] == 5
    async with db.session() as session, session.begin():
        adventure = await start_adventure(session, saved.scenario_id, channel_id=3)
        assert adventure.id is not None
        assert await adventure_plan(session, adventure.id) == read_plan(raw)
        assert adventure.world_state["chapters"]["chapter"] == 0
    # A broken plan is refused at the preview, naming where.
    raw["chapters"][0]["beats"] = []
    with pytest.raises(ImportRejected, match=r"chapters\[0\]\.beats: a chapter needs"):
        await library.preview(actor, json.dumps(raw).encode(), "broken.json")


async def test_a_failed_turn_is_narrated_by_the_open_beats_lines_else_its_chapters(
    db, engine, fake_model
):
    """Authored fallback (engine.story.fallback) reads the most specific lines: the open beat's,
    else its chapter's (the shipped scenario's first beat has none, its second has its own)."""
    adventure_id = await tidewatch(db)
    fake_model.queue(Reply(fault="500"))
    result = await turn(engine, adventure_id, "climb the stair")
    assert result.fallback_reason and result.chapter_note == ""
    assert result.text == "Waves break white against the rock; somewhere a shutter bangs."
    assert (await progress(db, adventure_id))["beat"] == 0  # a fallback line reports nothing

    fake_model.queue(said("You climb to the lamp room.", "searched:lamp_room"))
    await turn(engine, adventure_id, "climb the stair")
    fake_model.queue(Reply(fault="timeout"))
    result = await turn(engine, adventure_id, "search the gallery")
    assert result.text == "The wind gusts, and for a moment the island holds its breath."


async def test_an_adventure_file_carries_its_recaps_and_which_stands(db, engine, fake_model):
    adventure_id = await tidewatch(db)
    await end_chapter_one(db, engine, fake_model, adventure_id, "The lamp was found broken.")
    fake_model.queue(said("The lens is cut.", "found_clue"), "Para one.\n\nPara two.")
    assert isinstance(await retry(engine, adventure_id), TurnDone)  # version 2 stands
    archive = AdventureArchive(db, ImportLimits())
    exported = await archive.export(ALICE, 1)
    raw = json.loads(exported.content)
    assert [(r["chapter_id"], r["version"], r["text"]) for r in raw["chapter_recaps"]] == [
        ("dark_lamp", 1, "The lamp was found broken."),
        ("dark_lamp", 2, "Para one.\n\nPara two."),
    ]

    await archive.restore(ALICE, 2, await archive.read(exported.content))
    before = await ChapterService(db).overview(1, ALICE)
    after = await ChapterService(db).overview(2, ALICE)
    assert after.recaps == before.recaps and [r.stands for r in after.recaps] == [False, True]
    again = json.loads((await archive.export(ALICE, 2)).content)
    assert again["chapter_recaps"] == raw["chapter_recaps"]  # the same file once more

    # The words banned where it comes in are masked in its recaps, as in its story.
    masked, count = masked_story(
        await archive.read(exported.content), BannedWords.of(["broken", "two"])
    )
    assert [r["text"] for r in masked.recaps] == [
        BannedWords.of(["broken"]).mask("The lamp was found broken."),
        BannedWords.of(["two"]).mask("Para one.\n\nPara two."),
    ]
    assert "broken" not in masked.recaps[0]["text"] and count >= 2

    # One chapter's recap twice over is refused, naming the entry.
    raw["chapter_recaps"][1]["version"] = 1
    with pytest.raises(ImportRejected, match=r"chapter_recaps\[1\]: .* has recap 1 twice"):
        await archive.read(json.dumps(raw).encode())
