"""From a Discord interaction to the engine's notion of who acts where."""

from __future__ import annotations

import discord

from engine.play import Actor


def actor_of(interaction: discord.Interaction) -> Actor:
    guild = interaction.guild
    return Actor(
        user_id=interaction.user.id,
        user_name=interaction.user.display_name,
        server_id=guild.id if guild is not None else None,
        server_name=guild.name if guild is not None else "",
    )


def channel_id_of(interaction: discord.Interaction) -> int:
    """The adventure's place: the thread, channel or DM the interaction came from."""
    assert interaction.channel_id is not None
    return interaction.channel_id
