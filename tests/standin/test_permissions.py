"""The stand-in's permission resolver against Discord's documented algorithm
(discord-api-docs, Permissions: "Permission Overwrites", "Implicit Permissions", "Inherited
Permissions (Threads)")."""

from __future__ import annotations

import pytest

from bot.standin.permissions import (
    ALL_PERMISSIONS,
    DM_PERMISSIONS,
    EVERYONE_PERMISSIONS,
    P_ADMINISTRATOR,
    P_ATTACH_FILES,
    P_EMBED_LINKS,
    P_SEND_IN_THREADS,
    P_SEND_MESSAGES,
    P_VIEW_CHANNEL,
)
from bot.standin.records import RoleRecord
from bot.standin.world import World


@pytest.fixture
def world() -> tuple[World, int, int, int, int, int]:
    """A guild with a channel, roles A and B, and a member holding both."""
    w = World()
    guild = w.add_guild("g")
    channel = w.add_channel(guild.id, "c").id
    role_a, role_b = w.snowflake(), w.snowflake()
    guild.roles[role_a] = RoleRecord(role_a, "A", 0, position=1)
    guild.roles[role_b] = RoleRecord(role_b, "B", 0, position=2)
    member = w.add_user("m").id
    guild.members[member] = [role_a, role_b]
    return w, guild.id, channel, role_a, role_b, member


def can(perms: int, bit: int) -> bool:
    return perms & bit == bit


def test_everyone_overwrite_then_roles_then_member(world):
    w, guild, channel, role_a, role_b, member = world
    assert w.permissions_in(channel, member) == EVERYONE_PERMISSIONS

    # 3. @everyone's deny applies…
    w.set_overwrite(channel, guild, deny=P_SEND_MESSAGES)
    assert not can(w.permissions_in(channel, member), P_SEND_MESSAGES)
    # 5./6. …role denies and allows are gathered over all the member's roles, allows last: one
    # role allowing beats another denying, whatever their positions.
    w.set_overwrite(channel, role_a, deny=P_SEND_MESSAGES)
    w.set_overwrite(channel, role_b, allow=P_SEND_MESSAGES)
    assert can(w.permissions_in(channel, member), P_SEND_MESSAGES)
    # 7./8. the member's own overwrite comes last of all.
    w.set_overwrite(channel, member, deny=P_SEND_MESSAGES)
    assert not can(w.permissions_in(channel, member), P_SEND_MESSAGES)
    w.set_overwrite(channel, member, allow=P_SEND_MESSAGES)
    w.set_overwrite(channel, role_b)
    assert can(w.permissions_in(channel, member), P_SEND_MESSAGES)


def test_administrator_and_the_owner_pass_every_overwrite(world):
    w, guild, channel, role_a, _, member = world
    w.set_overwrite(channel, guild, deny=P_VIEW_CHANNEL)
    w.set_overwrite(channel, member, deny=P_VIEW_CHANNEL)
    w.guilds[guild].roles[role_a].permissions = P_ADMINISTRATOR
    assert w.permissions_in(channel, member) == ALL_PERMISSIONS
    assert w.permissions_in(channel, w.guilds[guild].owner_id) == ALL_PERMISSIONS


def test_implicit_denials(world):
    w, guild, channel, _, _, member = world
    # Without View Channel nothing else counts.
    w.set_overwrite(channel, member, deny=P_VIEW_CHANNEL)
    assert w.permissions_in(channel, member) == 0
    # Without Send Messages, no embeds nor files either.
    w.set_overwrite(channel, member, deny=P_SEND_MESSAGES)
    perms = w.permissions_in(channel, member)
    assert can(perms, P_VIEW_CHANNEL)
    assert not can(perms, P_EMBED_LINKS) and not can(perms, P_ATTACH_FILES)


def test_a_thread_takes_its_parents_permissions(world):
    w, guild, channel, _, _, member = world
    thread = w.add_thread(channel, "t", member).id
    w.set_overwrite(channel, member, deny=P_SEND_IN_THREADS)
    perms = w.permissions_in(thread, member)
    assert not can(perms, P_SEND_IN_THREADS)
    # In a thread the send right is Send Messages in Threads; Send Messages does not count.
    assert not can(perms, P_EMBED_LINKS)
    w.set_overwrite(channel, member, deny=P_SEND_MESSAGES)
    assert can(w.permissions_in(thread, member), P_SEND_IN_THREADS | P_EMBED_LINKS)
    with pytest.raises(ValueError):
        w.set_overwrite(thread, member, deny=P_VIEW_CHANNEL)


def test_a_dm_has_fixed_permissions(world):
    w, *_, member = world
    dm = w.dm_channel(member).id
    assert w.permissions_in(dm, w.bot_user.id) == DM_PERMISSIONS
