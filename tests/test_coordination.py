"""Coordination on a real database (SQLite and PostgreSQL): request identity (the same request
delivered twice plays once), background jobs under job leases (one process runs each, and the
model is never asked twice for the same memory), and the per-process pieces named in one
place."""

from __future__ import annotations

import ast
import asyncio
import importlib
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from engine.llm.providers.resolver import OperatorDefault
from engine.people.access.rules import Actor
from engine.platform.coordination.jobs import JobLeases, memory_job
from engine.platform.coordination.leases import TurnLeases
from engine.platform.coordination.per_process import PER_PROCESS
from engine.platform.queue import AdventureQueue
from engine.play.service import PlayService
from engine.storage.coordination_models import RequestRecord
from engine.storage.database import Database
from engine.storage.memory_models import Memory
from engine.storage.models import ActionType, Role, StoryNode, utcnow
from engine.story.actions import PlayerAction
from engine.story.memory.writer import MemoryWriter
from engine.turns.engine import TurnEngine
from engine.turns.events import AlreadyHandled, TurnDone, TurnFailed
from engine.turns.requests import RequestReused
from tests.fakes.openai_server import Reply
from tests.helpers import new_adventure
from tests.helpers import play as play_turn

ROOT = Path(__file__).resolve().parent.parent
GUILD = 700
ALICE = Actor(user_id=1, user_name="Alice", server_id=GUILD, server_name="Hearth")
BOB = Actor(user_id=2, user_name="Bob", server_id=GUILD, server_name="Hearth")
LOOK = PlayerAction(ActionType.DO, "look around", ALICE.user_id)


def process(db: Database, provider, name: str) -> PlayService:
    """The play service of one process (its own queue and lease holder)."""
    return PlayService(
        db,
        TurnEngine(db, OperatorDefault(provider)),
        TurnLeases(db, holder=name),
        AdventureQueue(cap=5),
    )


async def collect(stream) -> list:
    return [event async for event in stream]


async def narrator_nodes(db: Database, adventure_id: int) -> int:
    async with db.session() as session:
        return await session.scalar(
            select(func.count())
            .select_from(StoryNode)
            .where(StoryNode.adventure_id == adventure_id, StoryNode.role == Role.NARRATOR)
        )


def model_calls(fake_model) -> int:
    return len(fake_model.requests)


# --- request identity ----------------------------------------------------------------------------


async def test_the_same_request_again_gets_the_stored_outcome(db, provider, fake_model):
    service = process(db, provider, "p1")
    started = await service.start(ALICE, channel_id=10, query=None)
    fake_model.queue("The lantern shows a narrow path.")
    first = await collect(service.act(ALICE, 10, LOOK, request_id=900))
    done = first[-1]
    assert isinstance(done, TurnDone)
    calls = model_calls(fake_model)

    again = await collect(service.act(ALICE, 10, LOOK, request_id=900))
    result = done.result
    assert again == [
        AlreadyHandled(900, "done", version=result.version, node_id=result.narrator_node_id)
    ]
    assert model_calls(fake_model) == calls
    assert await narrator_nodes(db, started.adventure_id) == 2  # the opening and one turn


async def test_a_repeat_while_the_first_runs_says_so_and_plays_nothing(db, provider, fake_model):
    service = process(db, provider, "p1")
    started = await service.start(ALICE, channel_id=11, query=None)
    fake_model.queue(Reply(text="Fog rolls in over the reeds.", delay=0.2))
    first = asyncio.create_task(collect(service.act(ALICE, 11, LOOK, request_id=901)))
    async with asyncio.timeout(5):
        while model_calls(fake_model) == 0:  # noqa: ASYNC110 - polling a thread
            await asyncio.sleep(0.01)
    again = await collect(service.act(ALICE, 11, LOOK, request_id=901))
    assert again == [AlreadyHandled(901, "running")]
    assert isinstance((await first)[-1], TurnDone)
    assert model_calls(fake_model) == 1
    assert await narrator_nodes(db, started.adventure_id) == 2


