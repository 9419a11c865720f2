"""The content rules beyond the narration: the words banned where an adventure runs are masked in
a chapter's recap, the memories and summary the background writer stores, and what a script
writes (its story cards, its message, the action onInput returns, the texts of state.memory);
an imported adventure has them masked as it is written, and the operator's moderation check
reads it (bounded, newest first) before anything is stored, refusing a flagged story and
following the operator's fail-open or fail-closed choice. Real engine, real QuickJS, the fake
model server over HTTP, and the Discord stand-in for the import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select, update
from sqlmodel import col

from bot.standin import StandinFile
from engine.library.formats.adventure import ParsedAdventure
from engine.library.formats.adventure_content import newest_passages
from engine.llm.providers.resolver import OperatorDefault
from engine.people.content import MASK
from engine.play.imports import BATCH_CHARS, BATCH_TEXTS, MAX_REQUESTS, check_batches
from engine.storage.memory_models import Memory, MemoryOrigin
from engine.storage.models import ActionType, Adventure, AdventureCard, Role, StoryNode
from engine.story.memory.cadence import Cadence
from engine.story.memory.writer import MemoryWriter
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from engine.turns.insights import Insights
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.helpers import new_adventure, play
from tests.test_adventure_rights import answer, export_file
from tests.test_chapters_play import end_chapter_one, recaps, tidewatch
from tests.test_scripting_turns import add_script


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


async def ban(db, adventure_id: int, *words: str) -> None:
    """The adventure's own list (``/host banned``)."""
    async with db.session() as session, session.begin():
        await session.execute(
            update(Adventure).where(col(Adventure.id) == adventure_id).values(banned_words=words)
        )


# --- what the model and the scripts write beside the narration -------------------------------


async def test_a_chapters_recap_is_stored_with_banned_words_masked(db, engine, fake_model):
    adventure_id = await tidewatch(db)
    await ban(db, adventure_id, "apprentice")
    await end_chapter_one(
        db, engine, fake_model, adventure_id, "Maren's apprentice found the lamp broken."
    )
    (recap,) = await recaps(db, adventure_id)
    assert recap.text == f"Maren's {MASK} found the lamp broken."
    # The facts are the engine's: the same as without a list.
    assert recap.facts["beats"][1]["id"] == "why"


async def test_memories_and_the_summary_are_stored_with_banned_words_masked(
    db, engine, provider, fake_model
):
    writer = MemoryWriter(
        db,
        OperatorDefault(provider),
        memory_cadence=Cadence(first_at=2, every=1),
        summary_cadence=Cadence(first_at=3, every=1),
    )
    adventure_id = await new_adventure(db)
    await ban(db, adventure_id, "heron")
    for n in range(3):
        fake_model.queue(f"The river bends ({n}).")
        events = await play(engine, adventure_id, ActionType.DO, f"walk on ({n})")
        assert isinstance(events[-1], TurnDone), events[-1]
    fake_model.queue(
        "Mira followed the heron.", "The Heron led Mira on.", "Mira and the heron walked."
    )
    report = await writer.catch_up(adventure_id)
    assert report.memories >= 1 and report.summaries >= 1
    async with db.session() as session:
        texts = list(
            await session.scalars(
                select(col(Memory.text)).where(
                    col(Memory.adventure_id) == adventure_id,
                    col(Memory.origin) == MemoryOrigin.STORY,
                )
            )
        )
        summary = (await session.get(Adventure, adventure_id)).story_summary
    assert texts and all("heron" not in text.lower() and MASK in text for text in texts)
    assert summary and "heron" not in summary.lower() and MASK in summary


async def test_a_scripts_cards_and_message_are_stored_with_banned_words_masked(
    db, engine, fake_model
):
    adventure_id = await new_adventure(db)
    await ban(db, adventure_id, "lich")
    async with db.session() as session, session.begin():
        # A player's own card keeps its words: it is not the script's writing.
        session.add(AdventureCard(adventure_id=adventure_id, keys="crypt", entry="A lich crypt."))
    await add_script(
        db,
        adventure_id,
        on_input=(
            "addStoryCard('lich, tomb', 'The Lich sleeps below.');"
            "state.message = 'Beware the lich.'; text"
        ),
    )
    fake_model.queue("The tomb is cold.")
    events = await play(engine, adventure_id, ActionType.DO, "open the tomb")
    done = events[-1]
    assert isinstance(done, TurnDone), done
    assert done.result.script_message == f"Beware the {MASK}."
    async with db.session() as session:
        cards = list(
            await session.scalars(
                select(AdventureCard).where(col(AdventureCard.adventure_id) == adventure_id)
            )
        )
    (written,) = [card for card in cards if card.keys.endswith("tomb")]
    assert (written.keys, written.entry) == (f"{MASK}, tomb", f"The {MASK} sleeps below.")
    assert any(card.entry == "A lich crypt." for card in cards)
    # The model read the card masked too (the context is built from the scripts' cards).
    assert "The Lich sleeps" not in json.dumps(fake_model.requests[-1])
    # Insights says the check acted on the script's run, and why.
    shown = await Insights(db).for_turn(1)
    assert any("banned words masked in 1 story card it wrote" in line for line in shown.script_logs)


