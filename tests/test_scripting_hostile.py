"""Hostile scripts through Discord on the local stand-in: a player uploads a script meant to
freeze the bot, forge its own result, grow the database or eat the turn's time, and the bot
stays responsive, the turn goes on, and Insights says what was refused.

Scripts run in worker processes (``engine.library.scripting.workers``); the limits here are small so
a killed run costs a second, not the defaults' seconds.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select
from sqlmodel import col

from engine.library.scripting.workers import CHECK_SECONDS
from engine.storage.models import Adventure, AdventureCard, StoryNode
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.test_scripting_commands import answer, command, js

#: What these tests run scripts under: a killed run takes min(3 × 0.2 + 1, 1.2 + 0.5) s.
SETTINGS = {"script_time_seconds": 0.2, "script_turn_seconds": 1.2}

TOSTRING_LOOP = "throw { toString() { while (true) {} } }"
PROXY_TRAP_LOOP = "throw new Proxy({}, { get() { while (true) {} } })"
SYNTAX_CHECK_BREAKOUT = "} throw { toString() { while (true) {} } }; {"


@pytest.fixture
async def hostile_env(tmp_path, fake_model, caplog, database_url) -> AsyncIterator[DiscordEnv]:
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, **SETTINGS
    ) as environment:
        yield environment


async def dm_adventure(env: DiscordEnv) -> int:
    """Bob's own DM adventure: any player may upload scripts there."""
    dm = env.fake.dm_channel(env.bob)
    record = await env.fake.slash(env.bob, dm, "start")
    await env.done()
    assert record.failed is None
    return dm


async def upload(env: DiscordEnv, channel: int, hook: str, code: str, name: str = "main") -> str:
    record = await command(
        env, env.bob, channel, "upload", hook=hook, file=js(f"{hook}.js", code), name=name
    )
    return answer(env, record).content


async def script_logs(env: DiscordEnv, channel: int) -> str:
    """What /insights shows of the newest turn's scripts: the embed's field, and the full
    report attached when the embed had to cut it."""
    record = await env.fake.slash(env.bob, channel, "insights")
    await env.done()
    assert record.original_message_id is not None
    message = env.fake.message(record.original_message_id)
    (embed,) = message.embeds
    fields = [f["value"] for f in embed["fields"] if f["name"] == "Script logs"]
    files = [file.content.decode() for file in message.attachments]
    return "\n".join(fields + files)


async def adventure_row(env: DiscordEnv, channel: int) -> Adventure:
    ref = await env.bot.services.play.adventure_in(channel)
    assert ref is not None
    async with env.bot.services.db.session() as session:
        adventure = await session.get(Adventure, ref.adventure_id)
        assert adventure is not None
        return adventure


@pytest.mark.parametrize("code", [TOSTRING_LOOP, PROXY_TRAP_LOOP], ids=["toString", "Proxy"])
async def test_a_script_that_holds_the_process_does_not_freeze_the_bot(
    hostile_env, fake_model, code
):
    env = hostile_env
    dm = await dm_adventure(env)
    assert "was added as a new script" in await upload(env, dm, "input", code)
    fake_model.queue("The lamp gutters.")
    before = len(env.narration(dm))
    started = time.perf_counter()
    await env.fake.slash(env.bob, dm, "do", action="light the lamp")
    # While the script's run is stuck, another member's command is answered at once.
    other = await env.fake.slash(env.alice, env.channel, "script list")
    answered = time.perf_counter() - started
    assert other.failed is None and env.fake.message(other.original_message_id).content
    assert len(env.narration(dm)) == before  # the stuck turn had not finished yet
    await env.done()
    took = time.perf_counter() - started
    print(f"\nanother command answered after {answered:.2f} s; the turn took {took:.2f} s")
    # The turn went on without the script: its worker was killed at the turn's script time.
    assert took < 10
    assert env.narration(dm)[-1].startswith("The lamp gutters.")
    assert "did not finish within" in await script_logs(env, dm)


async def test_the_upload_check_compiles_without_running_the_code(hostile_env):
    env = hostile_env
    dm = await dm_adventure(env)
    started = time.perf_counter()
    reply = await upload(env, dm, "library", SYNTAX_CHECK_BREAKOUT)
    assert time.perf_counter() - started < 5
    assert "does not parse, so it was not saved" in reply and "SyntaxError" in reply
    # Code that would loop forever if it ran is only parsed, and saved.
    assert "was added as a new script" in await upload(env, dm, "library", "while (true) {}")


async def test_a_redefined_finish_cannot_forge_the_result(hostile_env, fake_model):
    env = hostile_env
    dm = await dm_adventure(env)
    forged = {
        "text": "FORGED",
        "stop": False,
        "state": '{"forged": true}',
        "storyCards": [{"id": "x", "keys": 5, "entry": {"not": "text"}}] * 3,
        "logs": [],
    }
    code = f"""
    globalThis.__campfire_finish = () => JSON.stringify({forged!r});
    Object.defineProperty(globalThis, '__campfire_logs', {{ value: () => 'not json' }});
    JSON.stringify = () => '{{}}';
    state.honest = true;
    text + ' (read honestly)'
    """
    assert "was added" in await upload(env, dm, "output", code)
    fake_model.queue("The bridge holds.")
    await env.fake.slash(env.bob, dm, "do", action="cross the bridge")
    await env.done()
    assert env.narration(dm)[-1].startswith("The bridge holds. (read honestly)")
    adventure = await adventure_row(env, dm)
    assert adventure.script_state == {"honest": True}
    async with env.bot.services.db.session() as session:
        keys = list(
            await session.scalars(
                select(col(AdventureCard.keys)).where(
                    col(AdventureCard.adventure_id) == adventure.id
                )
            )
        )
    assert all(isinstance(key, str) for key in keys) and "5" not in keys


