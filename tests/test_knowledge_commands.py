"""/knowledge through Discord: import with a preview and Confirm (who may, refused before the
download), list, show (never a narrator-only file's text), options and remove, and a turn
whose Insights names the passages that came in and their source. Real discord.py over the
local stand-in, the fake model server behind the bot, on both databases."""

from __future__ import annotations

from pathlib import Path

import pytest
from discord import app_commands

from bot.standin import StandinFile
from tests.discord_env import DiscordEnv, answered
from tests.test_host_commands import act, refused

DATA = Path(__file__).parent / "data"
SECRET = b"The harbourmaster Mira Quell is secretly the smuggler queen of the fen."


def setting_file(name: str = "brindlemoor.md", content: bytes | None = None) -> StandinFile:
    data = content if content is not None else (DATA / "brindlemoor.md").read_bytes()
    return StandinFile(name, data, "text/markdown")


async def import_file(env: DiscordEnv, user: int, channel: int, file: StandinFile, **options):
    """``/knowledge import``, its preview answered with Confirm: the preview's text and the
    message Confirm left."""
    record = await env.fake.slash(user, channel, "knowledge import", file=file, **options)
    await env.done()
    preview = await answered(env, record)
    assert preview.visible_to == user and [b[0] for b in preview.buttons] == ["Confirm", "Cancel"]
    embed = preview.embeds[0]
    fields = {f["name"]: f["value"] for f in embed["fields"]}
    await env.fake.press(user, preview.id, label="Confirm")
    await env.done()
    return embed, fields, env.fake.message(preview.id).content


async def private_text(env: DiscordEnv, user: int, channel: int, command: str, **options) -> str:
    record = await env.fake.slash(user, channel, command, **options)
    await env.done()
    message = await answered(env, record)
    assert message.visible_to == user
    if message.embeds:
        embed = message.embeds[0]
        fields = "\n".join(f"{f['name']}: {f['value']}" for f in embed.get("fields", []))
        return f"{embed.get('title', '')}\n{embed.get('description', '')}\n{fields}"
    return message.content


async def test_a_canon_file_comes_in_with_a_preview_and_a_turn_shows_it_in_insights(
    env: DiscordEnv, fake_model
):
    embed, fields, done = await import_file(
        env, env.alice, env.channel, setting_file(), **{"class": "canon"}
    )
    assert embed["title"] == "📚 brindlemoor.md"
    assert "**Canon**" in embed["description"] and "this server's library" in embed["description"]
    assert fields["Passages"] == "4"
    assert "Brindlemoor › The Harbour" in fields["Headings"]
    assert done.startswith("✅ Imported **brindlemoor.md** as Canon")
    listed = await private_text(env, env.bob, env.channel, "knowledge list")
    assert "**brindlemoor.md** · Canon · 4 passages · server" in listed

    thread = await env.start_thread(host=env.bob)
    fake_model.queue("Mira squints at you over her ledger.")
    await act(env, thread, env.bob, "ask Mira Quell about the harbour ledger")
    prompt = fake_model.requests[-1]["messages"][-1]["content"]
    assert "| The harbour of Brindlemoor is a ring of reed boats" in prompt
    insights = await private_text(env, env.bob, thread, "insights")
    assert "Canon · brindlemoor.md › Brindlemoor › The Harbour" in insights


async def test_who_may_import_remove_and_see_what(env: DiscordEnv):
    # bob manages nothing: refused, before the file is even downloaded.
    record = await env.fake.slash(
        env.bob, env.channel, "knowledge import", file=setting_file(), **{"class": "canon"}
    )
    text = await refused(env, record)
    assert text.startswith("⚠ Only members with the Manage Server permission")
    assert "manage the knowledge library" in text

    await import_file(
        env,
        env.alice,
        env.channel,
        setting_file("secrets.md", SECRET),
        **{"class": "canon"},
        narrator_only=True,
    )
    shown = await private_text(env, env.bob, env.channel, "knowledge show", source="secrets.md")
    assert "Narrator only" in shown and "smuggler" not in shown
    # The same file again is refused; a plain text file as Inspiration comes in.
    record = await env.fake.slash(
        env.alice,
        env.channel,
        "knowledge import",
        file=setting_file("again.md", SECRET),
        **{"class": "reference"},
    )
    assert "imported already, as **secrets.md**" in await refused(env, record)
    await import_file(
        env,
        env.alice,
        env.channel,
        setting_file("mood.txt", b"Everything in the fen smells of peat and old rain."),
        **{"class": "inspiration"},
    )
    shown = await private_text(env, env.bob, env.channel, "knowledge show", source="mood.txt")
    assert "smells of peat" in shown and "Inspiration" in shown

    text = await refused(
        env, await env.fake.slash(env.bob, env.channel, "knowledge remove", source="mood.txt")
    )
    assert "manage the knowledge library" in text
    choices = await env.fake.autocomplete(
        env.alice, env.channel, "knowledge options", focused="source", value="mood"
    )
    assert [c["name"] for c in choices] == ["mood.txt"]
    said = await private_text(
        env,
        env.alice,
        env.channel,
        "knowledge options",
        source=choices[0]["value"],
        **{"class": "canon"},
        always=True,
    )
    assert said == "**mood.txt** is now Canon, always included."
    said = await private_text(env, env.alice, env.channel, "knowledge remove", source="mood.txt")
    assert said.startswith("Removed **mood.txt**")
    listed = await private_text(env, env.bob, env.channel, "knowledge list")
    assert "mood.txt" not in listed and "secrets.md" in listed


async def test_in_a_dm_the_player_imports_into_their_own_library(env: DiscordEnv):
    dm = env.fake.dm_channel(env.bob)
    _embed, _fields, done = await import_file(
        env, env.bob, dm, setting_file(), **{"class": "reference"}
    )
    assert "into your library" in done
    assert "· yours" in await private_text(env, env.bob, dm, "knowledge list")
    # Not the server's: its channel lists nothing.
    assert "brindlemoor" not in await private_text(env, env.alice, env.channel, "knowledge list")


async def test_the_class_is_chosen_from_canon_reference_and_inspiration(env: DiscordEnv):
    # Discord's own picker lists the classes and sends no /knowledge import without one (the
    # option is required, with choices), so there is no refusal left to word for it.
    group = env.bot.tree.get_command("knowledge")
    assert isinstance(group, app_commands.Group)
    command = group.get_command("import")
    assert isinstance(command, app_commands.Command)
    kind = next(p for p in command.parameters if p.display_name == "class")
    assert kind.required
    assert [c.name.split(":")[0] for c in kind.choices] == ["Canon", "Reference", "Inspiration"]
    with pytest.raises(ValueError, match=r"required options missing: \['class'\]"):
        await env.fake.slash(env.alice, env.channel, "knowledge import", file=setting_file())
