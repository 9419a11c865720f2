"""Answering an interaction whatever state its response is in."""

from __future__ import annotations

import logging
from typing import Any

import discord

from cogs.text_split import DISCORD_LIMIT
from engine.sanitise import echo

log = logging.getLogger(__name__)

#: Discord's error for a second initial response to one interaction.
ALREADY_ACKNOWLEDGED = 40060


async def reply(
    interaction: discord.Interaction,
    content: str,
    *,
    ephemeral: bool = True,
    view: discord.ui.View | None = None,
) -> None:
    """Send ``content`` as the interaction's answer, or as a follow-up once it has one.

    Cut to Discord's limit whatever it holds (an error may quote a player's long text): a
    message over the limit would be refused whole (50035 Invalid Form Body)."""
    kwargs: dict[str, Any] = {"content": echo(content, DISCORD_LIMIT), "ephemeral": ephemeral}
    if view is not None:
        kwargs["view"] = view
    try:
        if interaction.response.is_done():
            await interaction.followup.send(**kwargs)
        else:
            await interaction.response.send_message(**kwargs)
    except discord.HTTPException:
        log.warning("could not answer interaction %s", interaction.id, exc_info=True)


async def defer_request(interaction: discord.Interaction, *, ephemeral: bool = False) -> None:
    """Defer (the player sees "thinking") an interaction that carries a request to the engine;
    ``ephemeral``: its answers are for the player alone.

    Discord may deliver one interaction twice (a gateway replay, one event reaching two
    processes), and acknowledges it once: the second defer fails with 40060. That delivery
    carries on all the same, since the engine decides in the database which delivery plays the
    request (the other gets ``AlreadyHandled``), and the interaction's token answers for 15
    minutes after whichever acknowledgement came first (discord-api-docs, "Receiving and
    Responding").
    """
    try:
        await interaction.response.defer(thinking=True, ephemeral=ephemeral)
    except discord.HTTPException as error:
        if error.code != ALREADY_ACKNOWLEDGED:
            raise
        log.info("interaction %s arrived again; answering through its token", interaction.id)