async def test_two_processes_given_one_request_play_it_once(db, provider, fake_model):
    """Separate engines and connection pools on one database, as separate processes have."""
    other_db = Database(db.url)
    try:
        here, there = process(db, provider, "p1"), process(other_db, provider, "p2")
        started = await here.start(ALICE, channel_id=12, query=None)
        fake_model.queue(Reply(text="A heron lifts from the water.", delay=0.05))
        outcomes = await asyncio.gather(
            collect(here.act(ALICE, 12, LOOK, request_id=902)),
            collect(there.act(ALICE, 12, LOOK, request_id=902)),
        )
    finally:
        await other_db.dispose()
    ends = sorted(type(events[-1]).__name__ for events in outcomes)
    assert ends == ["AlreadyHandled", "TurnDone"]
    assert model_calls(fake_model) == 1
    assert await narrator_nodes(db, started.adventure_id) == 2


async def test_the_same_id_with_another_payload_is_refused(db, provider, fake_model):
    service = process(db, provider, "p1")
    await service.start(ALICE, channel_id=13, query=None)
    fake_model.queue("Nothing stirs.")
    await collect(service.act(ALICE, 13, LOOK, request_id=903))
    calls = model_calls(fake_model)
    other_text = PlayerAction(ActionType.DO, "run away", ALICE.user_id)
    other_kind = PlayerAction(ActionType.SAY, "look around", ALICE.user_id)
    for actor, action in ((ALICE, other_text), (ALICE, other_kind), (BOB, LOOK)):
        [refused] = await collect(service.act(actor, 13, action, request_id=903))
        assert isinstance(refused, TurnFailed) and isinstance(refused.error, RequestReused)
        assert "was not played" in refused.error.message
    assert model_calls(fake_model) == calls
    async with db.session() as session:
        record = await session.get(RequestRecord, 903)
    assert record.payload == {"type": "do", "text": "look around"} and record.status == "done"


async def test_a_repeated_button_press_gets_its_outcome_not_a_stale_refusal(
    db, provider, fake_model
):
    service = process(db, provider, "p1")
    started = await service.start(ALICE, channel_id=14, query=None)
    go_on = PlayerAction(ActionType.CONTINUE, "", ALICE.user_id)
    fake_model.queue("The road bends north.")
    first = await collect(
        service.act(ALICE, 14, go_on, request_id=904, seen_version=started.version)
    )
    # The press moved the story on; its repeat is still the same press, not a stale one.
    again = await collect(
        service.act(ALICE, 14, go_on, request_id=904, seen_version=started.version)
    )
    assert again == [
        AlreadyHandled(
            904, "done", version=first[-1].result.version, node_id=first[-1].result.narrator_node_id
        )
    ]
    # A second press of that button is another interaction: refused as before.
    [stale] = await collect(
        service.act(ALICE, 14, go_on, request_id=905, seen_version=started.version)
    )
    assert isinstance(stale, TurnFailed) and "moved on" in stale.error.message


async def test_a_repeat_of_a_failed_request_tells_its_failure_and_a_refusal_is_not_stored(
    db, provider, fake_model
):
    service = process(db, provider, "p1")
    await service.start(ALICE, channel_id=15, query=None)
    fake_model.queue(Reply(fault="401"))
    [*_, failed] = await collect(service.act(ALICE, 15, LOOK, request_id=906))
    assert isinstance(failed, TurnFailed)
    [again] = await collect(service.act(ALICE, 15, LOOK, request_id=906))
    assert again == AlreadyHandled(906, "failed", error=failed.error.message)

    # Refused before it was recorded (nothing runs here): nothing is stored under its id.
    [nowhere] = await collect(service.act(ALICE, 99, LOOK, request_id=907))
    assert isinstance(nowhere, TurnFailed) and "Start one" in nowhere.error.message
    async with db.session() as session:
        assert await session.get(RequestRecord, 907) is None


# --- background jobs under job leases ------------------------------------------------------------


async def twelve_turns_played(db: Database, provider, fake_model) -> int:
    """An adventure whose first memory is due."""
    adventure = await new_adventure(db)
    engine = TurnEngine(db, OperatorDefault(provider))
    for n in range(1, 13):
        fake_model.queue(f"Narration {n}: the heron watched.")
        events = await play_turn(engine, adventure, ActionType.DO, f"step forward ({n})")
        assert isinstance(events[-1], TurnDone)
    return adventure


def memory_calls(fake_model) -> int:
    return sum("Passage:" in r["messages"][-1]["content"] for r in fake_model.requests)


async def until_memory_call(fake_model) -> None:
    async with asyncio.timeout(5):
        while memory_calls(fake_model) == 0:  # noqa: ASYNC110 - polling a thread
            await asyncio.sleep(0.01)


