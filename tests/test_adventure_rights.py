"""Rights over whole adventures, through the Discord stand-in: who may start or import where an
adventure runs, scripts brought in with an import or a player's own scenario, scripts' code in
an export, and buttons whose ``custom_id`` names another adventure or a request that may not be
played again (a modified client sends whatever ``custom_id`` it likes)."""

from __future__ import annotations

import asyncio
import json

from sqlalchemy import func, select

from bot.standin import StandinFile
from bot.standin.records import InteractionRecord, MessageRecord, iter_components
from engine.storage.coordination_models import RequestRecord
from engine.storage.models import Adventure, AdventureScript, ScenarioScript, StoryNode
from tests.discord_env import DiscordEnv
from tests.fakes.openai_server import Reply
from tests.test_scenario_commands import attachment

SECRET_CODE = "const hidden = 'the-secret-code'; text"


def answer(env: DiscordEnv, record: InteractionRecord) -> MessageRecord:
    """What answered the interaction: its follow-up, else its response."""
    assert record.failed is None
    return env.fake.message(
        record.followups[-1] if record.followups else record.original_message_id
    )


async def adventures(env: DiscordEnv) -> list[Adventure]:
    async with env.bot.services.db.session() as session:
        return list(await session.scalars(select(Adventure).order_by(Adventure.id)))


async def running_in(env: DiscordEnv, channel_id: int) -> int | None:
    ref = await env.bot.services.play.adventure_in(channel_id)
    return ref.adventure_id if ref else None


async def export_file(env: DiscordEnv, user: int, channel_id: int) -> StandinFile:
    record = await env.fake.slash(user, channel_id, "adventure export")
    await env.done()
    exported = answer(env, record).attachments[0]
    return StandinFile(exported.filename, exported.content, "application/json")


def forge(message: MessageRecord, custom_id: str) -> str:
    """Give the message's first button another ``custom_id``, as a modified client would send."""
    button = next(c for c in iter_components(message.components) if c.get("type") == 2)
    button["custom_id"] = custom_id
    return custom_id


async def press_forged(env: DiscordEnv, user: int, message: MessageRecord, custom_id: str):
    record = await env.fake.press(user, message.id, custom_id=forge(message, custom_id))
    await env.done()
    return record


async def request_rows(env: DiscordEnv) -> dict[int, str]:
    async with env.bot.services.db.session() as session:
        rows = await session.execute(select(RequestRecord.interaction_id, RequestRecord.status))
        return dict(rows.all())


# --- starting and importing where an adventure runs --------------------------------------------


async def test_a_plain_member_cannot_start_over_the_hosts_adventure_the_host_and_managers_can(
    env,
):
    carol = env.fake.add_user("carol", member_of=[env.guild])
    thread = await env.start_thread(env.bob)
    hosted = await running_in(env, thread)

    refused = await env.fake.slash(carol, thread, "start")
    await env.done()
    assert refused.ephemeral
    assert answer(env, refused).content == (
        "⚠ “The Lantern Road” is running here. Only bob (its host) and members who can manage "
        "the server or its messages can start or import another adventure in its place; "
        "nothing was changed. Use /start in a text channel to open a thread of your own."
    )
    assert await running_in(env, thread) == hosted
    assert [(a.id, a.ended_at) for a in await adventures(env)] == [(hosted, None)]
    assert len(env.narration(thread)) == 1  # the opening only

    for who in (env.bob, env.alice):  # the host, then a member who manages the server
        before = await running_in(env, thread)
        record = await env.start_anew(who, thread)  # asked first: it ends the running one
        assert "begins" in answer(env, record).content
        assert await running_in(env, thread) not in (before, None)
    assert len(await adventures(env)) == 3


async def test_a_plain_member_cannot_import_over_the_hosts_adventure(env):
    carol = env.fake.add_user("carol", member_of=[env.guild])
    thread = await env.start_thread(env.bob)
    hosted = await running_in(env, thread)
    file = await export_file(env, env.bob, thread)

    refused = await env.fake.slash(carol, thread, "adventure import", file=file)
    await env.done()
    assert "is running here. Only bob (its host)" in answer(env, refused).content
    assert await running_in(env, thread) == hosted
    assert [a.ended_at for a in await adventures(env)] == [None]

    restored = await env.import_anew(env.bob, thread, file)  # asked first: it ends bob's own
    assert "is restored" in answer(env, restored).content
    assert await running_in(env, thread) not in (hosted, None)


