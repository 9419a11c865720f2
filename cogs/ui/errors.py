"""One error handler for every app command, form and view: player errors are answered to the
player alone; anything else is logged with a reference and answered with a short apology.
``cogs.errors`` installs it on the command tree; forms and views call it as their
``on_error``."""

from __future__ import annotations

import logging

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.replies import reply
from engine.errors import CampfireError, log_incident

log = logging.getLogger(__name__)


def unwrap(error: BaseException) -> BaseException:
    while isinstance(error, app_commands.CommandInvokeError | commands.CommandInvokeError):
        error = error.original
    return error


#: Discord's error code for an interaction whose token expired or was never acknowledged in
#: time (discord-api-docs, Topics: "JSON Error Codes": 10062 Unknown interaction).
UNKNOWN_INTERACTION = 10062


async def on_app_command_error(interaction: discord.Interaction, error: Exception) -> None:
    """Also the ``on_error`` of forms and views, which are handed the bare exception."""
    original = unwrap(error)
    if isinstance(original, CampfireError):
        await reply(interaction, f"⚠ {original.message}")
    elif isinstance(original, app_commands.CheckFailure):
        await reply(interaction, f"⚠ {original}")
    elif isinstance(original, app_commands.TransformerError):
        await reply(interaction, f"⚠ {original}")
    elif isinstance(original, discord.NotFound) and original.code == UNKNOWN_INTERACTION:
        # Acknowledged too late (past Discord's 3 s): the player was shown "This interaction
        # failed" and nothing was written (acknowledgement comes first); with the token dead,
        # nothing can be said to them. A sign of an overloaded process, not a bug.
        command = interaction.command.qualified_name if interaction.command else "?"
        log.warning("/%s came too late to acknowledge (Discord's 3 s had passed)", command)
    else:
        command = interaction.command.qualified_name if interaction.command else "?"
        reference = log_incident(f"/{command} failed", original)
        await reply(
            interaction,
            f"Sorry, something went wrong on Campfire's side (reference `{reference}`).",
        )
