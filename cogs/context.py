"""From a Discord interaction to the engine's notion of who acts where, with what rights.

The one helper every cog uses: the engine's access rules (``engine.access``) read the
permissions carried here, so no cog decides a right itself.
"""

from __future__ import annotations

import discord

from engine.access import Actor


def actor_of(interaction: discord.Interaction) -> Actor:
    """Who acts: their id and name, the server, and their permissions in this channel.

    ``interaction.permissions`` are the member's resolved permissions in the channel, overwrites
    included (Discord sends them with every interaction); Administrator implies every other.
    In a DM they mean nothing, and the engine's rules ignore them there.
    """
    guild = interaction.guild
    if guild is None:
        return Actor(user_id=interaction.user.id, user_name=interaction.user.display_name)
    permissions = interaction.permissions
    admin = permissions.administrator
    roles = getattr(interaction.user, "roles", None) or []
    return Actor(
        user_id=interaction.user.id,
        user_name=interaction.user.display_name,
        server_id=guild.id,
        server_name=guild.name,
        manages_server=admin or permissions.manage_guild,
        manages_messages=admin or permissions.manage_messages,
        role_ids=frozenset(role.id for role in roles),
    )


def channel_id_of(interaction: discord.Interaction) -> int:
    """The adventure's place: the thread, channel or DM the interaction came from."""
    assert interaction.channel_id is not None
    return interaction.channel_id


def place_of(interaction: discord.Interaction) -> int | None:
    """Where an adventure begun here (/start, /adventure import) will run: this thread, channel
    or DM; None in a server's text channel, where it gets a thread of its own, not opened yet."""
    if isinstance(interaction.channel, discord.TextChannel):
        return None
    return channel_id_of(interaction)