async def test_a_result_that_cannot_be_kept_is_a_script_error_not_a_failed_turn(
    hostile_env, fake_model
):
    env = hostile_env
    dm = await dm_adventure(env)
    # The state serialises to a number: the run's changes are refused, the turn goes on.
    code = "state.kept = 1; state.toJSON = () => 42; text + ' [changed]'"
    assert "was added" in await upload(env, dm, "output", code, name="Odd")
    fake_model.queue("Rain falls.")
    await env.fake.slash(env.bob, dm, "do", action="wait")
    await env.done()
    assert env.narration(dm)[-1].startswith("Rain falls.")
    assert "[changed]" not in env.narration(dm)[-1]
    assert "error: onOutput · Odd: The script's state is not an object" in await script_logs(
        env, dm
    )
    assert (await adventure_row(env, dm)).script_state == {}


async def test_too_many_or_too_long_story_cards_are_refused(
    tmp_path, fake_model, caplog, database_url
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, max_story_cards=4, **SETTINGS
    ) as env:
        dm = await dm_adventure(env)
        adventure = await adventure_row(env, dm)
        code = "for (let i = 0; i < 9; i++) addStoryCard('k' + i, 'e'); text"
        assert "was added" in await upload(env, dm, "output", code, name="Hoarder")
        code = "addStoryCard('scroll', 'word '.repeat(6000)); text"
        assert "was added" in await upload(env, dm, "output", code, name="Scribe")
        fake_model.queue("Dust settles.")
        await env.fake.slash(env.bob, dm, "do", action="look")
        await env.done()
        assert env.narration(dm)[-1].startswith("Dust settles.")
        logs = await script_logs(env, dm)
        assert "Hoarder: The script left 12 story cards; an adventure may hold at most 4" in logs
        assert "entry is 30,000 characters long; a script's card may have at most 20,000" in logs
        async with env.bot.services.db.session() as session:
            entries = list(
                await session.scalars(
                    select(col(AdventureCard.entry)).where(
                        col(AdventureCard.adventure_id) == adventure.id
                    )
                )
            )
        assert len(entries) <= 4 and all(len(entry) <= 20_000 for entry in entries)


async def test_a_state_over_the_cap_is_refused_with_a_message(hostile_env, fake_model):
    env = hostile_env
    dm = await dm_adventure(env)
    code = "state.small = 1; state.big = 'x'.repeat(200000); text"
    assert "was added" in await upload(env, dm, "output", code, name="Hoarder")
    fake_model.queue("The cellar is full.")
    await env.fake.slash(env.bob, dm, "do", action="store everything")
    await env.done()
    assert env.narration(dm)[-1].startswith("The cellar is full.")
    logs = await script_logs(env, dm)
    assert "error: onOutput · Hoarder: The script's state is 200,0" in logs
    assert "may keep at most 100,000" in logs
    assert (await adventure_row(env, dm)).script_state == {}


async def test_scripts_looping_in_every_hook_are_capped_per_turn(hostile_env, fake_model):
    env = hostile_env
    dm = await dm_adventure(env)
    for name in ("One", "Two", "Three"):
        for hook in ("input", "context", "output"):
            await upload(env, dm, hook, "while (true) {}", name=name)
    fake_model.queue("Time passes.")
    started = time.perf_counter()
    await env.fake.slash(env.bob, dm, "do", action="wait")
    await env.done()
    took = time.perf_counter() - started
    assert env.narration(dm)[-1].startswith("Time passes.")
    adventure = await adventure_row(env, dm)
    async with env.bot.services.db.session() as session:
        report = await session.scalar(
            select(col(StoryNode.context_report)).where(col(StoryNode.id) == adventure.head_node_id)
        )
    runs = (report or {}).get("scripts") or []
    spent = sum(run["ms"] for run in runs)
    print(f"\nnine looping hooks: {spent} ms of script time, the turn took {took:.2f} s")
    # Nine runs of 0.2 s each would be 1.8 s; the turn's 1.2 s (and its grace) ends them.
    assert spent <= 1200 + 500 + 300
    skipped = [run for run in runs if run["note"].startswith("skipped")]
    assert len(skipped) >= 3
    assert skipped[-1]["note"] == (
        "skipped: this turn's scripts had used all of their 1.2 s (every hook and script together)"
    )
    assert "skipped: this turn's scripts had used all of their 1.2 s" in await script_logs(env, dm)


#: QuickJS parses many `var` declarations in quadratic time: a file of them under the size cap
#: took 20 s (issue: spend and fairness).
SLOW_TO_PARSE = "".join(f"var v{i};" for i in range(213_000))


async def test_a_plain_member_is_refused_before_the_code_is_parsed(hostile_env):
    env = hostile_env
    thread = await env.start_thread(host=env.alice)
    started = time.perf_counter()
    record = await command(
        env, env.bob, thread, "upload", hook="library", file=js("slow.js", SLOW_TO_PARSE)
    )
    refusal = answer(env, record).content
    assert "Manage Server" in refusal
    assert time.perf_counter() - started < 3  # no worker spent seconds parsing it


async def test_a_file_that_parses_slowly_is_refused_at_the_bound(hostile_env):
    env = hostile_env
    dm = await dm_adventure(env)
    started = time.perf_counter()
    reply = await upload(env, dm, "library", SLOW_TO_PARSE)
    assert "not saved" in reply and "not checked" in reply
    assert time.perf_counter() - started < CHECK_SECONDS + 4