# --- scripts come in with the script right ------------------------------------------------------


async def test_an_imported_adventures_scripts_need_the_script_right(env):
    thread = await env.start_thread(env.alice)
    raw = json.loads((await export_file(env, env.alice, thread)).content)
    raw["scripts"] = [{"name": "Dice", "on_input": SECRET_CODE}]
    file = StandinFile("dice.adventure.json", json.dumps(raw).encode(), "application/json")
    threads = env.fake.threads(env.channel)

    refused = await env.fake.slash(env.bob, env.channel, "adventure import", file=file)
    await env.done()
    assert answer(env, refused).content == (
        "⚠ This adventure carries script (“Dice”): code that runs every turn. In a server only "
        "members with the Manage Server permission can bring scripts in. Ask one of them to "
        "import it, or import it in a DM with me; nothing was imported."
    )
    assert env.fake.threads(env.channel) == threads  # no thread was opened for it
    assert len(await adventures(env)) == 1

    # In their own DM a player brings in what they like; in a server, a manager.
    dm = env.fake.dm_channel(env.bob)
    record = await env.fake.slash(env.bob, dm, "adventure import", file=file)
    await env.done()
    assert "is restored" in answer(env, record).content
    record = await env.import_anew(env.alice, thread, file)  # asked first: it ends hers
    assert "is restored" in answer(env, record).content
    async with env.bot.services.db.session() as session:
        scripts = list(await session.scalars(select(AdventureScript.on_input)))
    assert scripts == [SECRET_CODE, SECRET_CODE]


async def test_a_players_own_scenario_brings_its_scripts_only_where_they_may_script(env):
    dm = env.fake.dm_channel(env.bob)
    preview = await env.fake.slash(
        env.bob, dm, "scenario import", file=attachment("aid-old-scenario.json")
    )
    await env.done()
    await env.fake.press(env.bob, answer(env, preview).id, label="Confirm")
    await env.done()

    refused = await env.fake.slash(env.bob, env.channel, "start", scenario="Lost in the Mines")
    await env.done()
    assert refused.ephemeral
    content = answer(env, refused).content
    assert content.startswith("⚠ “Lost in the Mines” is your own scenario and carries script")
    assert "Start it in a DM with me" in content
    assert env.fake.threads(env.channel) == []
    assert await adventures(env) == []

    started = await env.fake.slash(env.bob, dm, "start", scenario="Lost in the Mines")
    await env.done()
    assert "begins" in answer(env, started).content
    async with env.bot.services.db.session() as session:
        assert await session.scalar(select(func.count()).select_from(AdventureScript)) == 1


# --- code only for who may manage scripts -------------------------------------------------------


async def test_an_export_by_a_plain_member_carries_no_code(env):
    thread = await env.start_thread(env.alice)
    upload = await env.fake.slash(
        env.alice,
        thread,
        "script upload",
        hook="input",
        file=StandinFile("dice.js", SECRET_CODE.encode(), "text/javascript"),
        name="Dice",
    )
    await env.done()
    assert upload.failed is None

    record = await env.fake.slash(env.bob, thread, "adventure export")
    await env.done()
    message = answer(env, record)
    assert message.ephemeral
    assert "Its scripts (**Dice**) are left out" in message.content
    (file,) = message.attachments
    assert b"the-secret-code" not in file.content
    assert json.loads(file.content)["scripts"] == []

    record = await env.fake.slash(env.alice, thread, "adventure export")
    await env.done()
    message = answer(env, record)
    assert "left out" not in message.content
    scripts = json.loads(message.attachments[0].content)["scripts"]
    assert [(s["name"], s["on_input"]) for s in scripts] == [("Dice", SECRET_CODE)]


