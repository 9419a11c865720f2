"""The permission preflight: before a command or story button runs, whether the bot may do in
this channel what it is about to do; if not, the player is told privately what is missing and
who can fix it, and nothing runs (no database write, no request Discord would refuse).

The operator's blocks (``cogs.ui.gate.refused_as_blocked``) are checked first, in the same
two places (and by the pager buttons, which need no permission).

Run in one place for every app command (``CampfireTree.interaction_check``, which discord.py
calls before any command's checks and callback) and in one mixin for the story buttons
(``Preflighted``, a ``DynamicItem``'s ``interaction_check``). Both read ``app_permissions``, the
bot's permissions where the interaction came from, overwrites included, which Discord sends
with every interaction (discord-api-docs, Receiving and Responding, Interaction Structure), so
the check costs no request. The refusal is an ephemeral initial response, which needs no
channel permission. Both first reopen an archived thread the interaction came from
(``cogs.ui.threads.reopen_thread_of``): any answer there, and every edit after it, would be refused.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import discord
from discord import app_commands

from cogs.ui.bot_permissions import Does, kind_of_place, missing, missing_note
from cogs.ui.gate import refused_as_blocked
from cogs.ui.threads import reopen_thread_of

log = logging.getLogger(__name__)

#: What each command does in Discord besides answering (by qualified name). A command not
#: listed only answers (privately or as its own public response), which needs no permission in
#: the channel; a test checks that every narrating or starting command is here.
COMMANDS: dict[str, Does] = {
    "start": Does.STARTS,
    "adventure import": Does.STARTS,
    # Resume ends what runs here and posts the story again; end marks the story's close there.
    "adventure resume": Does.STARTS,
    "adventure end": Does.NARRATES,
    "do": Does.NARRATES,
    "say": Does.NARRATES,
    "story": Does.NARRATES,
    "continue": Does.NARRATES,
    "retry": Does.NARRATES,
    "undo": Does.NARRATES,
    "redo": Does.NARRATES,
    "edit": Does.NARRATES,
    "branch new": Does.NARRATES,
    "branch switch": Does.NARRATES,
    "savepoint restore": Does.NARRATES,
}


def does_of(command: app_commands.Command[Any, ..., Any] | app_commands.ContextMenu) -> Does:
    return COMMANDS.get(command.qualified_name, Does.ANSWERS)


#: A locked thread: only members with Manage Threads may post or edit there, bots included
#: (discord-api-docs, Threads, "Locked Threads"; discord-api-docs issues 6884, 7707); Discord
#: answers anything else with 50083.
LOCKED_NOTE = (
    "🔒 This thread is locked: only members with Manage Threads may post in it, so Campfire "
    "cannot narrate here. A moderator can unlock it, or the story can go on in another channel "
    "with `/adventure resume`. Nothing was changed."
)


def locked_here(interaction: discord.Interaction, does: Does) -> bool:
    """Whether ``does`` would post or edit in a thread a moderator locked, the bot lacking
    Manage Threads there."""
    channel = interaction.channel
    perms = interaction.app_permissions
    return (
        does is not Does.ANSWERS
        and isinstance(channel, discord.Thread)
        and channel.locked
        and not (perms.manage_threads or perms.administrator)
    )


async def preflight(interaction: discord.Interaction, does: Does) -> bool:
    """Whether the bot has what ``does`` takes here; if not, the player is told privately."""
    if locked_here(interaction, does):
        log.info("interaction %s refused here: the thread is locked", interaction.id)
        try:
            await interaction.response.send_message(LOCKED_NOTE, ephemeral=True)
        except discord.HTTPException:
            log.warning("could not answer interaction %s", interaction.id, exc_info=True)
        return False
    place = kind_of_place(interaction)
    lacking = missing(interaction.app_permissions, place, does)
    if not lacking:
        return True
    log.info(
        "interaction %s refused here: the bot lacks %s",
        interaction.id,
        ", ".join(p.name for p in lacking),
    )
    try:
        private = (
            isinstance(interaction.channel, discord.Thread)
            and interaction.channel.type is discord.ChannelType.private_thread
        )
        note = missing_note(lacking, place, private=private)
        await interaction.response.send_message(note, ephemeral=True)
    except discord.HTTPException:
        log.warning("could not answer interaction %s", interaction.id, exc_info=True)
    return False


class CampfireTree(app_commands.CommandTree):
    """The bot's command tree: an archived thread reopened and the permission preflight, before
    every command."""

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        # Autocomplete only suggests; it posts nothing and cannot be answered with a message.
        if interaction.type is not discord.InteractionType.application_command:
            return True
        command = interaction.command
        if command is None:
            return True
        # The operator's blocks first: a blocked user is answered and nothing else happens.
        if await refused_as_blocked(interaction):
            return False
        if not await reopen_thread_of(interaction):
            return False
        return await preflight(interaction, does_of(command))


class Preflighted:
    """Mixed into a story button before ``DynamicItem``: the preflight for what it does."""

    DOES: ClassVar[Does] = Does.NARRATES

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        if await refused_as_blocked(interaction):
            return False
        if not await reopen_thread_of(interaction):
            return False
        return await preflight(interaction, self.DOES)
