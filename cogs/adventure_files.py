"""/adventure export and /adventure import: a whole adventure as one file, and back; or the
story as it stands as a file to read (``format``: text, Markdown, a web page).

The ``/adventure`` group belongs to the steering cog (``/adventure settings``); this cog adds its
two commands to that group when it loads and takes them out when it unloads
(``cogs.ui.adventure_group``).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Literal

import discord
from discord import app_commands

from cogs.ui import bot_of
from cogs.ui.adventure_group import AdventureCommands
from cogs.ui.ask_first import AskFirst
from cogs.ui.content import fit_text
from cogs.ui.interaction import actor_of, channel_id_of, place_of
from cogs.ui.replies import reply
from cogs.ui.threads import give_up_thread, open_adventure_thread

if TYPE_CHECKING:
    from cogs.ui import CampfireBot
    from engine.library.archive import RunningHere
    from engine.library.formats.adventure import ParsedAdventure
    from engine.play.imports import ImportCheck


def scripts_left_out_note(names: tuple[str, ...]) -> str:
    """The line under an export that carries no scripts: the exporter may not read their code."""
    shown = ", ".join(f"**{discord.utils.escape_markdown(name)}**" for name in names[:10])
    if len(names) > 10:
        shown += f" and {len(names) - 10} more"
    return (
        f"\nIts scripts ({shown}) are left out: their code goes only to those who may change them."
    )


#: What each prose format is called in the answer.
_PROSE_SAID = {"text": "plain text", "markdown": "Markdown", "html": "a web page"}


@app_commands.command(name="export")
@app_commands.describe(
    format="json (the default): the whole tree, for /adventure import; text, markdown, html: "
    "to read"
)
async def export_adventure(
    interaction: discord.Interaction,
    format: Literal["json", "text", "markdown", "html"] = "json",
) -> None:
    """The adventure here as a file: the whole story tree, or the story to read (to you alone)."""
    await interaction.response.defer(ephemeral=True, thinking=True)
    exported = await bot_of(interaction).services.archive.export(
        actor_of(interaction), channel_id_of(interaction), format
    )
    title = discord.utils.escape_markdown(exported.title)
    if format == "json":
        content = f"**{title}**: the whole story tree. `/adventure import` restores it anywhere."
    else:
        content = (
            f"**{title}** as {_PROSE_SAID[format]}: the story from its opening to where it "
            "stands, each turn as it is now (undone turns, other takes and branches are not in "
            "it)."
        )
    if exported.scripts_left_out:
        content += scripts_left_out_note(exported.scripts_left_out)
    await interaction.followup.send(
        fit_text(content),
        file=discord.File(io.BytesIO(exported.content), filename=exported.filename),
        ephemeral=True,
    )


@app_commands.command(name="import")
@app_commands.describe(file="A file made by /adventure export")
async def import_adventure(interaction: discord.Interaction, file: discord.Attachment) -> None:
    """Restore an exported adventure: a new thread in a server, or here in a DM or thread."""
    bot = bot_of(interaction)
    archive, imports = bot.services.archive, bot.services.imports
    archive.check_size(file.size)
    # Before answering: a place an adventure cannot run is refused to the player alone.
    place = place_of(interaction)
    await interaction.response.defer(thinking=True)
    # Checked in full before a thread is opened for it: a bad file, or an import that would be
    # refused here, leaves nothing behind.
    actor = actor_of(interaction)
    parsed = await archive.read(await file.read(), actor)
    running = await archive.check_may_restore(actor, place, parsed)
    # The operator's moderation check, when one is set: a refused story opens no thread.
    check = await imports.check(actor, parsed)
    if running is None:
        await _restore(interaction, place, file.filename, parsed, check, replaces=None)
        return

    # The file read and checked is kept in the question rather than read again on the press:
    # the attachment's address may have expired by then, and a second read would count
    # against the imports per day again.
    async def import_it(press: discord.Interaction) -> None:
        await press.response.edit_message(content="Importing…", view=None)
        await _restore(press, place, file.filename, parsed, check, replaces=running)

    title = discord.utils.escape_markdown(parsed.steering.title or file.filename)
    # Asked as /start asks (``cogs.play``): privately, so the public "thinking" goes first.
    await reply(
        interaction,
        f"⚠ **{discord.utils.escape_markdown(running.title)}** is running here. Importing "
        f"**{title}** ends it; `/adventure export` keeps a copy of it first. Import anyway?",
        view=AskFirst("Import it", import_it),
    )


async def _restore(
    interaction: discord.Interaction,
    place: int | None,
    filename: str,
    parsed: ParsedAdventure,
    check: ImportCheck,
    *,
    replaces: RunningHere | None,
) -> None:
    """Write the import (the interaction acknowledged already) where it runs: ``place``, or a
    thread opened for it; then show the story there. ``replaces``: the adventure the importer
    agreed to end there (the import is refused if another runs there now)."""
    bot = bot_of(interaction)
    thread: discord.Thread | None = None
    if place is None:
        # Named as it opens: renaming it later would take Manage Threads (cogs.ui.threads).
        thread = await open_adventure_thread(
            interaction,
            parsed.steering.title or filename.removesuffix(".json"),
            f"Campfire adventure imported by {interaction.user}",
            bot.narrator.pacer,
        )
        target: discord.abc.Messageable = thread
        target_id = thread.id
    else:
        assert isinstance(interaction.channel, discord.abc.Messageable)  # place_of's answer
        target, target_id = interaction.channel, place
    try:
        imported = await bot.services.imports.restore(
            actor_of(interaction),
            target_id,
            parsed,
            check,
            opened_from=channel_id_of(interaction) if thread is not None else None,
            replaces=replaces.adventure_id if replaces is not None else None,
        )
    except BaseException:
        # No empty thread is left open by an import that failed.
        if thread is not None:
            await give_up_thread(interaction, thread)
        raise
    restored = imported.restored
    header = f"{restored.icon} **{discord.utils.escape_markdown(restored.title)}**".strip()
    size = f"{restored.nodes:,} entries, {restored.branches} branch"
    size += "es" if restored.branches != 1 else ""
    if thread is not None:
        content = (
            f"{header} is restored in {thread.mention} ({size}); it goes on from where it was."
        )
    else:
        content = f"{header} is restored ({size}); it goes on from where it was."
    # What the content checks did to the story, said where the importer sees it.
    if notes := imported.notes():
        content += f"\n{notes}"
    await interaction.edit_original_response(content=fit_text(content))
    if replaces is not None and isinstance(target, discord.Thread):
        # The answer went to the importer alone (their question, edited): the players of the
        # adventure that ended are told why it did.
        who = discord.utils.escape_markdown(interaction.user.display_name)
        ended = discord.utils.escape_markdown(replaces.title)
        await bot.narrator.post(
            target, f"📥 {who} imported {header}; **{ended}** ended. It goes on:"
        )
    await bot.narrator.post_opening(
        target,
        restored.head_text,
        restored.adventure_id,
        restored.version,
        node_id=restored.head_node_id,
    )


#: The /adventure group is the steering cog's: it must be there to add to (``cogs.ui.discovery``).
LOAD_AFTER = ("cogs.steering",)


class AdventureFilesCog(AdventureCommands):
    COMMANDS = (export_adventure, import_adventure)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(AdventureFilesCog(bot))
