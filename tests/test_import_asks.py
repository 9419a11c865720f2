"""/adventure import where an adventure runs asks first, as /start does: the importer alone
sees the question; Keep playing changes nothing; Import it ends the running adventure and
restores the file's; a press after what runs there changed imports nothing."""

from __future__ import annotations

from bot.standin import StandinFile
from cogs.ui.ask_first import NOTHING_CHANGED
from tests.discord_env import DiscordEnv
from tests.test_adventure_rights import adventures, answer, export_file, running_in


async def _asked(env: DiscordEnv, user: int, place: int, file: StandinFile):
    record = await env.fake.slash(user, place, "adventure import", file=file)
    await env.done()
    return answer(env, record)


async def test_an_import_where_an_adventure_runs_asks_first(env: DiscordEnv):
    thread = await env.start_thread(env.alice)
    file = await export_file(env, env.alice, thread)
    running = await running_in(env, thread)
    narration = len(env.narration(thread))

    question = await _asked(env, env.alice, thread, file)
    assert question.visible_to == env.alice
    assert question.content == (
        "⚠ **The Lantern Road** is running here. Importing **The Lantern Road** ends it; "
        "`/adventure export` keeps a copy of it first. Import anyway?"
    )
    assert [label for label, _, _ in question.buttons] == ["Import it", "Keep playing"]
    assert await running_in(env, thread) == running  # asking wrote nothing
    assert len(await adventures(env)) == 1

    kept = await env.fake.press(env.alice, question.id, label="Keep playing")
    await env.done()
    assert kept.failed is None
    assert env.fake.message(question.id).content == NOTHING_CHANGED
    assert await running_in(env, thread) == running
    assert [a.ended_at for a in await adventures(env)] == [None]
    assert len(env.narration(thread)) == narration

    record = await env.import_anew(env.alice, thread, file)
    assert "is restored" in answer(env, record).content
    now = await running_in(env, thread)
    assert now not in (running, None)
    old, new = await adventures(env)
    assert (old.id, new.id) == (running, now) and old.ended_at is not None
    said = env.narration(thread)[narration:]
    assert (
        said[0]
        == "📥 alice imported 🏮 **The Lantern Road**; **The Lantern Road** ended. It goes on:"
    )


async def test_an_import_in_a_dm_asks_too_and_a_stale_question_imports_nothing(env: DiscordEnv):
    dm = env.fake.dm_channel(env.bob)
    thread = await env.start_thread(env.bob)
    file = await export_file(env, env.bob, thread)
    first = await env.fake.slash(env.bob, dm, "adventure import", file=file)
    await env.done()
    assert "is restored" in answer(env, first).content  # nothing ran there: not asked
    imported = await running_in(env, dm)

    question = await _asked(env, env.bob, dm, file)
    assert "Import anyway?" in question.content and question.visible_to == env.bob
    # Another adventure takes the DM's place before the question is answered.
    await env.start_anew(env.bob, dm)
    started = await running_in(env, dm)
    assert started not in (imported, None)

    stale = await env.fake.press(env.bob, question.id, label="Import it")
    await env.done()
    assert "What runs here changed since you were asked" in answer(env, stale).content
    assert await running_in(env, dm) == started
