"""Turn modes through Discord (/host mode free|rounds|host): rounds gather one action per player
and one narration answers them all, in the order they came; the round panel, its Close button,
the round timeout; retry and undo of a round as one turn. Real discord.py over the local
stand-in, the fake model server behind the bot, on both databases."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import select
from sqlmodel import col

from engine.storage.models import Adventure, Role, StoryNode, TurnMode
from engine.storage.party_models import RoundAction
from tests.discord_env import DiscordEnv, answered, campfire_on_standin, crash, restarted


async def adventure_of(env: DiscordEnv, thread: int) -> Adventure:
    async with env.bot.services.db.session() as session:
        return (
            await session.scalars(select(Adventure).where(col(Adventure.channel_id) == thread))
        ).one()


async def line_of(env: DiscordEnv, thread: int) -> list[tuple[Role, int | None, str]]:
    """The story's line from the opening to the head: (role, author, text)."""
    adventure = await adventure_of(env, thread)
    async with env.bot.services.db.session() as session:
        nodes = {n.id: n for n in await session.scalars(select(StoryNode))}
    line = []
    node_id = adventure.head_node_id
    while node_id is not None:
        node = nodes[node_id]
        line.append((node.role, node.author_id, node.text))
        node_id = node.parent_id
    return line[::-1]


async def waiting(env: DiscordEnv) -> int:
    async with env.bot.services.db.session() as session:
        return len((await session.scalars(select(RoundAction))).all())


async def party_of_three(env: DiscordEnv, mode: str) -> tuple[int, int]:
    """A thread where alice hosts, with characters for alice (Ann), bob (Bram) and carol
    (Cora), played in ``mode``: the thread and carol."""
    carol = env.fake.add_user("carol", member_of=[env.guild])
    await env.fake.flush()
    thread = await env.start_thread()
    for user, name in ((env.alice, "Ann"), (env.bob, "Bram"), (carol, "Cora")):
        await env.fake.slash(user, thread, "character set", name=name)
        await env.done()
    record = await env.fake.slash(env.alice, thread, "host mode", mode=mode)
    await env.done()
    message = await answered(env, record)
    assert f"turn mode: **{mode}**" in message.content and message.visible_to is None
    return thread, carol


def panel(env: DiscordEnv, thread: int):
    """The newest round panel in the thread."""
    return [m for m in env.fake.messages(thread) if m.content.startswith("🎲 **Round")][-1]


async def act(env: DiscordEnv, thread: int, user: int, command: str, **options: str):
    record = await env.fake.slash(user, thread, command, **options)
    await env.done()
    return record


async def test_a_round_of_three_is_narrated_once_then_retried_and_undone_as_one(
    env: DiscordEnv, fake_model
):
    thread, carol = await party_of_three(env, "rounds")
    before = await line_of(env, thread)
    asked = len(fake_model.requests)
    fake_model.queue("Three voices, one answer.", "Another telling of the round.")

    await act(env, thread, env.bob, "do", action="light a torch")
    first = await act(env, thread, carol, "say", words="stay close")
    # Bob changes his mind: his new action takes his first one's place in the round.
    changed = await act(env, thread, env.bob, "do", action="draw his axe")
    assert "changed their action" in (await answered(env, changed)).content
    assert "(2/3)" in (await answered(env, first)).content
    shown = panel(env, thread).content
    assert "✅ Bram" in shown and "✅ Cora" in shown and "⏳ Ann" in shown
    assert len(fake_model.requests) == asked and await waiting(env) == 2

    # The last player acts: the round closes and one narration answers all three.
    await act(env, thread, env.alice, "do", action="open the door")
    assert len(fake_model.requests) == asked + 1
    user = fake_model.requests[-1]["messages"][-1]["content"]
    order = ["> Bram draws his axe.", '> Cora says "Stay close."', "> Ann opens the door."]
    assert [user.index(line) for line in order] == sorted(user.index(line) for line in order)
    assert "light a torch" not in user
    after = await line_of(env, thread)
    assert after[: len(before)] == before
    assert after[len(before) :] == [
        (Role.PLAYER, env.bob, order[0]),
        (Role.PLAYER, carol, order[1]),
        (Role.PLAYER, env.alice, order[2]),
        (Role.NARRATOR, None, "Three voices, one answer."),
    ]
    assert await waiting(env) == 0
    assert panel(env, thread).content.startswith("🎲 **Round closed**")
    assert not panel(env, thread).buttons

    # Retry writes the round's narration again over the same three actions.
    narration = env.fake.last_message(thread)
    await env.fake.press(env.alice, narration.id, label="Retry")
    await env.done()
    assert len(fake_model.requests) == asked + 2
    retried = fake_model.requests[-1]["messages"][-1]["content"]
    assert all(line in retried for line in order)
    assert (await line_of(env, thread))[-1][2] == "Another telling of the round."
    assert len(await line_of(env, thread)) == len(after)

    # Undo takes the whole round back: the story stands where it stood before it.
    await act(env, thread, env.alice, "undo")
    assert await line_of(env, thread) == before


