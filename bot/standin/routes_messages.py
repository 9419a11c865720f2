"""Channel, message, thread and DM routes, and the message create / edit logic they share with
the interaction routes (every message the bot makes goes through ``new_message`` /
``apply_edit`` / ``announce``; every edit route asks ``old_message_refusal`` first). A create
with ``enforce_nonce`` returns the message its nonce already made (``nonces``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import limits
from .permissions import (
    P_ATTACH_FILES,
    P_CREATE_PRIVATE_THREADS,
    P_CREATE_PUBLIC_THREADS,
    P_EMBED_LINKS,
    P_MANAGE_MESSAGES,
    P_READ_HISTORY,
    P_SEND_IN_THREADS,
    P_SEND_MESSAGES,
    P_VIEW_CHANNEL,
)
from .ratelimits import limit_reached_headers
from .records import (
    ANNOUNCEMENT_THREAD,
    DM,
    FLAG_EPHEMERAL,
    FLAG_LOADING,
    GUILD_ANNOUNCEMENT,
    GUILD_TEXT,
    PRIVATE_THREAD,
    PUBLIC_THREAD,
    MessageRecord,
)
from .rest import FileUpload, error_response, json_response, read_body

#: Which threads each channel type may hold, started from the API (discord-api-docs, Threads:
#: "GUILD_TEXT channels create PUBLIC_THREAD and GUILD_ANNOUNCEMENT channels create
#: ANNOUNCEMENT_THREAD"; private threads "can only be created in GUILD_TEXT channels"). A
#: forum or media channel takes its threads with a first message (Start Thread in Forum or
#: Media Channel), which the bot never starts; voice and stage chats hold none.
THREAD_TYPES_IN = {
    GUILD_TEXT: (PUBLIC_THREAD, PRIVATE_THREAD),
    GUILD_ANNOUNCEMENT: (ANNOUNCEMENT_THREAD,),
}

if TYPE_CHECKING:
    from .host import StandinHost


# "If true and nonce is present, it will be checked for uniqueness in the past few minutes. If
# another message was created by the same author with the same nonce, that message will be
# returned and no new message will be created" (Message, Create Message, enforce_nonce). "A few
# minutes" is no number: the stand-in keeps a nonce two minutes, the short end, so a bot that
# counts on it for longer sends a duplicate here.
NONCE_WINDOW_S = 120.0


class MessageRoutes:
    def __init__(self, fake: StandinHost) -> None:
        self.fake = fake
        self.world = fake.world
        self.old_message_edits = limits.OldMessageEdits()
        #: (author id, nonce) -> (clock time, message id) of creates with ``enforce_nonce``.
        self.nonces: dict[tuple[int, str], tuple[float, int]] = {}

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

    # -- the bot's permissions ----------------------------------------------------------------

    def send_right(self, cid: int) -> int:
        """The permission that lets the bot post in ``cid``: in a thread Send Messages in
        Threads, as "the SEND_MESSAGES permission has no effect in threads" (discord-api-docs,
        Threads)."""
        return P_SEND_IN_THREADS if self.world.channels[cid].is_thread else P_SEND_MESSAGES

    def content_rights(self, payload: dict[str, Any], files: list[FileUpload]) -> int:
        """What a message body takes beyond posting: Embed Links for embeds, Attach Files for
        uploads (discord-api-docs, Permissions, Bitwise Permission Flags). The docs do not say
        what a bot sending an embed without Embed Links gets; the stand-in refuses it (50013),
        the stricter answer."""
        rights = (P_EMBED_LINKS if payload.get("embeds") else 0) | (P_ATTACH_FILES if files else 0)
        if payload.get("message_reference"):
            # "When sending a message with message_reference, the current user must have the
            # READ_MESSAGE_HISTORY permission" (discord-api-docs, Message, Create Message:
            # Limitations); a channel message only (an interaction's answer is no reply).
            rights |= P_READ_HISTORY
        return rights

    def refusal(self, cid: int, needs: int = 0, *, sending: bool = False) -> web.Response | None:
        """Discord's 403 for a request of the bot in ``cid`` that takes ``needs``, or None.

        Without View Channel Discord answers 50001 Missing Access, otherwise 50013 Missing
        Permissions (discord-api-docs, Opcodes and Status Codes, JSON Error Codes). In a DM no
        permission is missing, but a closed one refuses the bot's messages: 50007 Cannot send
        messages to this user.
        """
        channel = self.world.channels[cid]
        if channel.type == DM:
            if sending and channel.recipient_id in self.world.closed_dms:
                return error_response(403, 50007, "Cannot send messages to this user")
            return None
        perms = self.world.permissions_in(cid, self.world.bot_user.id)
        if not perms & P_VIEW_CHANNEL:
            return error_response(403, 50001, "Missing Access")
        if perms & needs != needs:
            return error_response(403, 50013, "Missing Permissions")
        return None

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
        if self.world.thread_archived(msg.channel_id) or (
            msg.visible_to is None and self.world.thread_locked_to_bot(msg.channel_id)
        ):
            return error_response(400, 50083, "Thread is archived")
        problem = limits.check_message(payload, files, partial=True)
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

    def old_message_refusal(self, request: web.Request, msg: MessageRecord) -> web.Response | None:
        """30046 for an edit of a message older than an hour beyond Discord's allowance (see
        ``limits.OldMessageEdits``), with the rate-limit headers and ``Via`` Discord sends on
        it, so that discord.py sleeps ``retry_after`` and retries, as it does on Discord
        (aikaterna-cogs issue 302 shows the 429 reaching a bot as a rate limit). Asked by the
        edit routes; an interaction's UPDATE_MESSAGE answer is the interaction's response, not
        an edit of an old message, and is not counted (the docs say nothing of it)."""
        problem = self.old_message_edits.check(msg.channel_id, msg.created, self.fake.clock())
        if problem is None:
            return None
        status, body = problem
        headers = limit_reached_headers(request, body["retry_after"])
        return json_response(body, status=status, headers=headers)

    def _nonce_message(self, payload: dict[str, Any]) -> MessageRecord | None:
        """The bot's message an ``enforce_nonce`` create already made with this nonce."""
        nonce = payload.get("nonce")
        if nonce is None or not payload.get("enforce_nonce"):
            return None
        now = self.fake.clock()
        self.nonces = {k: v for k, v in self.nonces.items() if now - v[0] < NONCE_WINDOW_S}
        seen = self.nonces.get((self.world.bot_user.id, str(nonce)))
        msg = self.world.messages_by_id.get(seen[1]) if seen is not None else None
        return None if msg is None or msg.deleted else msg

    def _remember_nonce(self, payload: dict[str, Any], msg: MessageRecord) -> None:
        if payload.get("nonce") is not None and payload.get("enforce_nonce"):
            key = (msg.author_id, str(payload["nonce"]))
            self.nonces[key] = (self.fake.clock(), msg.id)

    def announce(self, event: str, msg: MessageRecord) -> None:
        """Tell the client about a message as Discord would (never for ephemeral ones)."""
        gateway = self.fake.gateway
        if msg.visible_to is not None or not gateway.connected:
            return
        channel = self.world.channels.get(msg.channel_id)
        if event == "MESSAGE_DELETE":
            data: dict[str, Any] = {"id": str(msg.id), "channel_id": str(msg.channel_id)}
            if channel is not None and channel.guild_id is not None:
                data["guild_id"] = str(channel.guild_id)
        else:
            data = self.world.message_payload(msg)
        # The gateway sends it only to a client subscribed to the channel's message intent.
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
        refused = self.refusal(cid)
        if refused is not None:
            return refused
        return json_response(self.world.channel_payload(cid))

    async def typing(self, request: web.Request) -> web.Response:
        cid = self.channel(request)
        if cid is None:
            return error_response(404, 10003, "Unknown Channel")
        refused = self.refusal(cid, self.send_right(cid), sending=True)
        if refused is not None:
            return refused
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
        # "When operating on a guild channel, the current user must have the SEND_MESSAGES
        # permission" (discord-api-docs, Message, Create Message: Limitations).
        needs = self.send_right(cid) | self.content_rights(payload, files)
        refused = self.refusal(cid, needs, sending=True)
        if refused is not None:
            return refused
        problem = limits.check_message(payload, files)
        if problem is not None:
            return json_response(problem[1], status=problem[0])
        earlier = self._nonce_message(payload)
        if earlier is not None:
            return json_response({**self.world.message_payload(earlier), "nonce": payload["nonce"]})
        channel = self.world.channels[cid]
        if self.world.thread_locked_to_bot(cid):
            return error_response(400, 50083, "Thread is archived")
        if channel.archived:
            # "Sending a message will automatically unarchive the thread, unless the thread
            # has been locked by a moderator" (discord-api-docs, Threads).
            if channel.locked:
                return error_response(400, 50083, "Thread is archived")
            self.fake.set_archived(cid, False)
        flags = int(payload.get("flags") or 0) & ~FLAG_EPHEMERAL  # not settable here
        msg = self.new_message(cid, self.world.bot_user.id, payload, files, flags=flags)
        self._remember_nonce(payload, msg)
        data = self.world.message_payload(msg)
        if payload.get("nonce") is not None:
            data["nonce"] = payload["nonce"]
        return json_response(data)

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
        # "requires the current user to have the VIEW_CHANNEL and READ_MESSAGE_HISTORY
        # permissions" (discord-api-docs, Message, Get Channel Message).
        refused = self.refusal(msg.channel_id, P_READ_HISTORY)
        if refused is not None:
            return refused
        return json_response(self.world.message_payload(msg))

    async def edit_message(self, request: web.Request) -> web.Response:
        msg = self._visible_message(request)
        if isinstance(msg, web.Response):
            return msg
        # "The fields content, embeds, flags and components can be edited by the original
        # message author" (discord-api-docs, Message, "Edit Message"). An interaction's
        # response is the bot user's message, so this route edits it too, with no token and no
        # 15-minute limit; an ephemeral one is unknown here (10008, ``_visible_message``).
        payload, files = await read_body(request)
        # The docs name no permission for editing one's own message beyond seeing the channel
        # (Message, Edit Message); the stand-in asks for the right to post there too, the
        # stricter answer, so a bot that stops at its first refusal is safe on either.
        needs = self.send_right(msg.channel_id) | self.content_rights(payload, files)
        refused = self.refusal(msg.channel_id, needs)
        if refused is not None:
            return refused
        if msg.author_id != self.world.bot_user.id:
            return error_response(403, 50005, "Cannot edit a message authored by another user")
        error = self.old_message_refusal(request, msg) or self.apply_edit(msg, payload, files)
        if error is not None:
            return error
        return json_response(self.world.message_payload(msg))

    async def delete_message(self, request: web.Request) -> web.Response:
        msg = self._visible_message(request)
        if isinstance(msg, web.Response):
            return msg
        # Another's message takes Manage Messages (discord-api-docs, Message, Delete Message).
        others = msg.author_id != self.world.bot_user.id
        refused = self.refusal(msg.channel_id, P_MANAGE_MESSAGES if others else 0)
        if refused is not None:
            return refused
        msg.deleted = True
        self.announce("MESSAGE_DELETE", msg)
        return web.Response(status=204)

    async def bulk_delete(self, request: web.Request) -> web.Response:
        cid = self.channel(request)
        if cid is None:
            return error_response(404, 10003, "Unknown Channel")
        # "requires the MANAGE_MESSAGES permission" (discord-api-docs, Message, Bulk Delete).
        refused = self.refusal(cid, P_MANAGE_MESSAGES)
        if refused is not None:
            return refused
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
        refused = self.refusal(cid)
        if refused is not None:
            return refused
        q = request.query
        limit = max(1, min(int(q.get("limit", 50)), 100))
        msgs = [m for m in self.fake.messages(cid) if m.visible_to is None]
        if self.refusal(cid, P_READ_HISTORY) is not None:
            # "If the current user is missing the READ_MESSAGE_HISTORY permission in the
            # channel, then no messages will be returned" (Message, Get Channel Messages).
            msgs = []
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
        parent = self.world.channels[cid]
        source: MessageRecord | None = None
        if "mid" in request.match_info:
            source = self.message_in(cid, request)
            if source is None:
                return error_response(404, 10008, "Unknown Message")
            if source.thread_id is not None:
                return error_response(
                    400, 160004, "A thread has already been created for this message"
                )
        allowed = THREAD_TYPES_IN.get(parent.type, ())
        if source is not None:
            # From a message, the thread's type follows its channel's.
            kind = allowed[0] if allowed else PUBLIC_THREAD
        else:
            # "type currently defaults to PRIVATE_THREAD" (Start Thread without Message).
            kind = int(payload.get("type") or PRIVATE_THREAD)
        if kind not in allowed:
            return error_response(400, 50024, "Cannot execute action on this channel type")
        # "CREATE_PUBLIC_THREADS: Allows for creating public and announcement threads", and
        # CREATE_PRIVATE_THREADS the private ones (discord-api-docs, Permissions).
        create = P_CREATE_PRIVATE_THREADS if kind == PRIVATE_THREAD else P_CREATE_PUBLIC_THREADS
        refused = self.refusal(cid, create)
        if refused is not None:
            return refused
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
