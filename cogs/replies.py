"""Answering an interaction whatever state its response is in."""

from __future__ import annotations

import logging
from typing import Any

import discord

log = logging.getLogger(__name__)


async def reply(
    interaction: discord.Interaction,
    content: str,
    *,
    ephemeral: bool = True,
    view: discord.ui.View | None = None,
) -> None:
    """Send ``content`` as the interaction's answer, or as a follow-up once it has one."""
    kwargs: dict[str, Any] = {"content": content, "ephemeral": ephemeral}
    if view is not None:
        kwargs["view"] = view
    try:
        if interaction.response.is_done():
            await interaction.followup.send(**kwargs)
        else:
            await interaction.response.send_message(**kwargs)
    except discord.HTTPException:
        log.warning("could not answer interaction %s", interaction.id, exc_info=True)
