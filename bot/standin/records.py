"""The stand-in's records: guilds, channels, users, roles, messages, attachments and
interactions as it keeps them, Discord's channel types and message flags, and its snowflake
epoch. ``world.World`` holds them and builds Discord's payloads from them."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .permissions import (
    Overwrite,
)

DISCORD_EPOCH_MS = 1_420_070_400_000

# Channel types (Discord's numbers).
GUILD_TEXT = 0
DM = 1
GUILD_VOICE = 2
GUILD_ANNOUNCEMENT = 5
ANNOUNCEMENT_THREAD = 10
PUBLIC_THREAD = 11
PRIVATE_THREAD = 12
GUILD_STAGE_VOICE = 13
GUILD_FORUM = 15
GUILD_MEDIA = 16
THREAD_TYPES = (ANNOUNCEMENT_THREAD, PUBLIC_THREAD, PRIVATE_THREAD)
#: The channel types a guild channel may have in the stand-in (threads are made by
#: ``add_thread``); voice and stage channels carry a text chat of their own.
GUILD_CHANNEL_TYPES = (
    GUILD_TEXT,
    GUILD_VOICE,
    GUILD_ANNOUNCEMENT,
    GUILD_STAGE_VOICE,
    GUILD_FORUM,
    GUILD_MEDIA,
)

# Message flags.
FLAG_EPHEMERAL = 1 << 6
FLAG_LOADING = 1 << 7


def iso_now() -> str:
    return datetime.now(UTC).isoformat()


#: A user mention in a message's content (discord-api-docs, Reference, Message Formatting).
MENTION = re.compile(r"<@!?(\d+)>")


@dataclass
class UserRecord:
    id: int
    name: str
    bot: bool = False

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "username": self.name,
            "discriminator": "0",
            "global_name": None if self.bot else self.name,
            "avatar": None,
            "bot": self.bot,
            "public_flags": 0,
            "flags": 0,
        }


@dataclass
class RoleRecord:
    id: int
    name: str
    permissions: int
    position: int = 0
    managed: bool = False

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "name": self.name,
            "color": 0,
            "colors": {"primary_color": 0, "secondary_color": None, "tertiary_color": None},
            "hoist": False,
            "icon": None,
            "unicode_emoji": None,
            "position": self.position,
            "permissions": str(self.permissions),
            "managed": self.managed,
            "mentionable": False,
            "flags": 0,
        }


@dataclass
class GuildRecord:
    id: int
    name: str
    owner_id: int
    roles: dict[int, RoleRecord] = field(default_factory=dict)
    channel_ids: list[int] = field(default_factory=list)
    # user id -> role ids (besides @everyone)
    members: dict[int, list[int]] = field(default_factory=dict)
    joined_at: str = field(default_factory=iso_now)
    manager_role_id: int = 0
    #: Manage Messages without Manage Server: a moderator.
    moderator_role_id: int = 0
    bot_role_id: int = 0


@dataclass
class ChannelRecord:
    id: int
    type: int
    name: str = ""
    guild_id: int | None = None
    parent_id: int | None = None
    owner_id: int | None = None
    recipient_id: int | None = None
    position: int = 0
    created: str = field(default_factory=iso_now)
    # Threads only: an archived thread drops out of the gateway's view; a locked one stays
    # archived when someone without Manage Threads writes in it.
    archived: bool = False
    locked: bool = False
    archived_at: str | None = None
    auto_archive_duration: int = 1440
    #: Threads only: who has joined or was added (the thread member objects' user ids).
    members: set[int] = field(default_factory=set)
    # Channels only (threads take their parent's): target id -> its overwrite.
    overwrites: dict[int, Overwrite] = field(default_factory=dict)
    #: Channels only: Discord marks it age-restricted (Channel: "nsfw"); a thread is as its
    #: parent is, and its own payload says false.
    nsfw: bool = False

    @property
    def is_thread(self) -> bool:
        return self.type in THREAD_TYPES


@dataclass
class AttachmentRecord:
    id: int
    filename: str
    content: bytes
    url: str
    description: str | None = None
    content_type: str | None = None

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": str(self.id),
            "filename": self.filename,
            "size": len(self.content),
            "url": self.url,
            "proxy_url": self.url,
        }
        if self.content_type:
            data["content_type"] = self.content_type
        if self.description is not None:
            data["description"] = self.description
        return data


@dataclass
class MessageRecord:
    id: int
    channel_id: int
    author_id: int
    content: str = ""
    embeds: list[dict[str, Any]] = field(default_factory=list)
    components: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[AttachmentRecord] = field(default_factory=list)
    flags: int = 0
    created: float = 0.0
    timestamp: str = field(default_factory=iso_now)
    edited_timestamp: str | None = None
    # (clock time, content) for every edit, in order
    edits: list[tuple[float, str]] = field(default_factory=list)
    deleted: bool = False
    # Set for ephemeral messages: the one user who can see it.
    visible_to: int | None = None
    # The interaction this message answers, if any (interaction_metadata in payloads).
    interaction_id: int | None = None
    webhook_id: int | None = None
    thread_id: int | None = None
    # A follow-up of its interaction (a message of its own), not the interaction's response.
    followup: bool = False

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & FLAG_EPHEMERAL)

    @property
    def is_response(self) -> bool:
        """Whether this is an interaction's response (what the player's command shows first),
        as opposed to the bot's channel messages and an interaction's follow-ups."""
        return self.interaction_id is not None and not self.followup

    @property
    def buttons(self) -> list[tuple[str | None, str | None, bool]]:
        """Every button on the message as (label, custom_id, disabled), in display order."""
        return [
            (c.get("label"), c.get("custom_id"), bool(c.get("disabled", False)))
            for c in iter_components(self.components)
            if c.get("type") == 2
        ]

    def button_components(self) -> list[dict[str, Any]]:
        return [c for c in iter_components(self.components) if c.get("type") == 2]


def iter_components(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flatten rows, containers, sections and labels into a list of leaf-ish components."""
    out: list[dict[str, Any]] = []
    for comp in components:
        out.append(comp)
        if "components" in comp:
            out.extend(iter_components(comp["components"]))
        if isinstance(comp.get("component"), dict):
            out.extend(iter_components([comp["component"]]))
        if isinstance(comp.get("accessory"), dict):
            out.extend(iter_components([comp["accessory"]]))
    return out


@dataclass
class InteractionRecord:
    """One interaction the stand-in dispatched, and everything the bot did with it."""

    id: int
    token: str
    type: int
    user_id: int
    channel_id: int
    guild_id: int | None
    created: float
    name: str | None = None  # command path or custom_id
    acknowledged: float | None = None
    response_type: int | None = None
    response_data: dict[str, Any] | None = None
    followups: list[int] = field(default_factory=list)
    modal: dict[str, Any] | None = None
    original_message_id: int | None = None
    # the message a component was on (press) or a modal was opened from
    source_message_id: int | None = None
    choices: list[dict[str, Any]] | None = None
    failed: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # The INTERACTION_CREATE payload as sent, so the same interaction can be delivered again.
    payload: dict[str, Any] | None = None

    @property
    def ephemeral(self) -> bool:
        return bool(self.response_data and int(self.response_data.get("flags", 0)) & FLAG_EPHEMERAL)