async def test_a_server_scenarios_code_goes_only_to_who_may_import_there(env):
    preview = await env.fake.slash(
        env.alice, env.channel, "scenario import", file=attachment("aid-old-scenario.json")
    )
    await env.done()
    await env.fake.press(env.alice, answer(env, preview).id, label="Confirm")
    await env.done()
    async with env.bot.services.db.session() as session:
        (name,) = await session.scalars(select(ScenarioScript.name))

    def exported(record) -> tuple[str, list]:
        message = answer(env, record)
        assert message.ephemeral
        bundle = next(f for f in message.attachments if f.filename.endswith(".campfire.json"))
        return message.content, json.loads(bundle.content)["scripts"]

    record = await env.fake.slash(env.bob, env.channel, "scenario export", scenario="Lost")
    await env.done()
    content, scripts = exported(record)
    assert scripts == [] and f"Its scripts (**{name}**) are left out" in content
    record = await env.fake.slash(env.alice, env.channel, "scenario export", scenario="Lost")
    await env.done()
    content, scripts = exported(record)
    assert [s["name"] for s in scripts] == [name] and "left out" not in content


# --- buttons act on their own adventure only ----------------------------------------------------


async def test_a_forged_retry_from_another_server_replays_nothing(env, fake_model):
    thread = await env.start_thread(env.alice)
    fake_model.queue(Reply(fault="500"))
    failed = await env.fake.slash(env.alice, thread, "do", action="open the vault")
    await env.done()
    assert [b[1] for b in answer(env, failed).buttons] == [f"cf:retry:{failed.id}"]

    elsewhere = env.fake.add_guild("Elsewhere")
    channel = env.fake.add_channel(elsewhere, "tales")
    mallory = env.fake.add_user("mallory", member_of=[elsewhere])
    await env.done()
    record = await env.fake.slash(mallory, channel, "start")
    await env.done()
    assert record.failed is None
    (their_thread,) = env.fake.threads(channel)
    calls, before = len(fake_model.requests), await request_rows(env)

    opening = env.fake.last_message(their_thread)
    press = await press_forged(env, mallory, opening, f"cf:retry:{failed.id}")
    assert press.ephemeral
    assert answer(env, press).content == (
        "⚠ That Retry button belongs to another adventure than the one running here; "
        "nothing was played."
    )
    assert answer(env, press).buttons == []  # no Retry under the refusal
    assert len(fake_model.requests) == calls
    assert env.narration(their_thread) == [opening.content]
    assert await request_rows(env) == before == {failed.id: "failed"}


async def test_a_retry_of_an_action_played_already_is_refused(env, fake_model):
    thread = await env.start_thread(env.alice)
    fake_model.queue("The vault swings open.")
    played = await env.fake.slash(env.alice, thread, "do", action="open the vault")
    await env.done()
    calls, narration = len(fake_model.requests), env.narration(thread)

    newest = env.fake.last_message(thread)
    press = await press_forged(env, env.alice, newest, f"cf:retry:{played.id}")
    assert press.ephemeral
    assert answer(env, press).content == (
        "⚠ That action was played already; nothing was played again."
    )
    assert len(fake_model.requests) == calls
    assert env.narration(thread) == narration
    assert await request_rows(env) == {played.id: "done"}


async def test_a_retry_button_plays_its_action_once(env, fake_model):
    thread = await env.start_thread(env.alice)
    fake_model.queue(Reply(fault="500"), Reply(text="The vault swings open.", delay=0.05), "Twice?")
    failed = await env.fake.slash(env.alice, thread, "do", action="open the vault")
    await env.done()
    message = answer(env, failed)

    # A double click: both presses arrive before the first has played.
    first, second = await asyncio.gather(
        env.fake.press(env.alice, message.id, label="Retry"),
        env.fake.press(env.alice, message.id, label="Retry"),
    )
    await env.done()
    answers = sorted(answer(env, press).content for press in (first, second))
    assert answers == [
        "> alice opens the vault.",
        "⚠ That action was played again already; nothing more was played.",
    ]
    assert env.narration(thread)[-1] == "The vault swings open."
    assert len(fake_model.requests) == 2  # the failed turn and one retry
    statuses = await request_rows(env)
    assert statuses[failed.id] == "retried"
    assert sorted(statuses.values()) == ["done", "retried"]  # the refused press left no row


