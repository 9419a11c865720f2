"""Channel routes that change a channel: Modify Channel (``PATCH /channels/{id}``), Delete
Channel (``DELETE /channels/{id}``) and Add Thread Member / Join Thread (``PUT
/channels/{id}/thread-members/{user_id|@me}``), with Discord's permission rules for threads.

The rules, from discord-api-docs (Channel: "Modify Channel", "JSON Params (Thread)", "Delete/
Close Channel", "Join Thread", "Add Thread Member"; Threads: "Editing & Deleting Threads",
"Locked Threads"), where the two pages differ the stricter is modelled:

- deleting a thread takes Manage Threads; any other guild channel, Manage Channels;
- unarchiving an unlocked thread takes only the right to talk in it (Send Messages in
  Threads: "SEND_MESSAGES has no effect in threads"); every other change (a name, the
  auto-archive duration, archiving, locking, a slow mode) and unarchiving a locked one take
  Manage Threads: "If modifying a thread and setting archived to false, when locked is also
  false, only the SEND_MESSAGES permission is required. Otherwise, requires the
  MANAGE_THREADS permission" (Modify Channel). The client lets a thread's creator rename and
  archive it, but the API grants the bot nothing for having created one;
- an archived thread changes only by a request that unarchives it (else 50083);
- a member is added only to an active thread (50083), by someone who may talk in it.

The bot's own permissions are read at guild level (``World.member_permissions``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import limits
from .permissions import P_MANAGE_CHANNELS, P_MANAGE_THREADS, P_SEND_IN_THREADS, P_VIEW_CHANNEL
from .records import DM, ChannelRecord
from .rest import error_response, json_response, read_body

if TYPE_CHECKING:
    from .host import StandinHost

#: The durations a thread may be set to archive after (minutes).
AUTO_ARCHIVE_DURATIONS = (60, 1440, 4320, 10080)


def _missing_permissions() -> web.Response:
    return error_response(403, 50013, "Missing Permissions")


def _archived() -> web.Response:
    return error_response(400, 50083, "Thread is archived")


class ChannelRoutes:
    def __init__(self, fake: StandinHost) -> None:
        self.fake = fake
        self.world = fake.world

    def _channel(self, request: web.Request) -> ChannelRecord | None:
        try:
            return self.world.channels.get(int(request.match_info["cid"]))
        except ValueError:
            return None

    def _bot_permissions(self, channel: ChannelRecord) -> int:
        assert channel.guild_id is not None
        return self.world.permissions_in(channel.id, self.world.bot_user.id)

    # -- Modify Channel -----------------------------------------------------------------------

    async def modify_channel(self, request: web.Request) -> web.Response:
        channel = self._channel(request)
        if channel is None:
            return error_response(404, 10003, "Unknown Channel")
        payload, _ = await read_body(request)
        if channel.type == DM:
            return error_response(400, 50024, "Cannot execute action on this channel type")
        if not channel.is_thread:
            # The bot never renames or moves channels; a guild channel changes only with
            # Manage Channels.
            if not self._bot_permissions(channel) & P_MANAGE_CHANNELS:
                return _missing_permissions()
            if "name" in payload:
                channel.name = str(payload["name"])
            return json_response(self.world.channel_payload(channel.id))
        return self._modify_thread(channel, payload)

    def _modify_thread(self, thread: ChannelRecord, payload: dict[str, Any]) -> web.Response:
        errors = limits.FormErrors()
        if "name" in payload and not 1 <= len(payload["name"] or "") <= 100:
            errors.add(["name"], "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
        duration = payload.get("auto_archive_duration")
        if "auto_archive_duration" in payload and duration not in AUTO_ARCHIVE_DURATIONS:
            errors.add(
                ["auto_archive_duration"],
                "BASE_TYPE_CHOICES",
                f"Value must be one of {set(AUTO_ARCHIVE_DURATIONS)}.",
            )
        body = errors.body()
        if body is not None:
            return json_response(body, status=400)
        # "Requires the thread to have archived set to false or be set to false in the
        # request."
        unarchiving = payload.get("archived") is False
        if thread.archived and not unarchiving:
            return _archived()
        permissions = self._bot_permissions(thread)
        manages = bool(permissions & P_MANAGE_THREADS)
        if any(key != "archived" for key in payload) or payload.get("archived") is True:
            if not manages:
                return _missing_permissions()
        if unarchiving and thread.archived:
            # A locked thread: "only users with MANAGE_THREADS can unarchive it".
            if thread.locked and not manages:
                return _missing_permissions()
            if not permissions & P_SEND_IN_THREADS:
                return _missing_permissions()
        if "name" in payload:
            thread.name = str(payload["name"])
        if "auto_archive_duration" in payload:
            thread.auto_archive_duration = int(duration)  # type: ignore[arg-type]  # checked
        if "locked" in payload:
            thread.locked = bool(payload["locked"])
        if "archived" in payload and bool(payload["archived"]) != thread.archived:
            self.fake.set_archived(thread.id, bool(payload["archived"]))
        else:
            self.fake.thread_updated(thread.id)
        return json_response(self.world.channel_payload(thread.id))

    # -- Delete Channel -----------------------------------------------------------------------

    async def delete_channel(self, request: web.Request) -> web.Response:
        channel = self._channel(request)
        if channel is None:
            return error_response(404, 10003, "Unknown Channel")
        data = self.world.channel_payload(channel.id)
        if channel.type == DM:
            # Closing a DM: the channel stays, and opens again with the next message.
            return json_response(data)
        needed = P_MANAGE_THREADS if channel.is_thread else P_MANAGE_CHANNELS
        if not self._bot_permissions(channel) & needed:
            return _missing_permissions()
        del self.world.channels[channel.id]
        if channel.guild_id is not None and channel.id in (
            ids := self.world.guilds[channel.guild_id].channel_ids
        ):
            ids.remove(channel.id)
        fake = self.fake
        if fake.gateway.connected:
            if channel.is_thread:
                event = "THREAD_DELETE"
                gone: dict[str, Any] = {
                    "id": data["id"],
                    "guild_id": data["guild_id"],
                    "parent_id": data["parent_id"],
                    "type": data["type"],
                }
            else:
                event, gone = "CHANNEL_DELETE", data
            fake._dispatch_later(
                event, gone, fake._client_has(lambda c: c.get_channel(channel.id) is None)
            )
        return json_response(data)

    # -- thread members -----------------------------------------------------------------------

    async def add_thread_member(self, request: web.Request) -> web.Response:
        thread = self._channel(request)
        if thread is None:
            return error_response(404, 10003, "Unknown Channel")
        if not thread.is_thread:
            return error_response(400, 50024, "Cannot execute action on this channel type")
        uid = request.match_info["uid"]
        bot_id = self.world.bot_user.id
        try:
            user_id = bot_id if uid == "@me" else int(uid)
        except ValueError:
            return error_response(404, 10013, "Unknown User")
        assert thread.guild_id is not None
        if user_id not in self.world.guilds[thread.guild_id].members:
            return error_response(404, 10007, "Unknown Member")
        # "Also requires the thread is not archived" (Join Thread, Add Thread Member).
        if thread.archived:
            return _archived()
        permissions = self._bot_permissions(thread)
        # Adding another member "requires the ability to send messages in the thread";
        # joining, the ability to see it.
        needed = P_VIEW_CHANNEL if user_id == bot_id else P_VIEW_CHANNEL | P_SEND_IN_THREADS
        if permissions & needed != needed:
            return _missing_permissions()
        # Discord fires Thread Members Update; discord.py needs the members intent to keep
        # other users' thread members, which Campfire does not ask for, so none is sent.
        thread.members.add(user_id)
        return web.Response(status=204)
