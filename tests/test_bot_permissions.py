"""What the bot lacks for what a command does, from the permissions Discord sends."""

from __future__ import annotations

import discord

from cogs.ui.bot_permissions import (
    CREATE_PUBLIC_THREADS,
    EMBED_LINKS,
    SEND_MESSAGES_IN_THREADS,
    VIEW_CHANNEL,
    Does,
    Place,
    missing,
)

EVERYTHING = discord.Permissions(
    view_channel=True,
    send_messages=True,
    send_messages_in_threads=True,
    create_public_threads=True,
    embed_links=True,
    attach_files=True,
)


def without(**flags: bool) -> discord.Permissions:
    perms = discord.Permissions(EVERYTHING.value)
    perms.update(**flags)
    return perms


def test_answering_needs_nothing_anywhere():
    for place in Place:
        assert missing(discord.Permissions.none(), place, Does.ANSWERS) == []
    assert missing(discord.Permissions.none(), Place.DM, Does.NARRATES) == []


def test_a_start_in_a_channel_needs_threads_and_the_thread_send_right():
    assert missing(EVERYTHING, Place.CHANNEL, Does.STARTS) == []
    assert missing(without(send_messages=False), Place.CHANNEL, Does.STARTS) == []
    assert missing(without(create_public_threads=False), Place.CHANNEL, Does.STARTS) == [
        CREATE_PUBLIC_THREADS
    ]
    assert missing(without(send_messages_in_threads=False), Place.CHANNEL, Does.STARTS) == [
        SEND_MESSAGES_IN_THREADS
    ]


def test_implicit_denials_name_the_permission_to_grant_first():
    # Without View Channel, nothing else is worth naming.
    assert missing(without(view_channel=False, embed_links=False), Place.THREAD, Does.NARRATES) == [
        VIEW_CHANNEL
    ]
    # Without the send right embeds are denied implicitly: the send right is what to grant.
    lacking = missing(
        without(send_messages_in_threads=False, embed_links=False), Place.THREAD, Does.NARRATES
    )
    assert lacking == [SEND_MESSAGES_IN_THREADS]
    assert missing(without(embed_links=False), Place.THREAD, Does.NARRATES) == [EMBED_LINKS]
    assert missing(discord.Permissions(administrator=True), Place.THREAD, Does.NARRATES) == []