async def test_host_mode_waits_for_the_hosts_close(env: DiscordEnv, fake_model):
    thread, carol = await party_of_three(env, "host")
    asked = len(fake_model.requests)
    fake_model.queue("The host rings the bell.")
    for user in (carol, env.bob, env.alice):
        await act(env, thread, user, "do", action="wait")
    # Everyone acted, yet in host mode the round stays open.
    assert len(fake_model.requests) == asked and await waiting(env) == 3

    # Only the host (and managers) close it: bob's press is refused, for him alone.
    refused = await env.fake.press(env.bob, panel(env, thread).id, label="Close round")
    await env.done()
    message = await answered(env, refused)
    assert message.visible_to == env.bob and "close a round" in message.content
    assert await waiting(env) == 3

    await env.fake.press(env.alice, panel(env, thread).id, label="Close round")
    await env.done()
    assert len(fake_model.requests) == asked + 1
    line = await line_of(env, thread)
    assert [role for role, _, _ in line[-4:]] == [Role.PLAYER] * 3 + [Role.NARRATOR]
    assert [author for _, author, _ in line[-4:-1]] == [carol, env.bob, env.alice]
    assert await waiting(env) == 0


async def test_a_player_who_hosts_nothing_cannot_change_the_mode(env: DiscordEnv, fake_model):
    thread = await env.start_thread(host=env.bob)
    carol = env.fake.add_user("carol", member_of=[env.guild])
    await env.fake.flush()
    record = await env.fake.slash(carol, thread, "host mode", mode="rounds")
    await env.done()
    message = await answered(env, record)
    assert message.visible_to == carol and "host controls" in message.content
    assert (await adventure_of(env, thread)).turn_mode == TurnMode.FREE
    # The host may; the same mode again changes nothing and says so.
    await act(env, thread, env.bob, "host mode", mode="rounds")
    assert (await adventure_of(env, thread)).turn_mode == TurnMode.ROUNDS
    again = await act(env, thread, env.bob, "host mode", mode="rounds")
    assert "already" in (await answered(env, again)).content
    # Back to free play, the waiting round is dropped and its panel says so. (In host mode,
    # since in rounds carol alone, the whole party, would close her round at once.)
    await act(env, thread, env.bob, "host mode", mode="host")
    await act(env, thread, carol, "do", action="knock")
    assert await waiting(env) == 1
    await act(env, thread, env.bob, "host mode", mode="free")
    assert await waiting(env) == 0
    assert panel(env, thread).content.startswith("🎲 **Round dropped**")
    assert not panel(env, thread).buttons


#: The round timeout the timeout's test runs with (seconds): two players act within it. At 0.6 s
#: a loaded machine (the suite's four workers on two cores) once took longer than that for the
#: two actions, and the round closed before the second came.
SHORT_TIMEOUT_S = 2.0


async def timed_out(env: DiscordEnv, thread: int, *, entries: int) -> None:
    """Until the round's timer (the bot's own task, which the stand-in does not wait for) has
    closed the round and its turn is on the line (``entries`` long), and is shown."""
    for _ in range(int((SHORT_TIMEOUT_S + 5) / 0.05)):
        if await waiting(env) == 0 and len(await line_of(env, thread)) >= entries:
            break
        await asyncio.sleep(0.05)
    await env.done()


async def test_the_timeout_closes_a_round_without_its_late_player(
    tmp_path: Path, fake_model, caplog, database_url: str
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, round_timeout_seconds=SHORT_TIMEOUT_S
    ) as env:
        thread, carol = await party_of_three(env, "rounds")
        asked = len(fake_model.requests)
        fake_model.queue("Time runs out for Ann.")
        await act(env, thread, carol, "do", action="run")
        await act(env, thread, env.bob, "do", action="hide")
        assert len(fake_model.requests) == asked
        # Alice is late: the round closes on its own with the two actions it has.
        await timed_out(env, thread, entries=5)
        assert len(fake_model.requests) == asked + 1
        line = await line_of(env, thread)
        assert line[-3:] == [
            (Role.PLAYER, carol, "> Cora runs."),
            (Role.PLAYER, env.bob, "> Bram hides."),
            (Role.NARRATOR, None, "Time runs out for Ann."),
        ]
        assert "Time runs out for Ann." in env.narration(thread)
        # The late player's action opens the next round.
        await act(env, thread, env.alice, "do", action="catch up")
        assert await waiting(env) == 1
        assert "✅ Ann" in panel(env, thread).content


async def test_a_restart_shows_the_open_round_again_and_times_it_out(
    tmp_path: Path, fake_model, caplog, database_url: str
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, round_timeout_seconds=SHORT_TIMEOUT_S
    ) as env:
        thread, carol = await party_of_three(env, "rounds")
        asked = len(fake_model.requests)
        await act(env, thread, carol, "do", action="run")
        shown = panel(env, thread)
        assert "✅ Cora" in shown.content and "⏳ Bram" in shown.content
        # The process dies with the round's timer; the round waits in the database.
        await crash(env)
        fake_model.queue("Time runs out for Ann and Bram.")
        async with restarted(env) as again:
            # The new process found the round: it times it out in its opener's name, and
            # shows it on the same panel (no second one).
            await timed_out(again, thread, entries=4)
            assert len(fake_model.requests) == asked + 1
            line = await line_of(again, thread)
            assert line[-2:] == [
                (Role.PLAYER, carol, "> Cora runs."),
                (Role.NARRATOR, None, "Time runs out for Ann and Bram."),
            ]
            assert panel(again, thread).id == shown.id
            assert again.fake.message(shown.id).content.startswith("🎲 **Round closed**")
            assert again.fake.message(shown.id).buttons == []
            # The next round gets a panel of its own.
            await act(again, thread, env.bob, "do", action="hide")
            assert panel(again, thread).id != shown.id
            assert "✅ Bram" in panel(again, thread).content
