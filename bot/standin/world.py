"""The stand-in's state: guilds, channels, users, messages, interactions, and their payloads.

Every payload built here has the shape Discord's API uses, because the judge of "right" is
discord.py's own parser: the client builds real objects from these dicts.
"""

from __future__ import annotations

import itertools
import mimetypes
import time
from typing import Any

from .permissions import (
    ALL_PERMISSIONS,
    BOT_ROLE_PERMISSIONS,
    DM_PERMISSIONS,
    EVERYONE_PERMISSIONS,
    OVERWRITE_MEMBER,
    OVERWRITE_ROLE,
    P_ADMINISTRATOR,
    P_MANAGE_GUILD,
    P_MANAGE_MESSAGES,
    P_MANAGE_THREADS,
    P_VIEW_CHANNEL,
    Overwrite,
    with_overwrites,
)
from .records import (
    DISCORD_EPOCH_MS,
    DM,
    GUILD_CHANNEL_TYPES,
    GUILD_FORUM,
    GUILD_MEDIA,
    GUILD_STAGE_VOICE,
    GUILD_TEXT,
    GUILD_VOICE,
    MENTION,
    PRIVATE_THREAD,
    PUBLIC_THREAD,
    AttachmentRecord,
    ChannelRecord,
    GuildRecord,
    InteractionRecord,
    MessageRecord,
    RoleRecord,
    UserRecord,
)