async def test_the_action_a_script_rewrote_and_its_state_memory_are_masked(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await ban(db, adventure_id, "lich")
    # The player's own words were checked (a banned word refuses the action); what a script
    # makes of them, and the memory texts it hands the narrator, are the script's words.
    await add_script(
        db,
        adventure_id,
        on_input=(
            "state.memory = {context: 'A lich rules the marsh.', frontMemory: 'Name the Lich.'};"
            "text.replace('tomb', 'lich tomb')"
        ),
    )
    fake_model.queue("The tomb is cold.")
    events = await play(engine, adventure_id, ActionType.DO, "open the tomb")
    done = events[-1]
    assert isinstance(done, TurnDone), done
    async with db.session() as session:
        action = await session.scalar(
            select(StoryNode).where(
                col(StoryNode.adventure_id) == adventure_id, col(StoryNode.role) == Role.PLAYER
            )
        )
        stored = (await session.get(Adventure, adventure_id)).script_state
    assert action is not None and f"{MASK} tomb" in action.text and "lich" not in action.text
    assert stored["memory"] == {
        "context": f"A {MASK} rules the marsh.",
        "frontMemory": f"Name the {MASK}.",
    }
    request = json.dumps(fake_model.requests[-1], ensure_ascii=False)
    assert "lich" not in request.lower() and f"A {MASK} rules the marsh." in request
    shown = await Insights(db).for_turn(1)
    assert any("banned words masked in the action it wrote" in line for line in shown.script_logs)
    assert any(
        "banned words masked in the state.memory it left" in line for line in shown.script_logs
    )


async def test_a_state_memory_stored_before_the_word_was_banned_reaches_the_narrator_masked(
    db, engine, fake_model
):
    adventure_id = await new_adventure(db)
    async with db.session() as session, session.begin():
        await session.execute(
            update(Adventure)
            .where(col(Adventure.id) == adventure_id)
            .values(script_state={"memory": {"authorsNote": "Dwell on the lich."}})
        )
    await ban(db, adventure_id, "lich")
    fake_model.queue("The marsh is quiet.")
    events = await play(engine, adventure_id, ActionType.DO, "listen")
    assert isinstance(events[-1], TurnDone), events[-1]
    request = json.dumps(fake_model.requests[-1], ensure_ascii=False)
    assert "lich" not in request.lower() and f"Dwell on the {MASK}." in request


# --- imports: the passages, their turns and the bounds -----------------------------------------


def _story(texts: list[tuple[str, str]], head: int | None = None) -> ParsedAdventure:
    """A line of nodes (role, text), each the child of the one before."""
    nodes = [
        {"parent": i - 1 if i else None, "index": i, "role": Role(role), "text": text}
        for i, (role, text) in enumerate(texts)
    ]
    return ParsedAdventure(
        fields={},
        steering=None,  # type: ignore[arg-type]  # not read by newest_passages
        nodes=nodes,
        takes=[],
        branches=[],
        save_points=[],
        memories=[],
        head=len(nodes) - 1 if head is None else head,
        active_branch=None,
        characters=[],
    )


def test_an_imports_passages_come_newest_first_named_by_their_turns() -> None:
    parsed = _story(
        [
            ("narrator", "Opening."),
            ("player", "Act 1."),
            ("narrator", "Reply 1."),
            ("narrator", "Continue 2."),
            ("player", "Act 3."),
            ("narrator", "Reply 3."),
        ]
    )
    assert [(p.turn, p.text) for p in newest_passages(parsed)] == [
        (3, "Reply 3."),
        (3, "Act 3."),
        (2, "Continue 2."),
        (1, "Reply 1."),
        (1, "Act 1."),
        (0, "Opening."),
    ]


def test_a_long_story_checks_its_newest_passages_within_the_bounds() -> None:
    many = _story([("narrator", f"Passage {n}. " + "x" * 500) for n in range(5000)])
    batches, checked = check_batches(newest_passages(many))
    assert len(batches) == MAX_REQUESTS
    assert all(len(b) <= BATCH_TEXTS and sum(len(t) for _, t in b) <= BATCH_CHARS for b in batches)
    assert 0 < checked < 5000
    assert batches[0][0][1].startswith("Passage 4999.")  # the newest first


# --- imports through Discord -------------------------------------------------------------------


async def _stories(env: DiscordEnv) -> tuple[int, list[str]]:
    async with env.bot.services.db.session() as session:
        count = await session.scalar(select(func.count()).select_from(Adventure)) or 0
        texts = list(await session.scalars(select(col(StoryNode.text))))
    return count, texts


async def _played_file(env: DiscordEnv, fake_model, text: str) -> tuple[dict, int]:
    """An exported adventure (one turn played), as JSON, with ``text`` in its newest reply;
    and the thread it was played in."""
    thread = await env.start_thread(env.bob)
    fake_model.queue("The road forks.")
    await env.fake.slash(env.bob, thread, "do", action="walk on")
    await env.done()
    raw = json.loads((await export_file(env, env.bob, thread)).content)
    newest = max(
        (i for i, node in enumerate(raw["nodes"]) if node["role"] == "narrator"),
        key=lambda i: raw["nodes"][i]["index"],
    )
    raw["nodes"][newest]["text"] = text
    return raw, thread


def _file(raw: dict) -> StandinFile:
    return StandinFile("road.adventure.json", json.dumps(raw).encode(), "application/json")


async def test_an_imported_story_has_the_banned_words_masked_and_says_so(
    env: DiscordEnv, fake_model
):
    raw, _ = await _played_file(env, fake_model, "A lich waits where the road forks.")
    await env.fake.slash(env.alice, env.channel, "server banned", words="lich")
    await env.done()
    restored = await env.fake.slash(env.bob, env.channel, "adventure import", file=_file(raw))
    await env.done()
    said = answer(env, restored).content
    assert "is restored" in said and "1 passage had banned words masked." in said
    async with env.bot.services.db.session() as session:
        newest = await session.scalar(select(func.max(col(Adventure.id))))
        texts = list(
            await session.scalars(
                select(col(StoryNode.text)).where(col(StoryNode.adventure_id) == newest)
            )
        )
    assert f"A {MASK} waits where the road forks." in texts
    assert not any("lich" in text.lower() for text in texts)


async def test_a_flagged_import_is_refused_naming_its_turns_and_nothing_is_stored(
    tmp_path: Path, fake_model, caplog, database_url: str
):
    fake_model.moderation_flags = {"gore": "violence/graphic"}
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, moderation_url=fake_model.base_url
    ) as env:
        raw, _ = await _played_file(env, fake_model, "The walls drip with gore.")
        before, threads = await _stories(env), len(env.fake.threads(env.channel))
        refused = await env.fake.slash(env.bob, env.channel, "adventure import", file=_file(raw))
        await env.done()
        said = answer(env, refused).content
        assert "not imported: this bot's moderation check refused turn 1 (violence/graphic" in said
        assert "Nothing was stored." in said
        assert await _stories(env) == before
        assert len(env.fake.threads(env.channel)) == threads  # no thread opened for it
        # Every passage went to the checker, in one request.
        checked = [r for r in fake_model.requests if r.get("_path") == "/v1/moderations"]
        assert any("The walls drip with gore." in r["input"] for r in checked)

        raw["nodes"][-1]["text"] = "The walls are dry."
        restored = await env.fake.slash(env.bob, env.channel, "adventure import", file=_file(raw))
        await env.done()
        said = answer(env, restored).content
        assert "is restored" in said and "passages passed this bot's moderation check" in said


