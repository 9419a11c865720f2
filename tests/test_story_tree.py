"""The story tree in the engine: takes, retry, undo and redo, forks, branches, save points, and
what a page of turns reads from the database."""

from __future__ import annotations

import zlib
from dataclasses import replace

import pytest
from sqlalchemy import event, func, select, update

from engine.errors import InvalidInput, ModelError, NotAllowed, NotFound, StoryMovedOn
from engine.llm.providers.resolver import OperatorDefault
from engine.people.access.rules import Actor
from engine.people.accounts import touch_server, touch_user
from engine.storage.memory_models import Memory
from engine.storage.models import ActionType, Adventure, Branch, SavePoint, StoryNode, Take
from engine.story.actions import PlayerAction
from engine.story.line.read import line_tail, line_window, state_before_of
from engine.story.tree import StoryTree
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone, TurnFailed
from tests.fakes.openai_server import Reply
from tests.helpers import add_users, new_adventure
from tests.test_world_turns import bandit_camp

CHANNEL = 1
ALICE = Actor(user_id=101, user_name="alice")
BOB = Actor(user_id=202, user_name="bob")


def block(hp: int, mana: int = 0) -> str:
    return f'```state\n{{"player": {{"hp": {hp}, "mana": {mana}}}}}\n```'


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


@pytest.fixture
def tree(db) -> StoryTree:
    return StoryTree(db)


async def turn(engine: TurnEngine, adventure_id: int, text: str = "", author: int = ALICE.user_id):
    kind = ActionType.DO if text else ActionType.CONTINUE
    await add_users(engine.db, author)
    events = [e async for e in engine.play(adventure_id, PlayerAction(kind, text, author))]
    assert isinstance(events[-1], TurnDone), events[-1]
    return events[-1].result


async def retry(engine: TurnEngine, adventure_id: int):
    events = [e async for e in engine.retry(adventure_id)]
    return events[-1]


async def adventure_of(db, adventure_id: int) -> Adventure:
    async with db.session() as session:
        return await session.get(Adventure, adventure_id)


async def column(db, node_id: int, name: str):
    async with db.session() as session:
        return await session.scalar(select(getattr(StoryNode, name)).where(StoryNode.id == node_id))


async def before(db, node_id: int):
    """The state before a turn's first node (stored once, by the node before it)."""
    async with db.session() as session:
        return await state_before_of(session, node_id)


async def host(db, adventure_id: int, user_id: int = ALICE.user_id) -> None:
    """Make ``user_id`` the player of a solo (DM) adventure."""
    async with db.session() as session, session.begin():
        await touch_user(session, user_id, "alice")
        await session.execute(
            update(Adventure)
            .where(Adventure.id == adventure_id)
            .values(host_id=user_id, owner_id=user_id)
        )


# --- takes and retry -----------------------------------------------------------------------------


async def test_retry_keeps_every_take_and_pages_them(db, engine, tree, fake_model):
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    fake_model.queue("First telling.", "Second telling.", "Third telling.")
    first = await turn(engine, adventure_id, "open the gate")
    second = await retry(engine, adventure_id)
    third = await retry(engine, adventure_id)
    assert isinstance(second, TurnDone) and isinstance(third, TurnDone)
    node_id = first.narrator_node_id
    assert second.result.narrator_node_id == node_id == third.result.narrator_node_id
    assert (third.result.take, third.result.take_count) == (3, 3)

    async with db.session() as session:
        node = await session.get(StoryNode, node_id)
        assert (node.text, node.live_take, node.take_count) == ("Third telling.", 3, 3)
        takes = await session.execute(
            select(Take.number, Take.text).where(Take.node_id == node_id).order_by(Take.number)
        )
        assert list(takes) == [
            (1, "First telling."),
            (2, "Second telling."),
            (3, "Third telling."),
        ]
        # Takes hold only what differs: no prompt.
        assert "prompt_snapshot" not in Take.__table__.c
        nodes = await session.scalar(
            select(func.count())
            .select_from(StoryNode)
            .where(StoryNode.adventure_id == adventure_id)
        )
        assert nodes == 3  # the opening, the action, one narrator node with three takes

    version = (await adventure_of(db, adventure_id)).version
    paged = await tree.choose_take(ALICE, CHANNEL, node_id, 1, seen_version=version)
    assert (paged.take, paged.take_count, paged.head_text) == (1, 3, "First telling.")
    assert await column(db, node_id, "text") == "First telling."
    # The same button again (drawn for the old version) changes nothing.
    with pytest.raises(StoryMovedOn):
        await tree.choose_take(ALICE, CHANNEL, node_id, 2, seen_version=version)
    assert await column(db, node_id, "live_take") == 1
    with pytest.raises(InvalidInput, match="no take 4"):
        await tree.choose_take(ALICE, CHANNEL, node_id, 4)