class World:
    """All of the stand-in's state and the payload builders over it."""

    def __init__(self) -> None:
        self._last_id = 0
        #: Bits 12-21 of the ids this world makes (0 to 1023; see ``snowflake``).
        self.worker = 0
        self._tokens = itertools.count(1)
        self.users: dict[int, UserRecord] = {}
        self.guilds: dict[int, GuildRecord] = {}
        self.channels: dict[int, ChannelRecord] = {}
        self.messages_by_id: dict[int, MessageRecord] = {}
        self.channel_messages: dict[int, list[int]] = {}
        self.attachments: dict[int, AttachmentRecord] = {}
        self.interactions: dict[int, InteractionRecord] = {}
        self.dm_by_user: dict[int, int] = {}
        #: Users whose DMs are closed to the bot (privacy settings, a block): 50007.
        self.closed_dms: set[int] = set()
        self.application_id = self.snowflake()
        self.bot_user = UserRecord(self.application_id, "Campfire", bot=True)
        self.users[self.bot_user.id] = self.bot_user
        self.base_url = ""  # set by the server once it knows its port

    # -- ids ----------------------------------------------------------------------------------

    def snowflake(self) -> int:
        """A real snowflake: milliseconds since Discord's epoch << 22, this world's worker in
        bits 12-21 and an increment in bits 0-11 (discord-api-docs, Reference: "Snowflakes"),
        never repeating. Stand-ins of several processes (a cluster trial) each take a worker
        of their own, so that their ids never collide, as Discord's never do."""
        ms = max(int(time.time() * 1000) - DISCORD_EPOCH_MS, self._last_id >> 22)
        increment = 0
        if ms == self._last_id >> 22:
            increment = (self._last_id & 0xFFF) + 1
            if increment > 0xFFF:
                ms, increment = ms + 1, 0
        self._last_id = (ms << 22) | (self.worker << 12) | increment
        return self._last_id

    def token(self) -> str:
        return f"standin-interaction-token-{next(self._tokens)}-{self.snowflake()}"

    # -- builders -----------------------------------------------------------------------------

    def add_user(self, name: str, *, bot: bool = False, user_id: int | None = None) -> UserRecord:
        user = UserRecord(user_id or self.snowflake(), name, bot=bot)
        self.users[user.id] = user
        return user

    def add_guild(
        self, name: str, owner_id: int | None = None, *, guild_id: int | None = None
    ) -> GuildRecord:
        gid = guild_id or self.snowflake()
        if owner_id is None:
            owner_id = self.add_user(f"{name} owner").id
        guild = GuildRecord(gid, name, owner_id)
        # @everyone shares the guild's id, as on Discord.
        guild.roles[gid] = RoleRecord(gid, "@everyone", EVERYONE_PERMISSIONS)
        guild.manager_role_id = self.snowflake()
        guild.roles[guild.manager_role_id] = RoleRecord(
            guild.manager_role_id, "Manager", EVERYONE_PERMISSIONS | P_MANAGE_GUILD, position=1
        )
        guild.bot_role_id = self.snowflake()
        guild.roles[guild.bot_role_id] = RoleRecord(
            guild.bot_role_id, self.bot_user.name, BOT_ROLE_PERMISSIONS, position=2, managed=True
        )
        guild.moderator_role_id = self.snowflake()
        guild.roles[guild.moderator_role_id] = RoleRecord(
            guild.moderator_role_id,
            "Moderator",
            EVERYONE_PERMISSIONS | P_MANAGE_MESSAGES,
            position=1,
        )
        guild.members[self.bot_user.id] = [guild.bot_role_id]
        guild.members[owner_id] = []
        self.guilds[gid] = guild
        return guild

    def add_channel(
        self,
        guild_id: int,
        name: str,
        *,
        type: int = GUILD_TEXT,  # noqa: A002 - Discord's field name
        channel_id: int | None = None,
        nsfw: bool = False,
    ) -> ChannelRecord:
        if type not in GUILD_CHANNEL_TYPES:
            raise ValueError(f"not a guild channel type the stand-in models: {type}")
        guild = self.guilds[guild_id]
        channel = ChannelRecord(
            channel_id or self.snowflake(),
            type,
            name,
            guild_id=guild_id,
            position=len(guild.channel_ids),
            nsfw=nsfw,
        )
        guild.channel_ids.append(channel.id)
        self.channels[channel.id] = channel
        self.channel_messages[channel.id] = []
        return channel

    def add_thread(
        self,
        parent_id: int,
        name: str,
        owner_id: int,
        *,
        thread_id: int | None = None,
        type: int = PUBLIC_THREAD,  # noqa: A002 - Discord's field name
    ) -> ChannelRecord:
        parent = self.channels[parent_id]
        thread = ChannelRecord(
            thread_id or self.snowflake(),
            type,
            name,
            guild_id=parent.guild_id,
            parent_id=parent_id,
            owner_id=owner_id,
            # Its creator is its first member (discord-api-docs, Threads: "Thread Membership").
            members={owner_id},
        )
        self.channels[thread.id] = thread
        self.channel_messages[thread.id] = []
        return thread

    def dm_channel(self, user_id: int, *, channel_id: int | None = None) -> ChannelRecord:
        if user_id in self.dm_by_user:
            return self.channels[self.dm_by_user[user_id]]
        channel = ChannelRecord(channel_id or self.snowflake(), DM, recipient_id=user_id)
        self.channels[channel.id] = channel
        self.channel_messages[channel.id] = []
        self.dm_by_user[user_id] = channel.id
        return channel

    def add_attachment(
        self,
        channel_id: int,
        filename: str,
        content: bytes,
        description: str | None = None,
        content_type: str | None = None,
    ) -> AttachmentRecord:
        aid = self.snowflake()
        ctype = content_type or mimetypes.guess_type(filename)[0]
        url = f"{self.base_url}/attachments/{channel_id}/{aid}/{filename}"
        record = AttachmentRecord(aid, filename, content, url, description, ctype)
        self.attachments[aid] = record
        return record

    def add_message(self, message: MessageRecord) -> MessageRecord:
        self.messages_by_id[message.id] = message
        self.channel_messages.setdefault(message.channel_id, []).append(message.id)
        return message

    # -- permissions --------------------------------------------------------------------------

    def member_permissions(self, guild_id: int, user_id: int) -> int:
        """A member's base permissions in the guild, before any channel's overwrites
        (discord-api-docs, Permissions: ``compute_base_permissions``)."""
        guild = self.guilds[guild_id]
        if user_id == guild.owner_id:
            return ALL_PERMISSIONS
        perms = guild.roles[guild.id].permissions
        for rid in guild.members.get(user_id, []):
            perms |= guild.roles[rid].permissions
        if perms & P_ADMINISTRATOR:
            return ALL_PERMISSIONS
        return perms

    def thread_archived(self, channel_id: int) -> bool:
        """Whether a message there may not be made or edited: an archived thread (Discord's
        50083 "Tried to perform an operation on an archived thread, such as editing a
        message"; discord-api-docs, Threads: "Users cannot edit messages, add reactions, use
        application commands, or join archived threads")."""
        channel = self.channels.get(channel_id)
        return channel is not None and channel.is_thread and channel.archived

    def thread_locked_to_bot(self, channel_id: int) -> bool:
        """Whether a thread a moderator locked (archived or not) refuses the bot's messages
        there: "only users with MANAGE_THREADS can ... send messages" in a locked thread
        (discord-api-docs, Threads, "Locked Threads"; issues 6884 and 7707, a bot included).
        Discord answers 50083, as for an archived thread. Ephemeral answers are not messages
        in the thread, and are left alone (a reading: the docs do not say)."""
        channel = self.channels.get(channel_id)
        if channel is None or not channel.is_thread or not channel.locked:
            return False
        granted = self.permissions_in(channel_id, self.bot_user.id)
        return not granted & (P_MANAGE_THREADS | P_ADMINISTRATOR)

    def permissions_in(self, channel_id: int, user_id: int, *, implicit: bool = True) -> int:
        """What ``user_id`` may do in ``channel_id``: the one resolver behind every permission
        the stand-in sends (interaction payloads) and checks (its routes).

        Discord's algorithm (discord-api-docs, Permissions, "Permission Overwrites"): the base
        permissions, then the channel's @everyone overwrite, the member's roles' overwrites
        together, the member's own; Administrator and the owner get everything. A thread takes
        its parent channel's ("Inherited Permissions (Threads)"). Then the implicit denials:
        without View Channel nothing is left, and without the right to send, neither embeds,
        files, @everyone nor TTS ("Implicit Permissions"; in a thread the send right is Send
        Messages in Threads, "Send Messages has no effect in threads": discord-api-docs,
        Threads). A DM's are fixed.

        ``implicit=False`` leaves the implicit denials out, as the permissions Discord sends in
        interactions do ("This does not include implicit permissions, which may need to be
        checked separately": Channel, ``app_permissions``); the routes check with them.
        """
        channel = self.channels[channel_id]
        if channel.guild_id is None:
            return DM_PERMISSIONS
        source = self.channels[channel.parent_id] if channel.parent_id is not None else channel
        guild = self.guilds[channel.guild_id]
        base = self.member_permissions(guild.id, user_id)
        if base & P_ADMINISTRATOR:  # the owner's ALL has it too
            return ALL_PERMISSIONS
        roles = [source.overwrites.get(rid) for rid in guild.members.get(user_id, [])]
        granted = with_overwrites(
            base,
            everyone=source.overwrites.get(guild.id),
            roles=[o for o in roles if o is not None and o.type == OVERWRITE_ROLE],
            own=source.overwrites.get(user_id),
            in_thread=channel.is_thread,
            implicit=implicit,
        )
        if (
            channel.type == PRIVATE_THREAD
            and user_id not in channel.members
            and not granted & P_MANAGE_THREADS
        ):
            # "Private threads ... are only viewable by those invited and those with the
            # MANAGE_THREADS permission" (discord-api-docs, Channel, Channel Types): the
            # channel's rights stand, but the thread itself is out of sight.
            granted &= ~P_VIEW_CHANNEL
            if implicit:
                return 0
        return granted

    def set_overwrite(
        self, channel_id: int, target_id: int, *, allow: int = 0, deny: int = 0
    ) -> Overwrite:
        """Set a channel's overwrite for a role or a member (replacing an earlier one). A
        thread's permissions are its parent's: setting them on a thread is refused, as Discord
        has no overwrites on threads."""
        channel = self.channels[channel_id]
        if channel.guild_id is None or channel.is_thread:
            raise ValueError("permission overwrites belong to a server channel, not a thread or DM")
        guild = self.guilds[channel.guild_id]
        kind = OVERWRITE_ROLE if target_id in guild.roles else OVERWRITE_MEMBER
        if kind == OVERWRITE_MEMBER and target_id not in guild.members:
            raise LookupError(f"{target_id} is neither a role nor a member of {guild.id}")
        overwrite = Overwrite(target_id, kind, allow, deny)
        channel.overwrites[target_id] = overwrite
        return overwrite

    # -- payloads -----------------------------------------------------------------------------

    def member_payload(
        self, guild_id: int, user_id: int, *, permissions_in: int | None = None
    ) -> dict:
        """A member object; ``permissions_in``: with their permissions in that channel, as
        interactions carry them."""
        guild = self.guilds[guild_id]
        data: dict[str, Any] = {
            "user": self.users[user_id].payload(),
            "roles": [str(r) for r in guild.members.get(user_id, [])],
            "joined_at": guild.joined_at,
            "nick": None,
            "avatar": None,
            "premium_since": None,
            "deaf": False,
            "mute": False,
            "pending": False,
            "flags": 0,
            "communication_disabled_until": None,
        }
        if permissions_in is not None:
            data["permissions"] = str(self.permissions_in(permissions_in, user_id, implicit=False))
        return data

    def channel_payload(self, channel_id: int) -> dict[str, Any]:
        ch = self.channels[channel_id]
        last = self.channel_messages.get(channel_id) or []
        last_id = str(last[-1]) if last else None
        if ch.type == DM:
            return {
                "id": str(ch.id),
                "type": DM,
                "last_message_id": last_id,
                "recipients": [self.users[ch.recipient_id].payload()] if ch.recipient_id else [],
                "flags": 0,
            }
        if ch.is_thread:
            count = len(last)
            return {
                "id": str(ch.id),
                "type": ch.type,
                "guild_id": str(ch.guild_id),
                "parent_id": str(ch.parent_id),
                "owner_id": str(ch.owner_id),
                "name": ch.name,
                "last_message_id": last_id,
                "rate_limit_per_user": 0,
                "message_count": count,
                "member_count": min(len(ch.members), 50),
                "total_message_sent": count,
                "flags": 0,
                "thread_metadata": {
                    "archived": ch.archived,
                    "auto_archive_duration": ch.auto_archive_duration,
                    "archive_timestamp": ch.archived_at or ch.created,
                    "locked": ch.locked,
                    "invitable": True,
                    "create_timestamp": ch.created,
                },
            }
        data: dict[str, Any] = {
            "id": str(ch.id),
            "type": ch.type,
            "guild_id": str(ch.guild_id),
            "name": ch.name,
            "position": ch.position,
            "permission_overwrites": [o.payload() for o in ch.overwrites.values()],
            "nsfw": ch.nsfw,
            "topic": None,
            "parent_id": None,
            "last_message_id": last_id,
            "rate_limit_per_user": 0,
            "flags": 0,
        }
        if ch.type in (GUILD_VOICE, GUILD_STAGE_VOICE):
            data |= {"bitrate": 64000, "user_limit": 0, "rtc_region": None}
        if ch.type in (GUILD_FORUM, GUILD_MEDIA):
            data |= {
                "available_tags": [],
                "default_reaction_emoji": None,
                "default_sort_order": None,
                "default_forum_layout": 0,
                "default_thread_rate_limit_per_user": 0,
            }
        return data

    def partial_channel_payload(self, channel_id: int, user_id: int) -> dict[str, Any]:
        """The channel object interactions carry (Discord sends the full channel, minus extras),
        with ``user_id``'s permissions there and the bot's (discord-api-docs, Receiving and
        Responding: partial channels have ``permissions`` and ``app_permissions``)."""
        data = self.channel_payload(channel_id)
        if self.channels[channel_id].type != DM:
            data["permissions"] = str(self.permissions_in(channel_id, user_id, implicit=False))
            data["app_permissions"] = str(
                self.permissions_in(channel_id, self.bot_user.id, implicit=False)
            )
        return data

    def guild_payload(self, guild_id: int) -> dict[str, Any]:
        """A full GUILD_CREATE payload."""
        guild = self.guilds[guild_id]
        channels = [self.channel_payload(c) for c in guild.channel_ids]
        # Active threads only: "archived threads are not synced up-front via the gateway"
        # (discord-api-docs, Threads).
        threads = [
            self.channel_payload(c.id)
            for c in self.channels.values()
            if c.guild_id == guild_id and c.is_thread and not c.archived
        ]
        return {
            "id": str(guild.id),
            "name": guild.name,
            "icon": None,
            "splash": None,
            "discovery_splash": None,
            "banner": None,
            "description": None,
            "owner_id": str(guild.owner_id),
            "afk_channel_id": None,
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "roles": [r.payload() for r in guild.roles.values()],
            "emojis": [],
            "stickers": [],
            "features": [],
            "mfa_level": 0,
            "application_id": None,
            "system_channel_id": None,
            "system_channel_flags": 0,
            "rules_channel_id": None,
            "public_updates_channel_id": None,
            "safety_alerts_channel_id": None,
            "vanity_url_code": None,
            "premium_tier": 0,
            "premium_subscription_count": 0,
            "preferred_locale": "en-US",
            "nsfw_level": 0,
            "premium_progress_bar_enabled": False,
            "max_members": 500000,
            "joined_at": guild.joined_at,
            "large": False,
            "unavailable": False,
            "member_count": len(guild.members),
            "voice_states": [],
            "members": [self.member_payload(guild_id, uid) for uid in guild.members],
            "channels": channels,
            "threads": threads,
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }

    def _mentioned(self, content: str) -> list[dict[str, Any]]:
        """The users a message's content mentions (``<@id>`` or ``<@!id>``), once each, as
        Discord lists them (Message Formatting; Message Object, ``mentions``)."""
        found = dict.fromkeys(int(raw) for raw in MENTION.findall(content))
        return [self.users[uid].payload() for uid in found if uid in self.users]

    def message_payload(self, message: MessageRecord) -> dict[str, Any]:
        ch = self.channels.get(message.channel_id)
        data: dict[str, Any] = {
            "id": str(message.id),
            "channel_id": str(message.channel_id),
            "type": 0,
            "author": self.users[message.author_id].payload(),
            "content": message.content,
            "timestamp": message.timestamp,
            "edited_timestamp": message.edited_timestamp,
            "tts": False,
            "mention_everyone": False,
            "mentions": self._mentioned(message.content),
            "mention_roles": [],
            "attachments": [a.payload() for a in message.attachments],
            "embeds": message.embeds,
            "pinned": False,
            "flags": message.flags,
            "components": message.components,
        }
        if ch is not None and ch.guild_id is not None:
            data["guild_id"] = str(ch.guild_id)
            guild = self.guilds.get(ch.guild_id)
            if guild is not None and message.author_id in guild.members:
                member = self.member_payload(ch.guild_id, message.author_id)
                member.pop("user")
                data["member"] = member
        if message.webhook_id is not None:
            data["webhook_id"] = str(message.webhook_id)
            data["application_id"] = str(self.application_id)
        if message.interaction_id is not None and message.interaction_id in self.interactions:
            rec = self.interactions[message.interaction_id]
            # CHAT_INPUT_COMMAND for slash answers; component and modal answers are DEFAULT.
            data["type"] = 20 if rec.type == 2 else 0
            meta: dict[str, Any] = {
                "id": str(rec.id),
                "type": rec.type,
                "user": self.users[rec.user_id].payload(),
                "authorizing_integration_owners": self.integration_owners(rec.guild_id),
            }
            if rec.type == 2 and rec.name:
                meta["name"] = rec.name
            if rec.source_message_id is not None and rec.type == 3:
                meta["interacted_message_id"] = str(rec.source_message_id)
            data["interaction_metadata"] = meta
        if message.thread_id is not None and message.thread_id in self.channels:
            data["thread"] = self.channel_payload(message.thread_id)
        return data

    def integration_owners(self, guild_id: int | None) -> dict[str, str]:
        return {"0": str(guild_id)} if guild_id is not None else {"1": "0"}

    def application_payload(self) -> dict[str, Any]:
        owner = next((g.owner_id for g in self.guilds.values()), None)
        owner_user = self.users[owner] if owner else self.bot_user
        return {
            "id": str(self.application_id),
            "name": self.bot_user.name,
            "icon": None,
            "description": "Local Discord stand-in application",
            "summary": "",
            "type": None,
            "hook": True,
            "bot_public": False,
            "bot_require_code_grant": False,
            "verify_key": "0" * 64,
            "owner": owner_user.payload(),
            "team": None,
            "flags": 0,
            "tags": [],
            "redirect_uris": [],
            "interactions_endpoint_url": None,
            "bot": self.bot_user.payload(),
            "approximate_guild_count": len(self.guilds),
            "integration_types_config": {"0": {}, "1": {}},
        }
