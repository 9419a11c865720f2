"""The party through Discord: /join and /leave announced to it, spectators, a party the host
closes (only its players act or make characters, nobody joins), and /party saying who plays,
who is muted and who watches. Real discord.py over the local stand-in, the fake model server
behind the bot, on both databases."""

from __future__ import annotations

from sqlalchemy import func, select

from engine.storage.coordination_models import RequestRecord
from engine.storage.party_models import RoundAction
from tests.discord_env import DiscordEnv, answered
from tests.test_host_commands import act, adventure_here, announced, players, refused


async def party_text(env: DiscordEnv, thread: int, user: int) -> str:
    record = await env.fake.slash(user, thread, "party")
    await env.done()
    message = await answered(env, record)
    assert message.visible_to == user
    embed = message.embeds[0]
    return f"{embed['description']}\n{embed['footer']['text']}"


async def requests_kept(env: DiscordEnv) -> int:
    async with env.bot.services.db.session() as session:
        return await session.scalar(select(func.count()).select_from(RequestRecord)) or 0


async def test_joining_and_leaving_are_announced_and_a_spectator_is_back_by_acting(env, fake_model):
    carol, dave = await players(env)
    thread = await env.start_thread(host=env.bob)
    fake_model.queue("Carol's turn.", "Carol is back.")

    said = await announced(env, thread, dave, "join")
    assert said == "🙋 *dave joined the party.*"
    await env.fake.slash(carol, thread, "character set", name="Ann")
    await env.done()
    await act(env, thread, carol, "draw her sword")
    listed = await party_text(env, thread, dave)
    assert "bob" in listed and "**Ann** (carol)" in listed and "**dave**" in listed
    assert "/join to play" in listed

    # Joining twice changes nothing, and says so to the player alone.
    text = await refused(env, await env.fake.slash(dave, thread, "join"))
    assert "already in the party" in text

    said = await announced(env, thread, carol, "leave")
    assert said == "👋 *Ann left the party and watches now.*"
    listed = await party_text(env, thread, dave)
    assert "Watching: Ann" in listed and "**Ann** (carol)" not in listed
    text = await refused(env, await env.fake.slash(carol, thread, "leave"))
    assert "already watching" in text

    # The host hands the adventure on before leaving; there is no party in a DM.
    text = await refused(env, await env.fake.slash(env.bob, thread, "leave"))
    assert "/host transfer" in text
    dm = env.fake.dm_channel(carol)
    await env.fake.slash(carol, dm, "start", scenario="lantern")
    await env.done()
    text = await refused(env, await env.fake.slash(carol, dm, "join"))
    assert "no party" in text.lower()

    # The party is open: a spectator who acts is back in it.
    await act(env, thread, carol, "sheathe her sword")
    assert env.narration(thread)[-1] == "Carol is back."
    listed = await party_text(env, thread, dave)
    assert "**Ann** (carol)" in listed and "Watching" not in listed


async def test_a_closed_party_lets_only_its_players_act_and_nobody_join(env, fake_model):
    carol, dave = await players(env)
    thread = await env.start_thread(host=env.bob)
    fake_model.queue("Carol's turn.", "Carol again.", "The host's turn.", "Dave at last.")
    await act(env, thread, carol, "light a torch")

    said = await announced(env, thread, env.bob, "host party", state="closed")
    assert "closed the party" in said
    before = await adventure_here(env, thread)
    kept, asked = await requests_kept(env), len(fake_model.requests)
    for attempt in (
        await env.fake.slash(dave, thread, "do", action="barge in"),
        await env.fake.slash(dave, thread, "join"),
        await env.fake.slash(dave, thread, "character set", name="Dirk"),
    ):
        text = await refused(env, attempt)
        assert "The party is closed" in text and "bob (the host)" in text, text
    # Refused before anything was written: no request kept, no turn, no call to the model.
    after = await adventure_here(env, thread)
    assert (after.version, after.head_node_id) == (before.version, before.head_node_id)
    assert await requests_kept(env) == kept and len(fake_model.requests) == asked

    # Its players, and the host, play on; /party and /host show say it is closed.
    await act(env, thread, carol, "look around")
    await act(env, thread, env.bob, "ring the bell")
    assert env.narration(thread)[-2:] == ["Carol again.", "The host's turn."]
    assert "The party is closed" in await party_text(env, thread, dave)
    show = await env.fake.slash(dave, thread, "host show")
    await env.done()
    assert "Party: **closed**" in (await answered(env, show)).content

    # A player who leaves a closed party cannot come back until the host opens it.
    await announced(env, thread, carol, "leave")
    text = await refused(env, await env.fake.slash(carol, thread, "do", action="sneak back"))
    assert "The party is closed" in text

    text = await refused(env, await env.fake.slash(env.bob, thread, "host party", state="closed"))
    assert "already closed" in text
    text = await refused(env, await env.fake.slash(dave, thread, "host party", state="open"))
    assert "Only bob (the host)" in text

    said = await announced(env, thread, env.bob, "host party", state="open")
    assert "opened the party" in said
    assert await announced(env, thread, dave, "join") == "🙋 *dave joined the party.*"
    await act(env, thread, dave, "step in")
    assert env.narration(thread)[-1] == "Dave at last."


async def test_leaving_takes_back_an_action_waiting_for_the_round(env, fake_model):
    carol, dave = await players(env)
    thread = await env.start_thread(host=env.bob)
    fake_model.queue("Carol's turn.", "Dave's turn.")
    await act(env, thread, carol, "wave")
    await act(env, thread, dave, "nod")
    await announced(env, thread, env.bob, "host mode", mode="rounds")
    await env.fake.slash(carol, thread, "do", action="climb the wall")
    await env.done()

    await announced(env, thread, carol, "leave")
    async with env.bot.services.db.session() as session:
        waiting = (await session.scalars(select(RoundAction))).all()
    assert waiting == []
    state = await env.bot.services.play.round_here(thread)
    assert state is not None and [p.name for p in state.players] == ["dave"]


async def test_the_party_counts_an_action_waiting_in_the_round(env, fake_model):
    # A player whose first action waits in the round plays, as the round panel counts them,
    # though nothing of theirs is in the story yet; one who acted this round is not "yet to".
    carol, dave = await players(env)
    erin = env.fake.add_user("erin", member_of=[env.guild])
    await env.fake.flush()
    thread = await env.start_thread(host=env.bob)
    fake_model.queue("Carol's turn.", "Dave's turn.")
    await act(env, thread, carol, "wave")
    await act(env, thread, dave, "nod")
    await announced(env, thread, env.bob, "host mode", mode="rounds")
    await env.fake.slash(carol, thread, "do", action="climb the wall")
    await env.fake.slash(erin, thread, "do", action="hold the rope")
    await env.done()
    state = await env.bot.services.play.round_here(thread)
    assert state is not None and len(state.players) == 3  # the round is open: 2 of 3 acted
    text = await party_text(env, thread, env.bob)
    lines = {line.split("**")[1]: line for line in text.splitlines() if line.count("**") >= 2}
    assert "acted this round" in lines["carol"]
    assert "acted this round" in lines["erin"] and "not acted yet" not in lines["erin"]
    assert "acted this round" not in lines["dave"] and "acted last" in lines["dave"]
    assert "acted this round" not in lines["bob"]
