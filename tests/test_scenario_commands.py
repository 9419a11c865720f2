"""/scenario and /adventure export|import through the Discord stand-in: the preview with Confirm
and Cancel, who may import, the library commands, and /start's option menu and placeholder form."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import func, select

from bot.standin import StandinFile
from bot.standin.records import InteractionRecord, RoleRecord, iter_components
from engine.storage.models import Adventure, Scenario, StoryNode
from tests.discord_env import DiscordEnv

DATA = Path(__file__).parent / "data"


def attachment(name: str) -> StandinFile:
    return StandinFile(name, (DATA / name).read_bytes(), "application/json")


def answer(env: DiscordEnv, record: InteractionRecord):
    """The (ephemeral) message that answered an interaction: its follow-up, else its response."""
    assert record.failed is None
    message_id = record.followups[-1] if record.followups else record.original_message_id
    message = env.fake.message(message_id)
    assert message.ephemeral and message.visible_to == record.user_id
    return message


async def imported_titles(env: DiscordEnv) -> list[str]:
    async with env.bot.services.db.session() as session:
        rows = await session.scalars(
            select(Scenario.title).where(Scenario.builtin_key.is_(None)).order_by(Scenario.id)
        )
        return list(rows)


async def preview(env: DiscordEnv, user: int, channel: int, name: str):
    record = await env.fake.slash(user, channel, "scenario import", file=attachment(name))
    await env.done()
    return record, answer(env, record)


async def test_import_shows_a_preview_and_confirm_saves(env):
    record, message = await preview(env, env.alice, env.channel, "aid-new-scenario.json")
    embed = message.embeds[0]
    assert embed["title"] == "The Clockwork City"
    fields = {f["name"]: f["value"] for f in embed["fields"]}
    assert fields["Format"] == "AI Dungeon scenario"
    assert fields["Story cards"] == "3" and fields["Scripts"] == "1"
    assert fields["Options (2)"] == "Tinkerer, Guard"
    assert "script" in fields["Warnings"]
    assert [b[0] for b in message.buttons] == ["Confirm", "Cancel"]
    assert await imported_titles(env) == []  # nothing written before Confirm

    pressed = await env.fake.press(env.alice, message.id, label="Confirm")
    await env.done()
    assert pressed.failed is None
    done = env.fake.message(message.id)
    assert done.content.startswith("✅ Imported **The Clockwork City** into this server's library")
    assert done.components == [] and done.embeds == []
    assert await imported_titles(env) == ["The Clockwork City", "Tinkerer", "Guard"]


async def test_cancel_writes_nothing(env):
    _record, message = await preview(env, env.alice, env.channel, "sillytavern-world.json")
    assert {f["name"]: f["value"] for f in message.embeds[0]["fields"]}["Format"] == (
        "SillyTavern world info"
    )
    await env.fake.press(env.alice, message.id, label="Cancel")
    await env.done()
    assert env.fake.message(message.id).content == "Import cancelled; nothing was saved."
    assert await imported_titles(env) == []


async def test_a_member_without_the_right_is_refused_before_the_download(env):
    record = await env.fake.slash(
        env.bob, env.channel, "scenario import", file=attachment("aid-world-info.json")
    )
    await env.done()
    message = answer(env, record)
    assert message.content.startswith("⚠ Only members with the Manage Server permission")
    # A manager names a role; a member with it may import.
    guild = env.fake.world.guilds[env.guild]
    role_id = env.fake.world.snowflake()
    role = RoleRecord(role_id, "Storytellers", guild.roles[env.guild].permissions)
    guild.roles[role_id] = role
    guild.members[env.bob].append(role_id)
    # As Discord tells the bot about a new role.
    await env.fake.gateway.dispatch(
        "GUILD_ROLE_CREATE", {"guild_id": str(env.guild), "role": role.payload()}
    )
    record = await env.fake.slash(env.alice, env.channel, "server importers", role=role_id)
    await env.done()
    assert "may now import scenarios" in answer(env, record).content
    _record, message = await preview(env, env.bob, env.channel, "aid-world-info.json")
    await env.fake.press(env.bob, message.id, label="Confirm")
    await env.done()
    assert await imported_titles(env) == ["aid-world-info"]


async def test_a_bad_file_is_answered_with_its_problem(env):
    bad = StandinFile("broken.json", b'{"title": "x", "title": "y"}')
    record = await env.fake.slash(env.alice, env.channel, "scenario import", file=bad)
    await env.done()
    assert "“title” appears twice" in answer(env, record).content
    assert await imported_titles(env) == []


async def test_a_number_too_long_to_read_is_answered_as_a_bad_file(env):
    """A 5,000-digit integer stops Python's JSON reader; the player is told what is wrong with
    the file (its line), in /scenario import and in /adventure import alike."""
    data = b'{"title": "x",\n "prompt": "p",\n "n": ' + b"9" * 5000 + b"}"
    for command in ("scenario import", "adventure import"):
        record = await env.fake.slash(
            env.alice, env.channel, command, file=StandinFile("huge.json", data)
        )
        await env.done()
        assert record.failed is None
        reply = env.fake.message(
            record.followups[-1] if record.followups else record.original_message_id
        )
        assert reply.content.startswith("⚠ The file has a number too long to read (line 3)"), (
            command
        )
    assert await imported_titles(env) == []


async def test_in_a_dm_anyone_imports_into_their_own_library(env):
    dm = env.fake.dm_channel(env.bob)
    _record, message = await preview(env, env.bob, dm, "novelai-lorebook.json")
    await env.fake.press(env.bob, message.id, label="Confirm")
    await env.done()
    assert "into your library" in env.fake.message(message.id).content
    record = await env.fake.slash(env.bob, env.channel, "scenario list")
    await env.done()
    listing = answer(env, record).embeds[0]["description"]
    assert "**Yours**\n• novelai-lorebook · 2 cards" in listing
    # Alice does not see Bob's own scenario.
    record = await env.fake.slash(env.alice, env.channel, "scenario list")
    await env.done()
    assert "novelai-lorebook" not in answer(env, record).embeds[0]["description"]


async def test_show_export_and_delete(env):
    _record, message = await preview(env, env.alice, env.channel, "aid-story-cards.json")
    await env.fake.press(env.alice, message.id, label="Confirm")
    await env.done()
    record = await env.fake.slash(env.alice, env.channel, "scenario show", scenario="aid-story")
    await env.done()
    embed = answer(env, record).embeds[0]
    assert embed["title"] == "aid-story-cards"
    record = await env.fake.slash(env.alice, env.channel, "scenario export", scenario="aid-story")
    await env.done()
    files = answer(env, record).attachments
    assert [f.filename for f in files] == [
        "aid-story-cards.campfire.json",
        "aid-story-cards.story-cards.json",
    ]
    record = await env.fake.slash(env.bob, env.channel, "scenario delete", scenario="aid-story")
    await env.done()
    assert answer(env, record).content.startswith("⚠ Only members with the Manage Server")
    record = await env.fake.slash(env.alice, env.channel, "scenario delete", scenario="aid-story")
    await env.done()
    assert answer(env, record).content.startswith("Deleted **aid-story-cards**")
    assert await imported_titles(env) == []


async def test_start_offers_the_options_then_asks_the_placeholders(env, fake_model):
    _record, message = await preview(env, env.alice, env.channel, "aid-new-scenario.json")
    await env.fake.press(env.alice, message.id, label="Confirm")
    await env.done()

    record = await env.fake.slash(env.alice, env.channel, "start", scenario="Clockwork")
    await env.done()
    menu_message = answer(env, record)
    assert "Choose your path" in menu_message.content
    assert [b[0] for b in menu_message.buttons] == ["Tinkerer", "Guard"]

    chosen = await env.fake.press(env.alice, menu_message.id, label="Tinkerer")
    await env.done()
    assert chosen.modal is not None
    labels = [c["label"] for c in iter_components(chosen.modal["components"]) if c.get("type") == 4]
    assert labels == ["Your character's name", "Who is your oldest friend?"]
    inputs = [
        c["custom_id"] for c in iter_components(chosen.modal["components"]) if c.get("type") == 4
    ]
    submitted = await env.fake.submit_modal(env.alice, chosen, {inputs[0]: "Ada", inputs[1]: "Bo"})
    await env.done()
    assert submitted.failed is None
    thread = env.fake.threads(env.channel)[-1]
    opening = env.narration(thread)[-1]
    assert opening.startswith("You are Ada, a tinkerer.") and "Your friend Bo knocks." in opening


async def test_adventure_export_and_import(env, fake_model):
    record = await env.fake.slash(env.alice, env.channel, "start")
    await env.done()
    thread = env.fake.threads(env.channel)[-1]
    fake_model.queue("The lantern hums.")
    await env.fake.slash(env.alice, thread, "do", action="listen")
    await env.done()

    record = await env.fake.slash(env.bob, thread, "adventure export")
    await env.done()
    exported = answer(env, record).attachments[0]
    assert exported.filename == "the-lantern-road.adventure.json"
    raw = json.loads(exported.content)
    assert [n["text"] for n in raw["nodes"]][-1] == "The lantern hums."

    dm = env.fake.dm_channel(env.bob)
    record = await env.fake.slash(
        env.bob, dm, "adventure import", file=StandinFile(exported.filename, exported.content)
    )
    await env.done()
    assert record.failed is None
    assert "is restored" in env.fake.message(record.original_message_id).content
    assert env.narration(dm)[-1] == "The lantern hums."
    async with env.bot.services.db.session() as session:
        adventure = await session.scalar(select(Adventure).where(Adventure.channel_id == dm))
        count = await session.scalar(
            select(func.count())
            .select_from(StoryNode)
            .where(StoryNode.adventure_id == adventure.id)
        )
    assert count == len(raw["nodes"]) and adventure.owner_id == env.bob

    bad = StandinFile("x.json", exported.content[:100])
    record = await env.fake.slash(env.bob, env.channel, "adventure import", file=bad)
    await env.done()
    assert (
        "cut short"
        in env.fake.message(
            record.followups[-1] if record.followups else record.original_message_id
        ).content
    )
    assert len(env.fake.threads(env.channel)) == 1  # the failed import left no thread behind
