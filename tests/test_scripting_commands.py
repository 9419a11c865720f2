"""/script upload|list|enable|disable|remove|test through Discord on the local stand-in, and a
script's state.message shown under the turn. Every answer is for the member alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from bot.standin.interactions import StandinFile
from bot.standin.records import InteractionRecord
from engine.library.scripting import workers
from engine.library.scripting.fair_share import FairShare
from engine.storage.models import Adventure, AdventureScript, StoryNode
from tests.discord_env import DiscordEnv

SCRIPTS = Path(__file__).parent / "scripts"


async def scripts_here(env: DiscordEnv, channel_id: int) -> list[AdventureScript]:
    ref = await env.bot.services.play.adventure_in(channel_id)
    async with env.bot.services.db.session() as session:
        rows = await session.scalars(
            select(AdventureScript)
            .where(AdventureScript.adventure_id == ref.adventure_id)
            .order_by(AdventureScript.position)
        )
        return list(rows)


def js(name: str, code: str) -> StandinFile:
    return StandinFile(name, code.encode(), "text/javascript")


async def story_nodes(env: DiscordEnv) -> int:
    async with env.bot.services.db.session() as session:
        return len((await session.scalars(select(StoryNode))).all())


async def command(env: DiscordEnv, user: int, channel: int, sub: str, /, **options):
    record = await env.fake.slash(user, channel, f"script {sub}", **options)
    await env.done()
    return record


def answer(env: DiscordEnv, record: InteractionRecord):
    assert record.failed is None
    message = env.fake.message(record.original_message_id)
    assert message.ephemeral and message.visible_to == record.user_id
    return message


async def test_upload_list_enable_disable_remove(env):
    thread = await env.start_thread()
    library = (SCRIPTS / "dice_library.js").read_text()
    record = await command(
        env, env.alice, thread, "upload", hook="library", file=js("library.js", library)
    )
    assert "library code of **main** was added as a new script" in answer(env, record).content
    record = await command(
        env,
        env.alice,
        thread,
        "upload",
        hook="input",
        file=js("input.js", (SCRIPTS / "dice_input.js").read_text()),
    )
    assert "onInput code of **main** was saved" in answer(env, record).content
    await command(
        env, env.alice, thread, "upload", hook="output", file=js("o.js", "text"), name="Echo"
    )
    (main, echo) = await scripts_here(env, thread)
    assert main.shared_library == library and main.on_input.startswith("const modifier")
    assert (echo.name, echo.on_output, echo.position) == ("Echo", "text", main.position + 1)

    listing = answer(env, await command(env, env.bob, thread, "list")).embeds[0]["description"]
    assert "1. **main** (on): library" in listing and "onInput" in listing
    assert "2. **Echo** (on): onOutput 4 chars" in listing

    choices = await env.fake.autocomplete(
        env.alice, thread, "script disable", focused="name", value="ec"
    )
    assert [c["value"] for c in choices] == ["Echo"]

    record = await command(env, env.alice, thread, "disable", name="echo")
    assert answer(env, record).content == "📜 **Echo** is off."
    assert not (await scripts_here(env, thread))[1].enabled
    record = await command(env, env.alice, thread, "enable", name="Echo")
    assert "**Echo** is on" in answer(env, record).content

    record = await command(env, env.alice, thread, "remove", name="main", hook="library")
    assert "The library code was removed." in answer(env, record).content
    assert (await scripts_here(env, thread))[0].shared_library == ""
    record = await command(env, env.alice, thread, "remove", name="Echo")
    assert "was removed" in answer(env, record).content
    assert [s.name for s in await scripts_here(env, thread)] == ["main"]


async def test_a_command_script_answers_under_the_action_and_a_message_under_the_turn(
    env, fake_model
):
    thread = await env.start_thread()
    for hook, name in (("library", "dice_library.js"), ("input", "dice_input.js")):
        await command(
            env, env.alice, thread, "upload", hook=hook, file=js(name, (SCRIPTS / name).read_text())
        )
    await command(
        env,
        env.alice,
        thread,
        "upload",
        hook="output",
        name="Herald",
        file=js("herald.js", "state.message = 'The herald notes the time.'; text"),
    )
    before = env.narration(thread)
    record = await env.fake.slash(env.bob, thread, "do", action="/roll 3d4")
    await env.done()
    response = env.fake.message(record.original_message_id).content
    assert "🎲 roll 3d4: 4 + 4 + 4 = 12" in response
    assert env.narration(thread) == before  # no turn was played
    assert not fake_model.requests

    fake_model.queue("The bells ring noon.")
    await env.fake.slash(env.bob, thread, "do", action="listen")
    await env.done()
    last = env.narration(thread)[-1]
    assert last.startswith("The bells ring noon.")
    assert "> The herald notes the time." in last


async def test_script_test_runs_a_hook_without_saving(env):
    thread = await env.start_thread()
    await command(
        env,
        env.alice,
        thread,
        "upload",
        hook="input",
        file=js("in.js", "log('saw', text.trim()); state.tested = true; text.toUpperCase()"),
    )
    record = await command(env, env.alice, thread, "test", hook="input", text="open the door")
    message = answer(env, record)
    assert "onInput** ran 1 script(s)" in message.content
    assert "> YOU OPEN THE DOOR." in message.content
    (report,) = message.attachments
    text = report.content.decode()
    assert "log: saw > You open the door." in text
    ref = await env.bot.services.play.adventure_in(thread)
    async with env.bot.services.db.session() as session:
        assert (await session.get(Adventure, ref.adventure_id)).script_state == {}


async def test_script_test_of_context_and_output(env, fake_model):
    thread = await env.start_thread()
    await command(
        env,
        env.alice,
        thread,
        "upload",
        hook="context",
        file=js("c.js", "log(info.maxChars, text.includes('Recent Story:')); text + '\\nEND'"),
    )
    await command(env, env.alice, thread, "upload", hook="output", file=js("o.js", "null.crash"))
    message = answer(env, await command(env, env.alice, thread, "test", hook="context"))
    report = message.attachments[0].content.decode()
    assert "log: 15184 true" in report and report.count("END") >= 1
    message = answer(env, await command(env, env.alice, thread, "test", hook="output"))
    assert "⚠ 1 error(s): TypeError" in message.content
    assert "Dusk settles" in message.attachments[0].content.decode()  # the newest narration


async def test_only_managers_change_scripts_in_a_server(env):
    thread = await env.start_thread()
    record = await command(env, env.bob, thread, "upload", hook="output", file=js("o.js", "text"))
    assert "Manage Server" in answer(env, record).content
    assert await scripts_here(env, thread) == []
    record = await command(env, env.bob, thread, "test", hook="output")
    assert "Manage Server" in env.fake.message(record.original_message_id).content


async def test_a_dm_player_manages_their_own_scripts(env):
    dm = env.fake.dm_channel(env.bob)
    await env.fake.slash(env.bob, dm, "start")
    await env.done()
    record = await command(env, env.bob, dm, "upload", hook="output", file=js("o.js", "text"))
    assert "was added as a new script" in answer(env, record).content
    assert len(await scripts_here(env, dm)) == 1


@pytest.mark.parametrize(
    ("file", "words"),
    [
        (StandinFile("bin.js", b"\x89PNG\x00\x00\xff\xfe"), "not UTF-8 text"),
        (StandinFile("nul.js", b"text\x00"), "binary file"),
        (StandinFile("empty.js", b"  \n"), "is empty"),
        (StandinFile("bad.js", b"const modifier = (text => {"), "does not parse"),
        (StandinFile("big.js", b"// " + b"x" * 2_500_001), "at most 2,500,000"),
    ],
)
async def test_a_bad_file_is_refused_with_a_reason(env, file, words):
    thread = await env.start_thread()
    record = await command(env, env.alice, thread, "upload", hook="input", file=file)
    assert words in env.fake.message(record.original_message_id).content
    assert await scripts_here(env, thread) == []


async def test_unknown_names_and_parts_are_explained(env):
    thread = await env.start_thread()
    record = await command(env, env.alice, thread, "enable", name="nothing")
    assert "no script called “nothing”" in answer(env, record).content
    await command(env, env.alice, thread, "upload", hook="output", file=js("o.js", "text"))
    record = await command(env, env.alice, thread, "remove", name="main", hook="input")
    assert "has no onInput code to remove" in answer(env, record).content
    record = await command(env, env.alice, thread, "test", hook="input")
    assert (
        "No enabled script of this adventure has onInput code"
        in env.fake.message(record.original_message_id).content
    )


async def test_insights_shows_a_broken_scripts_error_and_logs(env, fake_model):
    thread = await env.start_thread()
    await command(
        env,
        env.alice,
        thread,
        "upload",
        hook="input",
        name="Fragile",
        file=js("in.js", "log('checking', text.length); undefinedFunction(text)"),
    )
    fake_model.queue("The reeds sway.")
    await env.fake.slash(env.bob, thread, "do", action="wade in")
    await env.done()
    assert env.narration(thread)[-1].startswith("The reeds sway.")  # the turn went on
    record = await env.fake.slash(env.bob, thread, "insights")
    await env.done()
    (embed,) = env.fake.message(record.original_message_id).embeds
    (field,) = [f for f in embed["fields"] if f["name"] == "Script logs"]
    assert "onInput · Fragile" in field["value"]
    assert "error: onInput · Fragile: ReferenceError" in field["value"]
    assert "checking 17" in field["value"]  # the input "\n> bob wades in.\n"


async def test_a_turn_whose_scripts_find_no_worker_fails_with_retry(env, fake_model, monkeypatch):
    """Every worker taken past the wait's bound: the turn is refused politely, nothing stored,
    and Retry plays it once the pool has room (``engine.library.scripting.fair_share``)."""
    thread = await env.start_thread()
    await command(env, env.alice, thread, "upload", hook="output", file=js("o.js", "text"))
    pool = workers._workers
    monkeypatch.setattr(pool, "share", FairShare(pool.size, wait_seconds=0.2))
    async with pool.share.slot("another adventure"), pool.share.slot("a third"):
        before = await story_nodes(env)
        fake_model.queue("The gate stays shut.", "The gate opens.")
        record = await env.fake.slash(env.alice, thread, "do", action="open the gate")
        await env.done()
        failed = env.fake.message(record.original_message_id)
        assert "Scripts are busy on this bot right now" in failed.content
        assert "no worker came free within 0.2 s" in failed.content
        assert await story_nodes(env) == before  # nothing stored
        assert "nothing was saved" in env.narration(thread)[-1]
    retry = [b for b in failed.buttons if b[0] == "Retry"]
    assert retry, failed.buttons
    await env.fake.press(env.alice, failed.id, label="Retry")
    await env.done()
    assert env.narration(thread)[-1] == "The gate opens."