async def test_a_turn_never_retried_keeps_no_take_rows(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    fake_model.queue("Only telling.")
    await turn(engine, adventure_id, "wait")
    async with db.session() as session:
        assert await session.scalar(select(func.count()).select_from(Take)) == 0


async def test_retry_reuses_the_index_and_leaves_cooldown_clocks_still(db, engine, fake_model):
    adventure_id = await bandit_camp(db)
    fake_model.queue(
        f"An arrow grazes you.\n\n{block(-15)}", f"You dodge the arrow.\n\n{block(-5)}"
    )
    first = await turn(engine, adventure_id, "creep closer")
    node_index = await column(db, first.narrator_node_id, "index")
    clocks = (await adventure_of(db, adventure_id)).world_state["changed_at"]
    assert clocks["player.hp"] == node_index

    done = await retry(engine, adventure_id)
    assert isinstance(done, TurnDone), done
    assert done.result.narrator_node_id == first.narrator_node_id
    assert await column(db, first.narrator_node_id, "index") == node_index
    state = (await adventure_of(db, adventure_id)).world_state
    # Rolled back first (100), then the new take's delta: 95, not 85 - 5.
    assert state["values"]["player.hp"] == 95
    assert state["changed_at"] == clocks


async def test_the_replaced_turn_is_not_in_its_own_prompt(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    fake_model.queue("The bell tolls nine times.", "A crow lands on the sill.")
    first = await turn(engine, adventure_id, "listen")
    original_prompt = zlib.decompress(await column(db, first.narrator_node_id, "prompt_snapshot"))
    await retry(engine, adventure_id)
    sent = fake_model.requests[-1]["messages"]
    assert all("bell tolls nine" not in m["content"] for m in sent)
    # The player's action is still what the take answers.
    assert "> You listen." in sent[-1]["content"]
    snapshot = zlib.decompress(await column(db, first.narrator_node_id, "prompt_snapshot"))
    assert b"bell tolls nine" not in snapshot
    assert snapshot == original_prompt  # the same context the first take was written from


async def test_a_failed_retry_leaves_the_previous_take_and_its_state(db, engine, fake_model):
    adventure_id = await bandit_camp(db)
    fake_model.queue(f"An arrow grazes you.\n\n{block(-15)}", Reply(fault="500"))
    first = await turn(engine, adventure_id, "creep closer")
    before = await adventure_of(db, adventure_id)

    failed = await retry(engine, adventure_id)
    assert isinstance(failed, TurnFailed) and isinstance(failed.error, ModelError)
    after = await adventure_of(db, adventure_id)
    assert after.world_state == before.world_state
    assert after.version == before.version and after.head_node_id == before.head_node_id
    async with db.session() as session:
        node = await session.get(StoryNode, first.narrator_node_id)
        assert (node.text, node.live_take, node.take_count) == ("An arrow grazes you.", 1, 1)
        assert await session.scalar(select(func.count()).select_from(Take)) == 0


async def test_the_opening_cannot_be_retried(db, engine):
    adventure_id = await new_adventure(db)
    failed = await retry(engine, adventure_id)
    assert isinstance(failed, TurnFailed) and "opening" in failed.error.message


async def test_retrying_a_continue_under_undone_turns_keeps_its_snapshot(
    db, engine, tree, fake_model
):
    adventure_id = await bandit_camp(db)
    await host(db, adventure_id)
    fake_model.queue(
        f"Hit.\n\n{block(-10)}", f"Hit hard.\n\n{block(-30)}", f"Dodged.\n\n{block(-1)}"
    )
    first = await turn(engine, adventure_id)  # a continue: its parent is the opening
    await turn(engine, adventure_id, "charge")
    await tree.undo(ALICE, CHANNEL)
    done = await retry(engine, adventure_id)
    assert isinstance(done, TurnDone), done
    fresh = done.result.narrator_node_id
    assert done.result.replaced_node_id == first.narrator_node_id != fresh
    # The new version starts from the same state as the one it stands beside.
    assert await before(db, fresh) == await before(db, first.narrator_node_id)
    assert (await adventure_of(db, adventure_id)).world_state["values"]["player.hp"] == 99


async def test_a_retry_asked_for_an_older_turn_retries_nothing(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    fake_model.queue("One.", "Two.")
    first = await turn(engine, adventure_id, "one")
    await turn(engine, adventure_id, "two")  # arrived while the retry waited in the queue
    events = [e async for e in engine.retry(adventure_id, node_id=first.narrator_node_id)]
    assert isinstance(events[-1], TurnFailed) and "moved on" in events[-1].error.message
    assert len(fake_model.requests) == 2


async def test_a_retried_turn_is_still_inside_its_cooldown(db, engine, fake_model):
    adventure_id = await bandit_camp(db)
    async with db.session() as session, session.begin():
        adventure = await session.get(Adventure, adventure_id)
        schema = dict(adventure.stat_schema)
        schema["player"] = {**schema["player"], "mana": {**schema["player"]["mana"], "cooldown": 2}}
        await session.execute(
            update(Adventure).where(Adventure.id == adventure_id).values(stat_schema=schema)
        )
    fake_model.queue(
        f"You cast a spark.\n\n{block(0, -5)}",
        f"You cast again.\n\n{block(0, -5)}",
        f"You cast once more.\n\n{block(0, -5)}",
    )
    await turn(engine, adventure_id, "cast")  # mana changes at index 2
    second = await turn(engine, adventure_id, "cast again")  # index 4: still cooling down
    mana = (await adventure_of(db, adventure_id)).world_state["values"]["player.mana"]
    assert mana == 25
    report = await column(db, second.narrator_node_id, "state_report")
    assert any("mana" in r["path"] for r in report["rejected"])

    done = await retry(engine, adventure_id)
    assert isinstance(done, TurnDone)
    # Had the retry advanced the clock to index 6, the cooldown would have let mana change.
    assert (await adventure_of(db, adventure_id)).world_state["values"]["player.mana"] == 25
    report = await column(db, second.narrator_node_id, "state_report")
    assert any("mana" in r["path"] for r in report["rejected"])


# --- undo, redo, forks ---------------------------------------------------------------------------


async def test_undo_and_redo_restore_world_and_script_state_exactly(db, engine, tree, fake_model):
    adventure_id = await bandit_camp(db)
    await host(db, adventure_id)
    fake_model.queue(f"Hit.\n\n{block(-15)}", f"Hit again.\n\n{block(-10, 5)}")
    first = await turn(engine, adventure_id, "charge")
    # A script's state as it stood before the second turn (scripts write it between turns).
    async with db.session() as session, session.begin():
        await session.execute(
            update(Adventure).where(Adventure.id == adventure_id).values(script_state={"n": 1})
        )
    second = await turn(engine, adventure_id, "charge again")
    async with db.session() as session, session.begin():
        await session.execute(
            update(Adventure).where(Adventure.id == adventure_id).values(script_state={"n": 2})
        )
    at_tip = await adventure_of(db, adventure_id)
    assert at_tip.world_state["values"]["player.hp"] == 75

    moved = await tree.undo(ALICE, CHANNEL, seen_version=at_tip.version)
    assert moved.head_node_id == first.narrator_node_id
    assert set(moved.removed) == {second.narrator_node_id, second.action_node_id}
    undone = await adventure_of(db, adventure_id)
    snapshot = await before(db, second.action_node_id)
    assert undone.world_state == snapshot["world_state"]
    assert undone.script_state == snapshot["script_state"] == {"n": 1}
    assert undone.world_state["values"]["player.hp"] == 85
    assert moved.can_redo
    # Nothing was deleted.
    async with db.session() as session:
        assert await session.get(StoryNode, second.narrator_node_id) is not None

    redone = await tree.redo(ALICE, CHANNEL, seen_version=moved.version)
    assert redone.head_node_id == second.narrator_node_id
    assert set(redone.restored) == {second.narrator_node_id, second.action_node_id}
    back = await adventure_of(db, adventure_id)
    assert back.world_state == at_tip.world_state
    assert back.script_state == {"n": 2}
    assert not redone.can_redo
    with pytest.raises(InvalidInput, match="nothing to redo"):
        await tree.redo(ALICE, CHANNEL)


async def set_script_state(db, adventure_id: int, state: dict) -> None:
    async with db.session() as session, session.begin():
        await session.execute(
            update(Adventure).where(Adventure.id == adventure_id).values(script_state=state)
        )


async def test_a_turn_keeps_the_state_it_started_from_when_its_parents_state_changes(
    db, engine, tree, fake_model
):
    # State is stored once per turn: a turn reads the state it started from off the node before
    # it. When that node's state changes later, the turns below it keep what they saw.
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    fake_model.queue("One.", "Two.", "Three.")
    first = await turn(engine, adventure_id, "look")
    await set_script_state(db, adventure_id, {"seen": "before two"})
    second = await turn(engine, adventure_id, "walk")
    await tree.undo(ALICE, CHANNEL)
    assert (await adventure_of(db, adventure_id)).script_state == {"seen": "before two"}

    # Corrected at the first turn, then Redo and Undo again: the head left the corrected state
    # at the first turn, yet the second turn still starts from what it saw.
    await set_script_state(db, adventure_id, {"seen": "corrected"})
    await tree.redo(ALICE, CHANNEL)
    await tree.undo(ALICE, CHANNEL)
    assert (await adventure_of(db, adventure_id)).script_state == {"seen": "before two"}
    # A new branch from a corrected state: each branch keeps its own start.
    await set_script_state(db, adventure_id, {"seen": "before three"})
    third = await turn(engine, adventure_id, "run")
    assert (await before(db, second.action_node_id))["script_state"] == {"seen": "before two"}
    assert (await before(db, third.action_node_id))["script_state"] == {"seen": "before three"}
    # Only the branch whose start differs stores a copy; the newest reads its parent's.
    assert await column(db, second.action_node_id, "state_before") is not None
    assert await column(db, third.action_node_id, "state_before") is None
    assert await column(db, first.narrator_node_id, "state_after") == await before(
        db, third.action_node_id
    )


async def test_turns_stored_with_their_own_state_before_still_undo(db, engine, tree, fake_model):
    # Databases from before state was stored once hold a copy on each turn's first node.
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    fake_model.queue("One.", "Two.")
    await turn(engine, adventure_id, "look")
    second = await turn(engine, adventure_id, "walk")
    async with db.session() as session, session.begin():
        await session.execute(
            update(StoryNode)
            .where(StoryNode.id == second.action_node_id)
            .values(state_before={"world_state": {}, "script_state": {"old": "copy"}})
        )
    await tree.undo(ALICE, CHANNEL)
    assert (await adventure_of(db, adventure_id)).script_state == {"old": "copy"}


async def test_undo_at_the_opening_and_a_stale_undo_change_nothing(db, engine, tree, fake_model):
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    with pytest.raises(InvalidInput, match="opening"):
        await tree.undo(ALICE, CHANNEL)
    fake_model.queue("Rain.")
    await turn(engine, adventure_id, "wait")
    version = (await adventure_of(db, adventure_id)).version
    await tree.undo(ALICE, CHANNEL, seen_version=version)
    head = (await adventure_of(db, adventure_id)).head_node_id
    with pytest.raises(StoryMovedOn):  # the same Undo button pressed twice
        await tree.undo(ALICE, CHANNEL, seen_version=version)
    assert (await adventure_of(db, adventure_id)).head_node_id == head


async def test_only_the_author_host_or_a_manager_may_undo(db, engine, tree, fake_model):
    adventure_id = await new_adventure(db)
    # A server adventure hosted by alice.
    async with db.session() as session, session.begin():
        await touch_user(session, ALICE.user_id, "alice")
        await touch_server(session, 9, "The Hearth")
        await session.execute(
            update(Adventure)
            .where(Adventure.id == adventure_id)
            .values(server_id=9, host_id=ALICE.user_id, owner_id=None)
        )
    fake_model.queue("Carol's turn.")
    carol = Actor(user_id=303, user_name="carol", server_id=9)
    await turn(engine, adventure_id, "sing", author=carol.user_id)
    with pytest.raises(NotAllowed, match="alice"):
        await tree.undo(BOB, CHANNEL)
    await tree.undo(carol, CHANNEL)  # the author
    await tree.redo(ALICE, CHANNEL)  # the host
    manager = replace(BOB, server_id=9, manages_server=True)
    await tree.undo(manager, CHANNEL)  # a server manager


async def test_writing_below_a_moved_back_head_forks_a_branch(db, engine, tree, fake_model):
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    fake_model.queue("One.", "Two.", "Other two.")
    first = await turn(engine, adventure_id, "one")
    second = await turn(engine, adventure_id, "two")
    await tree.undo(ALICE, CHANNEL)
    forked = await turn(engine, adventure_id, "other")

    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        branches = {
            b.name: b
            for b in await session.scalars(
                select(Branch).where(Branch.adventure_id == adventure_id)
            )
        }
        assert set(branches) == {"main", "fork 2"}
        assert branches["main"].tip_node_id == second.narrator_node_id  # the old future stays
        assert branches["fork 2"].tip_node_id == forked.narrator_node_id
        assert adventure.active_branch_id == branches["fork 2"].id
        line = await line_tail(session, adventure.head_node_id, 10)
        assert [n.text for n in line[1:]] == ["> You one.", "One.", "> You other.", "Other two."]
        # The new branch borrows the shared turns: they exist once.
        assert forked.action_node_id != second.action_node_id
        shared = await session.get(StoryNode, first.narrator_node_id)
        assert shared is not None

    # Switching back restores that line: its tip and its state.
    moved = await tree.switch_branch(ALICE, CHANNEL, "main")
    assert moved.head_node_id == second.narrator_node_id and moved.branch == "main"
    assert set(moved.removed) == {forked.action_node_id, forked.narrator_node_id}


async def test_a_branch_switch_restores_its_lines_state(db, engine, tree, fake_model):
    adventure_id = await bandit_camp(db)
    await host(db, adventure_id)
    fake_model.queue(
        f"Hit.\n\n{block(-10)}", f"Hit hard.\n\n{block(-30)}", f"Healed.\n\n{block(20)}"
    )
    await turn(engine, adventure_id, "charge")
    await turn(engine, adventure_id, "charge again")  # main: hp 60
    main_state = (await adventure_of(db, adventure_id)).world_state
    await tree.undo(ALICE, CHANNEL)
    await turn(engine, adventure_id, "rest")  # fork 2: hp 90 + 20 → 100 (clamped)
    fork_state = (await adventure_of(db, adventure_id)).world_state
    assert fork_state["values"]["player.hp"] == 100

    await tree.switch_branch(ALICE, CHANNEL, "main")
    assert (await adventure_of(db, adventure_id)).world_state == main_state
    await tree.switch_branch(ALICE, CHANNEL, "fork 2")
    assert (await adventure_of(db, adventure_id)).world_state == fork_state
    with pytest.raises(InvalidInput, match="already"):
        await tree.switch_branch(ALICE, CHANNEL, "fork 2")


async def test_branch_commands_check_their_input(db, engine, tree, fake_model):
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    fake_model.queue("One.")
    await turn(engine, adventure_id, "one")
    made = await tree.new_branch(ALICE, CHANNEL, "  side   quest ")
    assert made.branch == "side quest"
    with pytest.raises(InvalidInput, match="already a branch"):
        await tree.new_branch(ALICE, CHANNEL, "side quest")
    with pytest.raises(InvalidInput, match="needs a name"):
        await tree.new_branch(ALICE, CHANNEL, "   ")
    with pytest.raises(InvalidInput, match="at most"):
        await tree.new_branch(ALICE, CHANNEL, "x" * 51)
    with pytest.raises(InvalidInput, match="the story is on"):
        await tree.delete_branch(ALICE, CHANNEL, "side quest")
    assert "now called" in await tree.rename_branch(ALICE, CHANNEL, "main", "trunk")
    listed = await tree.branches(CHANNEL)
    assert [(b.name, b.active) for b in listed] == [("trunk", False), ("side quest", True)]
    with pytest.raises(NotFound, match="no branch called"):
        await tree.switch_branch(ALICE, CHANNEL, "nowhere")


async def test_save_points_restore_and_guard_their_branch(db, engine, tree, fake_model):
    adventure_id = await bandit_camp(db)
    await host(db, adventure_id)
    fake_model.queue(f"Hit.\n\n{block(-10)}", f"Hit hard.\n\n{block(-30)}")
    first = await turn(engine, adventure_id, "charge")
    saved_state = (await adventure_of(db, adventure_id)).world_state
    point = await tree.add_save_point(ALICE, CHANNEL, "camp")
    assert (point.name, point.branch, point.is_head) == ("camp", "main", True)
    with pytest.raises(InvalidInput, match="already a save point"):
        await tree.add_save_point(ALICE, CHANNEL, "camp")
    await turn(engine, adventure_id, "charge again")

    moved = await tree.restore_save_point(ALICE, CHANNEL, "camp")
    assert moved.head_node_id == first.narrator_node_id and moved.can_redo
    assert (await adventure_of(db, adventure_id)).world_state == saved_state
    with pytest.raises(InvalidInput, match="already at"):
        await tree.restore_save_point(ALICE, CHANNEL, "camp")

    # A save point on a branch keeps that branch from being deleted.
    await tree.new_branch(ALICE, CHANNEL, "elsewhere")
    with pytest.raises(InvalidInput, match="save points on it"):
        await tree.delete_branch(ALICE, CHANNEL, "main")
    await tree.delete_save_point(ALICE, CHANNEL, "camp")
    assert "deleted" in await tree.delete_branch(ALICE, CHANNEL, "main")
    async with db.session() as session:
        assert await session.scalar(select(func.count()).select_from(SavePoint)) == 0
        # The turns stay: the other branch borrows them.
        assert await session.get(StoryNode, first.narrator_node_id) is not None


async def test_head_moves_cut_the_memory_cursors_back(db, engine, tree, fake_model):
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    fake_model.queue("One.", "Two.")
    first = await turn(engine, adventure_id, "one")
    second = await turn(engine, adventure_id, "two")
    first_end = await column(db, first.narrator_node_id, "index")
    second_end = await column(db, second.narrator_node_id, "index")
    # The bank has summed up both turns (cursors are positions: turns played), and the summary
    # the first one.
    async with db.session() as session, session.begin():
        session.add(
            Memory(adventure_id=adventure_id, text="One.", source_start=1, source_end=first_end)
        )
        session.add(
            Memory(
                adventure_id=adventure_id,
                text="Two.",
                source_start=first_end + 1,
                source_end=second_end,
            )
        )
        await session.execute(
            update(Adventure)
            .where(Adventure.id == adventure_id)
            .values(memory_cursor=2, summary_cursor=1)
        )
    await tree.undo(ALICE, CHANNEL)
    adventure = await adventure_of(db, adventure_id)
    # The undone turn's memory is gone and the cursor is back after the first turn, so the
    # cadence writes the second turn again from whatever the line holds next.
    assert (adventure.memory_cursor, adventure.summary_cursor) == (1, 1)
    async with db.session() as session:
        texts = list(
            await session.scalars(select(Memory.text).where(Memory.adventure_id == adventure_id))
        )
    assert texts == ["One."]


async def test_edit_corrects_the_text_and_keeps_the_original_as_a_take(
    db, engine, tree, fake_model
):
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    fake_model.queue("The gaet creaks.")
    done = await turn(engine, adventure_id, "push")
    form = await tree.turn_to_edit(ALICE, CHANNEL)
    assert form.text == "The gaet creaks."
    with pytest.raises(InvalidInput, match="empty"):
        await tree.edit(ALICE, CHANNEL, "  ", node_id=form.node_id, seen_version=form.version)
    with pytest.raises(InvalidInput, match="unchanged"):
        await tree.edit(
            ALICE, CHANNEL, "The gaet creaks.", node_id=form.node_id, seen_version=form.version
        )
    edited = await tree.edit(
        ALICE, CHANNEL, "The gate creaks.", node_id=form.node_id, seen_version=form.version
    )
    assert (edited.take, edited.take_count, edited.move.head_text) == (2, 2, "The gate creaks.")
    with pytest.raises(StoryMovedOn, match="form was open"):
        await tree.edit(ALICE, CHANNEL, "Again.", node_id=form.node_id, seen_version=form.version)
    async with db.session() as session:
        takes = await session.execute(
            select(Take.number, Take.text).where(Take.node_id == done.narrator_node_id)
        )
        assert sorted(takes) == [(1, "The gaet creaks."), (2, "The gate creaks.")]


async def test_a_retry_under_undone_turns_writes_beside_them(db, engine, tree, fake_model):
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    fake_model.queue("One.", "Two.", "One, again.")
    first = await turn(engine, adventure_id, "one")
    second = await turn(engine, adventure_id, "two")
    await tree.undo(ALICE, CHANNEL)
    with pytest.raises(InvalidInput, match="Later turns"):
        await tree.choose_take(ALICE, CHANNEL, first.narrator_node_id, 1)
    done = await retry(engine, adventure_id)
    assert isinstance(done, TurnDone), done
    assert done.result.replaced_node_id == first.narrator_node_id
    async with db.session() as session:
        old = await session.get(StoryNode, first.narrator_node_id)
        assert old.text == "One." and old.take_count == 1  # the undone line still follows it
        branches = {
            b.name: b.tip_node_id
            for b in await session.scalars(
                select(Branch).where(Branch.adventure_id == adventure_id)
            )
        }
    assert branches == {"main": second.narrator_node_id, "fork 2": done.result.narrator_node_id}


async def test_switching_to_a_branch_at_the_same_place_changes_no_state(
    db, engine, tree, fake_model
):
    adventure_id = await bandit_camp(db)
    await host(db, adventure_id)
    fake_model.queue(f"Hit.\n\n{block(-10)}")
    await turn(engine, adventure_id, "charge")
    await tree.new_branch(ALICE, CHANNEL, "side")
    # A host's correction after the turn (as /state set makes it).
    async with db.session() as session, session.begin():
        adventure = await session.get(Adventure, adventure_id)
        state = {**adventure.world_state}
        state["values"] = {**state["values"], "player.hp": 42}
        adventure.world_state = state
    moved = await tree.switch_branch(ALICE, CHANNEL, "main")
    assert moved.branch == "main" and moved.removed == () and moved.restored == ()
    assert (await adventure_of(db, adventure_id)).world_state["values"]["player.hp"] == 42
    # Undo and redo keep the correction too: it was the state the head left.
    await tree.undo(ALICE, CHANNEL)
    assert (await adventure_of(db, adventure_id)).world_state["values"]["player.hp"] == 100
    await tree.redo(ALICE, CHANNEL)
    assert (await adventure_of(db, adventure_id)).world_state["values"]["player.hp"] == 42


# --- what loading reads ---------------------------------------------------------------------------


def _row_bytes(nodes: list[StoryNode]) -> int:
    """The bytes of the column values a load brought back (loaded attributes only)."""
    total = 0
    for node in nodes:
        for name, value in node.__dict__.items():
            if not name.startswith("_"):
                total += len(str(value).encode())
    return total


async def _forty_turns(engine, fake_model, adventure_id: int) -> None:
    for n in range(20):
        fake_model.queue(f"Narration {n:02d}: the road bends and the lanterns sway.")
        await turn(engine, adventure_id, f"walk on {n:02d}")


async def test_a_forked_story_loads_no_more_than_the_same_story_unforked(
    db, engine, tree, fake_model
):
    plain = await new_adventure(db, channel_id=2)
    await _forty_turns(engine, fake_model, plain)

    forked = await new_adventure(db, channel_id=CHANNEL)
    await host(db, forked)
    await _forty_turns(engine, fake_model, forked)
    for n in range(20):
        # Back a few turns, write another future (a fork), return to the main line.
        for _ in range(1 + n % 3):
            await tree.undo(ALICE, CHANNEL)
        fake_model.queue(f"Fork {n}: a different road, longer than the first by far.")
        await turn(engine, forked, f"turn aside {n}")
        await tree.switch_branch(ALICE, CHANNEL, "main")
    # Retries on the tip add takes (heavy rows) that a load must not read either.
    for _ in range(3):
        fake_model.queue("Narration 19: the road bends and the lanterns sway, again.")
        await retry(engine, forked)
    await tree.choose_take(ALICE, CHANNEL, (await adventure_of(db, forked)).head_node_id, 1)

    async with db.session() as session:
        assert (
            await session.scalar(
                select(func.count()).select_from(Branch).where(Branch.adventure_id == forked)
            )
            == 21
        )
        loaded = {}
        for adventure_id in (plain, forked):
            adventure = await session.get(Adventure, adventure_id)
            session.expunge_all()
            line = await line_tail(session, adventure.head_node_id, 41)
            window = await line_window(
                session, adventure.head_node_id, token_limit=10_000, max_entries=41
            )
            assert len(line) == len(window) == 41
            loaded[adventure_id] = _row_bytes(line) + _row_bytes(window)
            session.expunge_all()
    print(f"\nbytes loaded: unforked {loaded[plain]}, forked 20 times {loaded[forked]}")
    assert abs(loaded[forked] - loaded[plain]) <= 0.05 * loaded[plain], loaded


async def test_loading_a_page_of_turns_never_selects_takes_or_snapshots(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    fake_model.queue("A.", "B.", "B again.")
    await turn(engine, adventure_id, "a")
    await turn(engine, adventure_id, "b")
    await retry(engine, adventure_id)
    statements: list[str] = []

    def seen(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement.lower())

    event.listen(db.engine.sync_engine, "before_cursor_execute", seen)
    try:
        async with db.session() as session:
            head = (await session.get(Adventure, adventure_id)).head_node_id
            statements.clear()
            await line_tail(session, head, 20)
            await line_window(session, head, token_limit=5000, max_entries=20)
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", seen)
    assert len(statements) == 2
    for statement in statements:
        assert "takes" not in statement
        for heavy in (
            "state_before",
            "state_after",
            "prompt_snapshot",
            "reasoning",
            "context_report",
        ):
            assert heavy not in statement