async def stored_memories(db: Database, adventure_id: int) -> list[str]:
    async with db.session() as session:
        return list(
            await session.scalars(select(Memory.text).where(Memory.adventure_id == adventure_id))
        )


@pytest.mark.parametrize("first", ["sweep", "after turn", "together"])
async def test_a_sweep_and_an_after_turn_job_never_both_ask_the_model(
    db, provider, fake_model, first
):
    """The sweep in one process, the job after a turn in another, on the same adventure."""
    adventure = await twelve_turns_played(db, provider, fake_model)
    other_db = Database(db.url)
    try:
        sweeping = MemoryWriter(db, OperatorDefault(provider), jobs=JobLeases(db, holder="sweeper"))
        after_turn = MemoryWriter(
            other_db, OperatorDefault(provider), jobs=JobLeases(other_db, holder="player")
        )
        fake_model.queue(
            Reply(text="Mira reached the drowned bell.", delay=0.1),
            Reply(text="A memory nobody should ask for.", delay=0.1),
        )
        if first == "sweep":
            running = asyncio.create_task(sweeping.sweep())
            await until_memory_call(fake_model)
            second = await after_turn.catch_up(adventure)
            assert second.skipped == "already running"
            assert [r.memories for r in await running] == [1]
        elif first == "after turn":
            running = asyncio.create_task(after_turn.catch_up(adventure))
            await until_memory_call(fake_model)
            assert await sweeping.sweep() == []  # it leaves a running job alone
            assert (await running).memories == 1
        else:
            await asyncio.gather(sweeping.sweep(), after_turn.catch_up(adventure))
    finally:
        await other_db.dispose()
    assert memory_calls(fake_model) == 1
    assert await stored_memories(db, adventure) == ["Mira reached the drowned bell."]


async def test_memory_work_of_a_dead_process_is_taken_over_after_expiry(db, provider, fake_model):
    adventure = await twelve_turns_played(db, provider, fake_model)
    now = [utcnow()]
    # A process claimed the adventure's memory work and died before it wrote anything.
    assert await JobLeases(db, holder="dead", clock=lambda: now[0]).claim(memory_job(adventure))
    writer = MemoryWriter(
        db, OperatorDefault(provider), jobs=JobLeases(db, holder="alive", clock=lambda: now[0])
    )
    assert await writer.lagging() == []  # it looks busy until its lease expires
    assert (await writer.catch_up(adventure)).skipped == "already running"
    assert memory_calls(fake_model) == 0

    now[0] += timedelta(minutes=2)
    assert await writer.lagging() == [adventure]
    fake_model.queue("Mira reached the drowned bell.")
    assert (await writer.catch_up(adventure)).memories == 1
    assert memory_calls(fake_model) == 1


# --- the per-process pieces, named in one place --------------------------------------------------

#: What keeps state in a process: asyncio/threading primitives made when an object or module is
#: set up, and memoising decorators.
_PRIMITIVES = {"Lock", "Event", "Semaphore", "Condition", "ThreadPoolExecutor"}
_CACHES = {"cache", "lru_cache"}


def _keeps_state(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                name = (
                    target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                )
                if name in _CACHES:
                    return True
    # Made when the module or an object is set up, or by a function that sets a global.
    setups = [tree.body] + [
        node.body
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and (node.name == "__init__" or any(isinstance(n, ast.Global) for n in ast.walk(node)))
    ]
    for body in setups:
        for statement in body:
            for node in ast.walk(statement):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    if node.func.attr in _PRIMITIVES:
                        return True
    return False


def test_every_piece_of_per_process_state_is_named_with_why_it_is_safe():
    named = {piece.module for piece in PER_PROCESS}
    for piece in PER_PROCESS:
        module, attribute = piece.where.split(":")
        assert hasattr(importlib.import_module(module), attribute), piece.where
        assert piece.what and piece.why_safe
    unnamed = []
    for folder in ("engine", "cogs", "bot"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative.parts[:2] == ("bot", "standin"):
                continue  # the stand-in Discord itself, not Campfire's state
            module = ".".join(relative.with_suffix("").parts)
            if _keeps_state(ast.parse(path.read_text(encoding="utf-8"))) and module not in named:
                unnamed.append(module)
    assert unnamed == [], "name these in engine/platform/coordination/per_process.py"
