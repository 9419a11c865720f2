"""From a Discord interaction to the engine's notion of who acts where, with what rights.

The one helper every cog uses: the engine's access rules (``engine.people.access``) read the
permissions carried here, so no cog decides a right itself.
"""

from __future__ import annotations

import discord

from engine.errors import InvalidInput
from engine.people.access.rules import Actor


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
        age_restricted=age_restricted(interaction.channel),
    )


def age_restricted(channel: object) -> bool | None:
    """Whether Discord marks a place age-restricted: a channel's ``nsfw`` flag, a thread's
    parent's ("a thread … inherits" its parent's settings; Channel: "nsfw"). None where the
    channel is not known whole (a partial one), which leaves what the engine knew."""
    if isinstance(channel, discord.Thread):
        parent = channel.parent
        return None if parent is None else parent.is_nsfw()
    if isinstance(channel, discord.abc.GuildChannel) and hasattr(channel, "is_nsfw"):
        return bool(channel.is_nsfw())  # type: ignore[attr-defined]  # checked above
    return None


def channel_id_of(interaction: discord.Interaction) -> int:
    """The adventure's place: the thread, channel or DM the interaction came from."""
    assert interaction.channel_id is not None
    return interaction.channel_id


def runs_adventures(interaction: discord.Interaction) -> bool:
    """Whether the place of an interaction is one where adventures run: a thread or a DM
    (``place_of``); in a server's text channel they run in threads of it."""
    return isinstance(interaction.channel, discord.Thread | discord.DMChannel)


def place_of(interaction: discord.Interaction) -> int | None:
    """Where an adventure begun here (/start, /adventure import) will run: this thread or DM;
    None in a server's text channel, where it gets a public thread of its own, not opened yet.

    Anywhere else it cannot run, and the player is told at once, before anything is written or
    opened (an ``InvalidInput``, answered to them alone): an announcement channel holds only
    announcement threads, not public ones (discord-api-docs, Threads: "GUILD_TEXT channels
    create PUBLIC_THREAD and GUILD_ANNOUNCEMENT channels create ANNOUNCEMENT_THREAD"; discord.py
    types it a ``TextChannel`` with ``is_news()``); a forum or media channel holds only posts,
    each a thread opened with a first message (Start Thread in Forum or Media Channel); a
    voice or stage channel's text chat holds no threads at all.
    """
    channel = interaction.channel
    if isinstance(channel, discord.TextChannel):
        if channel.is_news():
            raise InvalidInput(
                "This is an announcement channel: Campfire cannot open a thread for an "
                f"adventure here. {_WHERE_TO_START}"
            )
        return None
    if isinstance(channel, discord.Thread | discord.DMChannel):
        return channel.id
    if isinstance(channel, discord.ForumChannel):
        raise InvalidInput(
            "This is a forum: Campfire cannot open a post for an adventure. Use `/start` inside "
            f"a post (it runs in that post), or: {_WHERE_TO_START}"
        )
    if isinstance(channel, discord.VoiceChannel | discord.StageChannel):
        raise InvalidInput(
            f"Adventures do not run in a voice or stage channel's chat. {_WHERE_TO_START}"
        )
    raise InvalidInput(f"Adventures cannot run in this kind of channel. {_WHERE_TO_START}")


_WHERE_TO_START = (
    "Start one in a text channel (Campfire opens a thread for it there), in a thread, or in a "
    "DM with Campfire."
)
