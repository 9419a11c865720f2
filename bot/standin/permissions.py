"""Discord's permission rules, for the stand-in: the bits, what each kind of member starts
with, a channel's overwrites and how they combine (discord-api-docs, Permissions). Pure rules
over numbers; ``World.permissions_in`` gathers a member's pieces from the stand-in's state and
asks ``with_overwrites``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Permission bits (discord-api-docs, Permissions, "Bitwise Permission Flags").
P_ADMINISTRATOR = 1 << 3
P_MANAGE_CHANNELS = 1 << 4
P_MANAGE_GUILD = 1 << 5
P_ADD_REACTIONS = 1 << 6
P_VIEW_CHANNEL = 1 << 10
P_SEND_MESSAGES = 1 << 11
P_SEND_TTS_MESSAGES = 1 << 12
P_MANAGE_MESSAGES = 1 << 13
P_EMBED_LINKS = 1 << 14
P_ATTACH_FILES = 1 << 15
P_READ_HISTORY = 1 << 16
P_MENTION_EVERYONE = 1 << 17
P_USE_APP_COMMANDS = 1 << 31
P_MANAGE_THREADS = 1 << 34
P_CREATE_PUBLIC_THREADS = 1 << 35
P_CREATE_PRIVATE_THREADS = 1 << 36
P_SEND_IN_THREADS = 1 << 38
EVERYONE_PERMISSIONS = (
    P_ADD_REACTIONS
    | P_VIEW_CHANNEL
    | P_SEND_MESSAGES
    | P_EMBED_LINKS
    | P_ATTACH_FILES
    | P_READ_HISTORY
    | P_USE_APP_COMMANDS
    | P_CREATE_PUBLIC_THREADS
    | P_SEND_IN_THREADS
)
#: The bot's own role: what its invite asks for (``python -m bot invite``; a test holds the two
#: equal), nothing more. Its permissions in a channel are those with @everyone's; a real server's
#: role carries no Manage Messages or Manage Threads unless an admin adds them, so the stand-in's
#: does not either (a private thread the bot was not added to, a locked thread, are closed to it).
BOT_ROLE_PERMISSIONS = (
    P_VIEW_CHANNEL
    | P_SEND_MESSAGES
    | P_EMBED_LINKS
    | P_ATTACH_FILES
    | P_CREATE_PUBLIC_THREADS
    | P_SEND_IN_THREADS
)
#: What a DM allows: "app_permissions includes ATTACH_FILES | EMBED_LINKS | MENTION_EVERYONE
#: permissions for (G)DMs with other users, and additionally includes USE_EXTERNAL_EMOJIS for
#: DMs with the app's bot user" (discord-api-docs, Receiving and Responding). Sending itself
#: needs no permission there; a closed DM is refused with 50007 instead.
P_USE_EXTERNAL_EMOJIS = 1 << 18
DM_PERMISSIONS = (
    P_VIEW_CHANNEL
    | P_SEND_MESSAGES
    | P_EMBED_LINKS
    | P_ATTACH_FILES
    | P_READ_HISTORY
    | P_MENTION_EVERYONE
    | P_USE_EXTERNAL_EMOJIS
)
#: "Denying SEND_MESSAGES implicitly denies MENTION_EVERYONE, SEND_TTS_MESSAGES, ATTACH_FILES,
#: and EMBED_LINKS" (discord-api-docs, Permissions, "Implicit Permissions").
IMPLIED_BY_SENDING = P_MENTION_EVERYONE | P_SEND_TTS_MESSAGES | P_ATTACH_FILES | P_EMBED_LINKS
# Overwrite target types (discord-api-docs, Channel, "Overwrite Object").
OVERWRITE_ROLE = 0
OVERWRITE_MEMBER = 1
ALL_PERMISSIONS = (1 << 51) - 1


@dataclass
class Overwrite:
    """A channel's permission overwrite for one role or member."""

    id: int
    type: int  # OVERWRITE_ROLE or OVERWRITE_MEMBER
    allow: int = 0
    deny: int = 0

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "type": self.type,
            "allow": str(self.allow),
            "deny": str(self.deny),
        }


def with_overwrites(
    base: int,
    *,
    everyone: Overwrite | None,
    roles: list[Overwrite],
    own: Overwrite | None,
    in_thread: bool,
    implicit: bool,
) -> int:
    """A member's permissions in a channel from their base ones (Administrator already handled
    by the caller): the channel's @everyone overwrite, their roles' overwrites together, their
    own; then, with ``implicit``, the implicit denials (without View Channel nothing, without
    the place's send right no embeds, files, @everyone or TTS)."""
    perms = base
    if everyone is not None:
        perms = (perms & ~everyone.deny) | everyone.allow
    allow = deny = 0
    for overwrite in roles:
        allow |= overwrite.allow
        deny |= overwrite.deny
    perms = (perms & ~deny) | allow
    if own is not None and own.type == OVERWRITE_MEMBER:
        perms = (perms & ~own.deny) | own.allow
    if not implicit:
        return perms
    if not perms & P_VIEW_CHANNEL:
        return 0
    send = P_SEND_IN_THREADS if in_thread else P_SEND_MESSAGES
    if not perms & send:
        perms &= ~IMPLIED_BY_SENDING
    return perms
