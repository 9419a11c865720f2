"""Channel, message, thread and DM routes, and the message create / edit logic they share with
the interaction routes (every message the bot makes goes through ``new_message`` /
``apply_edit`` / ``announce``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import limits
from .gateway import INTENT_DM_MESSAGES, INTENT_GUILD_MESSAGES
from .rest import FileUpload, error_response, json_response, read_body
from .world import DM, FLAG_EPHEMERAL, FLAG_LOADING, PRIVATE_THREAD, PUBLIC_THREAD, MessageRecord

if TYPE_CHECKING:
    from .server import FakeDiscord


class MessageRoutes:
    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.world = fake.world

    # -- lookups ------------------------------------------------------------------------------

    def channel(self, request: web.Request) -> int | None:
        try:
            cid = int(request.match_info["cid"])
        except ValueError:
            return None
        return cid if cid in self.world.channels else None

    def message_in(self, cid: int, request: web.Request) -> MessageRecord | None:
        try:
            mid = int(request.match_info["mid"])
        except ValueError:
            return None
        msg = self.world.messages_by_id.get(mid)
        if msg is None or msg.channel_id != cid or msg.deleted:
            return None
        return msg

    # -- creating, editing, announcing --------------------------------------------------------

    def _attachments_from(
        self,
        channel_id: int,
        payload: dict[str, Any],
        files: list[FileUpload],
        existing: list[Any] | None = None,
    ) -> list[Any]:
        """New attachments from uploaded files, plus existing ones the payload keeps."""
        meta = {str(a.get("id")): a for a in payload.get("attachments") or []}
        kept = []
        if existing is not None:
            if "attachments" in payload:
                kept = [a for a in existing if str(a.id) in meta]
            else:
                kept = list(existing)
        for upload in sorted(files, key=lambda f: f.index):
            info = meta.get(str(upload.index), {})
            kept.append(
                self.world.add_attachment(
                    channel_id,
                    info.get("filename") or upload.filename,
                    upload.content,
                    info.get("description"),
                )
            )
        return kept

    def new_message(
        self,
        channel_id: int,
        author_id: int,
        payload: dict[str, Any],
        files: list[FileUpload],
        *,
        flags: int = 0,
        visible_to: int | None = None,
        interaction_id: int | None = None,
        webhook: bool = False,
    ) -> MessageRecord:
        msg = MessageRecord(
            id=self.world.snowflake(),
            channel_id=channel_id,
            author_id=author_id,
            content=payload.get("content") or "",
            embeds=list(payload.get("embeds") or []),
            components=list(payload.get("components") or []),
            flags=flags,
            created=self.fake.clock(),
            visible_to=visible_to,
            interaction_id=interaction_id,
            webhook_id=self.world.application_id if webhook else None,
        )
        msg.attachments = self._attachments_from(channel_id, payload, files)
        self.world.add_message(msg)
        self.announce("MESSAGE_CREATE", msg)
        return msg

    def apply_edit(
        self, msg: MessageRecord, payload: dict[str, Any], files: list[FileUpload]
    ) -> web.Response | None:
        """Validate and apply an edit; returns an error response or None."""
        problem = limits.check_message(payload, file_count=len(files), partial=True)
        if problem is not None:
            return json_response(problem[1], status=problem[0])
        content = payload["content"] if "content" in payload else msg.content
        embeds = payload["embeds"] if "embeds" in payload else msg.embeds
        components = payload["components"] if "components" in payload else msg.components
        attachments = self._attachments_from(msg.channel_id, payload, files, msg.attachments)
        result = {"content": content, "embeds": embeds, "components": components}
        if not limits.message_has_body(result, len(attachments)):
            return json_response(limits.empty_message_body(), status=400)
        msg.content = content or ""
        msg.embeds = list(embeds or [])
        msg.components = list(components or [])
        msg.attachments = attachments
        if "flags" in payload and payload["flags"] is not None:
            # Only SUPPRESS_EMBEDS can change on edit; keep the rest.
            msg.flags = (msg.flags & ~4) | (int(payload["flags"]) & 4)
        msg.flags &= ~FLAG_LOADING
        msg.edits.append((self.fake.clock(), msg.content))
        msg.edited_timestamp = datetime.now(UTC).isoformat()
        self.announce("MESSAGE_UPDATE", msg)
        return None

    def announce(self, event: str, msg: MessageRecord) -> None:
        """Tell the client about a message as Discord would (never for ephemeral ones)."""
        gateway = self.fake.gateway
        if msg.visible_to is not None or not gateway.connected:
            return
        channel = self.world.channels.get(msg.channel_id)
        intent = INTENT_DM_MESSAGES if channel and channel.type == DM else INTENT_GUILD_MESSAGES
        if not gateway.intents & intent:
            return
        if event == "MESSAGE_DELETE":
            data: dict[str, Any] = {"id": str(msg.id), "channel_id": str(msg.channel_id)}
            if channel is not None and channel.guild_id is not None:
                data["guild_id"] = str(channel.guild_id)
        else:
            data = self.world.message_payload(msg)
        self.fake._dispatch_later(event, data)

    # -- channels, DMs, attachments -----------------------------------------------------------

    async def create_dm(self, request: web.Request) -> web.Response:
        body, _ = await read_body(request)
        uid = int(body.get("recipient_id", 0))
        if uid not in self.world.users:
            return error_response(400, 50007, "Cannot send messages to this user")
        return json_response(self.world.channel_payload(self.world.dm_channel(uid).id))

    async def get_channel(self, request: web.Request) -> web.Response:
        cid = self.channel(request)
        if cid is None:
            return error_response(404, 10003, "Unknown Channel")
        return json_response(self.world.channel_payload(cid))

    async def typing(self, request: web.Request) -> web.Response:
        if self.channel(request) is None:
            return error_response(404, 10003, "Unknown Channel")
        return web.Response(status=204)

    async def get_attachment(self, request: web.Request) -> web.Response:
        record = self.world.attachments.get(int(request.match_info["aid"]))
        if record is None:
            return web.Response(status=404, text="not found")
        return web.Response(
            body=record.content, content_type=record.content_type or "application/octet-stream"
        )

    # -- channel messages ---------------------------------------------------------------------

    async def send_message(self, request: web.Request) -> web.Response:
        cid = self.channel(request)
        if cid is None:
            return error_response(404, 10003, "Unknown Channel")
        payload, files = await read_body(request)
        problem = limits.check_message(payload, file_count=len(files))
        if problem is not None:
            return json_response(problem[1], status=problem[0])
        channel = self.world.channels[cid]
        if channel.archived:
            # "Sending a message will automatically unarchive the thread, unless the thread
            # has been locked by a moderator" (discord-api-docs, Threads).
            if channel.locked:
                return error_response(400, 50083, "Thread is archived")
            self.fake.set_archived(cid, False)
        flags = int(payload.get("flags") or 0) & ~FLAG_EPHEMERAL  # not settable here
        msg = self.new_message(cid, self.world.bot_user.id, payload, files, flags=flags)
        return json_response(self.world.message_payload(msg))

    def _visible_message(self, request: web.Request) -> MessageRecord | web.Response:
        """The non-ephemeral message a ``/channels/{cid}/messages/{mid}`` route names, or the
        error Discord answers."""
        cid = self.channel(request)
        if cid is None:
            return error_response(404, 10003, "Unknown Channel")
        msg = self.message_in(cid, request)
        if msg is None or msg.visible_to is not None:
            return error_response(404, 10008, "Unknown Message")
        return msg

    async def get_message(self, request: web.Request) -> web.Response:
        msg = self._visible_message(request)
        if isinstance(msg, web.Response):
            return msg
        return json_response(self.world.message_payload(msg))

    async def edit_message(self, request: web.Request) -> web.Response:
        msg = self._visible_message(request)
        if isinstance(msg, web.Response):
            return msg
        # "The fields content, embeds, flags and components can be edited by the original
        # message author" (discord-api-docs, Message, "Edit Message"). An interaction's
        # response is the bot user's message, so this route edits it too, with no token and no
        # 15-minute limit; an ephemeral one is unknown here (10008, ``_visible_message``).
        if msg.author_id != self.world.bot_user.id:
            return error_response(403, 50005, "Cannot edit a message authored by another user")
        payload, files = await read_body(request)
        error = self.apply_edit(msg, payload, files)
        if error is not None:
            return error
        return json_response(self.world.message_payload(msg))

    async def delete_message(self, request: web.Request) -> web.Response:
        msg = self._visible_message(request)
        if isinstance(msg, web.Response):
            return msg
        msg.deleted = True
        self.announce("MESSAGE_DELETE", msg)
        return web.Response(status=204)

    async def bulk_delete(self, request: web.Request) -> web.Response:
        cid = self.channel(request)
        if cid is None:
            return error_response(404, 10003, "Unknown Channel")
        body, _ = await read_body(request)
        ids = [int(i) for i in body.get("messages") or []]
        if not 2 <= len(ids) <= 100:
            errors = limits.FormErrors()
            errors.add(["messages"], "BASE_TYPE_BAD_LENGTH", "Must be between 2 and 100 in length.")
            return json_response(errors.body(), status=400)
        for mid in ids:
            msg = self.world.messages_by_id.get(mid)
            if msg is not None and msg.channel_id == cid and msg.visible_to is None:
                msg.deleted = True
                self.announce("MESSAGE_DELETE", msg)
        return web.Response(status=204)

    async def history(self, request: web.Request) -> web.Response:
        cid = self.channel(request)
        if cid is None:
            return error_response(404, 10003, "Unknown Channel")
        q = request.query
        limit = max(1, min(int(q.get("limit", 50)), 100))
        msgs = [m for m in self.fake.messages(cid) if m.visible_to is None]
        if "before" in q:
            msgs = [m for m in msgs if m.id < int(q["before"])]
        if "after" in q:
            msgs = [m for m in msgs if m.id > int(q["after"])]
            msgs = msgs[:limit]  # the oldest ones after the id
        if "around" in q:
            around = int(q["around"])
            older = [m for m in msgs if m.id <= around][-(limit // 2 + 1) :]
            newer = [m for m in msgs if m.id > around][: limit - len(older)]
            msgs = older + newer
        msgs = msgs[-limit:]
        # Newest first.
        return json_response([self.world.message_payload(m) for m in reversed(msgs)])

    # -- threads ------------------------------------------------------------------------------

    async def create_thread(self, request: web.Request) -> web.Response:
        cid = self.channel(request)
        if cid is None or self.world.channels[cid].guild_id is None:
            return error_response(404, 10003, "Unknown Channel")
        payload, _ = await read_body(request)
        name = payload.get("name") or ""
        errors = limits.FormErrors()
        if not 1 <= len(name) <= 100:
            errors.add(["name"], "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
        body = errors.body()
        if body is not None:
            return json_response(body, status=400)
        source: MessageRecord | None = None
        if "mid" in request.match_info:
            source = self.message_in(cid, request)
            if source is None:
                return error_response(404, 10008, "Unknown Message")
            if source.thread_id is not None:
                return error_response(
                    400, 160004, "A thread has already been created for this message"
                )
        kind = int(payload.get("type") or (PUBLIC_THREAD if source else PRIVATE_THREAD))
        thread = self.world.add_thread(
            cid,
            name,
            self.world.bot_user.id,
            # A thread started from a message shares the message's id, as on Discord.
            thread_id=source.id if source else None,
            type=kind,
        )
        if source is not None:
            source.thread_id = thread.id
        data = self.world.channel_payload(thread.id)
        fake = self.fake
        if fake.gateway.connected:
            fake._dispatch_later(
                "THREAD_CREATE",
                {**data, "newly_created": True},
                fake._client_has(lambda c: c.get_channel(thread.id) is not None),
            )
        await fake.flush()
        return json_response(data, status=201)