async def test_a_failing_checker_lets_an_import_in_unless_the_operator_refuses_unchecked(
    tmp_path: Path, fake_model, caplog, database_url: str
):
    async with campfire_on_standin(
        tmp_path,
        fake_model,
        caplog,
        database_url,
        moderation_url=fake_model.base_url,
        moderation_timeout=1.0,
    ) as env:
        raw, _ = await _played_file(env, fake_model, "The road forks again.")
        fake_model.queue_moderation_fault("500")
        restored = await env.fake.slash(env.bob, env.channel, "adventure import", file=_file(raw))
        await env.done()
        said = answer(env, restored).content
        assert "is restored" in said and "came in unchecked" in said
        assert "moderation check of an import skipped" in caplog.text

    async with campfire_on_standin(
        tmp_path / "closed",
        fake_model,
        caplog,
        database_url,
        moderation_url=fake_model.base_url,
        moderation_timeout=1.0,
        moderation_fail_closed=True,
    ) as env:
        raw, _ = await _played_file(env, fake_model, "The road forks again.")
        before = await _stories(env)
        fake_model.queue_moderation_fault("500")
        refused = await env.fake.slash(env.bob, env.channel, "adventure import", file=_file(raw))
        await env.done()
        said = answer(env, refused).content
        assert "moderation check could not run" in said
        assert "does not import what was not checked" in said and "Nothing was stored" in said
        assert await _stories(env) == before