async def test_story_buttons_naming_another_adventure_change_nothing(env, fake_model):
    theirs = await running_in(env, await env.start_thread(env.alice))
    thread = await env.start_thread(env.bob)
    fake_model.queue("The lantern gutters.")
    await env.fake.slash(env.bob, thread, "do", action="wait")
    await env.done()
    ours = await env.bot.services.play.adventure_in(thread)
    calls, narration = len(fake_model.requests), env.narration(thread)
    refusal = (
        "⚠ That button belongs to another adventure than the one running here; nothing was changed."
    )

    # The ids of another adventure, at this one's version: a press that once acted here.
    newest = env.fake.last_message(thread)
    for kind in ("continue", "undo", "retake"):
        press = await press_forged(env, env.bob, newest, f"cf:{kind}:{theirs}:{ours.version}")
        # For the presser alone, whether the process could tell at once (its place hint) or
        # the database refused it after the press was acknowledged.
        assert answer(env, press).visible_to == env.bob, kind
        assert answer(env, press).content == refusal, kind
    assert len(fake_model.requests) == calls
    assert env.narration(thread) == narration
    assert await env.bot.services.play.adventure_in(thread) == ours


async def test_buttons_naming_numbers_beyond_any_row_are_refused_not_crashed(env, fake_model):
    """A ``custom_id`` may carry up to 100 characters of digits: numbers no id column can hold
    (PostgreSQL refuses them, SQLite overflows) are refused as stale buttons, like any other."""
    thread = await env.start_thread(env.bob)
    fake_model.queue("The lantern gutters.")
    await env.fake.slash(env.bob, thread, "do", action="wait")
    await env.done()
    ours = await env.bot.services.play.adventure_in(thread)
    calls, narration = len(fake_model.requests), env.narration(thread)
    huge = "9" * 40
    newest = env.fake.last_message(thread)
    for custom_id in (
        f"cf:continue:{huge}:{ours.version}",
        f"cf:undo:{ours.adventure_id}:{huge}",
        f"cf:retry:{huge}",
        f"cf:insights:{huge}",
        f"cf:take:{ours.adventure_id}:{ours.version}:{huge}:{huge}:n",
    ):
        press = await press_forged(env, env.bob, newest, custom_id)
        assert answer(env, press).visible_to == env.bob, custom_id
        assert answer(env, press).content.startswith("⚠"), custom_id
    assert len(fake_model.requests) == calls
    assert env.narration(thread) == narration
    assert await env.bot.services.play.adventure_in(thread) == ours


async def test_a_retry_of_another_players_failed_action_plays_it_as_theirs(env, fake_model):
    """Carol's action failed: a player who may not rewrite her turns cannot play it again;
    the host can, and it is still Carol's (her character's name, her turn)."""
    thread = await env.start_thread(env.bob)
    carol = env.fake.add_user("carol", member_of=[env.guild])
    dave = env.fake.add_user("dave", member_of=[env.guild])
    await env.fake.flush()
    await env.fake.slash(carol, thread, "character set", name="Ann")
    await env.done()
    fake_model.queue(Reply(fault="500"), "The gate creaks.")
    failed = await env.fake.slash(carol, thread, "do", action="push the gate")
    await env.done()
    message = answer(env, failed)

    refused = await env.fake.press(dave, message.id, label="Retry")
    await env.done()
    assert answer(env, refused).visible_to == dave
    assert "Only the player who wrote that turn" in answer(env, refused).content

    played = await env.fake.press(env.bob, message.id, label="Retry")
    await env.done()
    assert answer(env, played).content == "> Ann pushes the gate."
    assert env.narration(thread)[-1] == "The gate creaks."
    async with env.bot.services.db.session() as session:
        adventure = (
            await session.scalars(select(Adventure).where(Adventure.channel_id == thread))
        ).one()
        head = await session.get(StoryNode, adventure.head_node_id)
        action = await session.get(StoryNode, head.parent_id)
    assert action.author_id == carol
