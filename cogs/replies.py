"""Answering an interaction whatever state its response is in."""

from __future__ import annotations

import logging
from typing import Any

import discord

from cogs.content import fit_embed, fit_text

log = logging.getLogger(__name__)

#: Discord's error for a second initial response to one interaction.
ALREADY_ACKNOWLEDGED = 40060


async def reply(
    interaction: discord.Interaction,
    content: str | None = None,
    *,
    embed: discord.Embed | None = None,
    ephemeral: bool = True,
    view: discord.ui.View | None = None,
) -> None:
    """Send ``content`` (and ``embed``) as the interaction's answer, or as a follow-up once it
    has one.

    Through the content guard (``cogs.content``) whatever it holds (an error may quote a
    player's long text): a message over Discord's limits would be refused whole (50035 Invalid
    Form Body)."""
    kwargs: dict[str, Any] = {"ephemeral": ephemeral}
    if content is not None:
        kwargs["content"] = fit_text(content)
    if embed is not None:
        kwargs["embed"] = fit_embed(embed)
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
