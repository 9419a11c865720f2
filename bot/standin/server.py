"""The stand-in's REST API: the routes discord.py calls, Discord's limits and its rate limits.

One aiohttp application on 127.0.0.1 serves ``/api/v10/...`` (REST), ``/gateway`` (the
WebSocket) and ``/attachments/...`` (uploaded files, so ``Attachment.read()`` works).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from aiohttp import web

from . import limits
from .gateway import INTENT_DM_MESSAGES, INTENT_GUILD_MESSAGES, Gateway
from .interactions import InteractionDriver
from .world import (
    DM,
    FLAG_EPHEMERAL,
    FLAG_LOADING,
    PRIVATE_THREAD,
    PUBLIC_THREAD,
    InteractionRecord,
    MessageRecord,
    World,
)

if TYPE_CHECKING:
    import discord

_log = logging.getLogger(__name__)

API_PREFIX = "/api/v10"
ACK_DEADLINE_S = 3.0
TOKEN_LIFETIME_S = 15 * 60
CHANNEL_LIMIT, CHANNEL_PERIOD = 5, 5.0
GLOBAL_LIMIT, GLOBAL_PERIOD = 50, 1.0
DAILY_COMMAND_CREATES = 200
DAY_S = 86400.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class RequestRecord(NamedTuple):
    method: str
    path: str
    time: float
    status: int


class _FileUpload(NamedTuple):
    index: int
    filename: str
    content: bytes


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # Exactly "application/json", no charset: discord.py compares the header verbatim.
    response = web.Response(body=json.dumps(data).encode(), status=status, headers=headers)
    response.headers["Content-Type"] = "application/json"
    return response


def _error(status: int, code: int, message: str) -> web.Response:
    return _json({"message": message, "code": code}, status=status)


def _bucket_hash(key: str) -> str:
    return hashlib.md5(key.encode()).hexdigest()  # noqa: S324 - an opaque id, not security


class FakeDiscord(InteractionDriver):
    """A Discord stand-in: world state, REST routes, gateway, limits, and interaction drivers."""

    def __init__(self) -> None:
        self.world = World()
        self._clock_offset = 0.0
        # Monotonic seconds for the 3 s acknowledgement and 15 min token rules; tests swap it
        # (or call advance()) to fast-forward. Rate-limit windows use real time, because
        # discord.py sleeps in real time.
        self.clock: Callable[[], float] = self._default_clock
        self.requests: list[RequestRecord] = []
        self.unknown_routes: list[tuple[str, str]] = []
        self.failures: list[str] = []
        self.rate_limited: list[tuple[str, str, float]] = []
        self.client: discord.Client | None = None
        self.commands: dict[int | None, list[dict[str, Any]]] = {}
        self._command_creates: dict[int | None, list[float]] = {}
        self._channel_windows: dict[int, limits.SlidingWindow] = {}
        self._global_window = limits.SlidingWindow(GLOBAL_LIMIT, GLOBAL_PERIOD)
        self._in_flight = 0
        self._last_request = time.monotonic()
        self._runner: web.AppRunner | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._pending_ack: set[int] = set()
        self._tokens: dict[str, InteractionRecord] = {}
        self._command_ids: dict[tuple[str, int | None], int] = {}
        self._pending_dispatch: list[tuple[asyncio.Task[None], Callable[[], bool] | None]] = []
        self.port = 0
        self.gateway = Gateway(self.world, lambda: self.gateway_url)
        self.app = self._build_app()

    # -- clock --------------------------------------------------------------------------------

    def _default_clock(self) -> float:
        return time.monotonic() + self._clock_offset

    def advance(self, seconds: float) -> None:
        """Move the default clock forward (token expiry tests without waiting)."""
        self._clock_offset += seconds

    # -- addresses ----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        return self.base_url + API_PREFIX

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # aiohttp exposes the bound port only through the server
        assert server is not None and server.sockets
        self.port = server.sockets[0].getsockname()[1]
        self.world.base_url = self.base_url
        self._watchdog = asyncio.create_task(self._watch_acks())

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            try:
                await self._watchdog
            except asyncio.CancelledError:
                pass
        await self.gateway.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- world builders (public) ----------------------------------------------------------------

    def add_guild(self, name: str, owner_id: int | None = None) -> int:
        guild = self.world.add_guild(name, owner_id)
        if self.gateway.connected:
            self._dispatch_later(
                "GUILD_CREATE",
                self.world.guild_payload(guild.id),
                self._client_has(
                    lambda c: (g := c.get_guild(guild.id)) is not None and not g.unavailable
                ),
            )
        return guild.id

    def add_text_channel(self, guild_id: int, name: str) -> int:
        channel = self.world.add_text_channel(guild_id, name)
        if self.gateway.connected:
            self._dispatch_later(
                "CHANNEL_CREATE",
                self.world.channel_payload(channel.id),
                self._client_has(lambda c: c.get_channel(channel.id) is not None),
            )
        return channel.id

    def add_user(
        self,
        name: str,
        *,
        member_of: tuple[int, ...] | list[int] = (),
        manage_guild: bool = False,
        user_id: int | None = None,
    ) -> int:
        """A user; ``user_id`` fixes the id (the console keeps one across runs)."""
        user = self.world.add_user(name, user_id=user_id)
        for gid in member_of:
            guild = self.world.guilds[gid]
            guild.members[user.id] = [guild.manager_role_id] if manage_guild else []
            if self.gateway.connected:
                self._dispatch_later(
                    "GUILD_MEMBER_ADD",
                    {**self.world.member_payload(gid, user.id), "guild_id": str(gid)},
                )
        return user.id

    def dm_channel(self, user_id: int, *, channel_id: int | None = None) -> int:
        return self.world.dm_channel(user_id, channel_id=channel_id).id

    def _client_has(self, check: Callable[[Any], bool]) -> Callable[[], bool] | None:
        client = self.client
        if client is None:
            return None
        return lambda: check(client)

    def _dispatch_later(
        self, event: str, data: dict[str, Any], check: Callable[[], bool] | None = None
    ) -> None:
        """Builders are synchronous; their events go out in order, and flush() awaits them."""
        self._pending_dispatch = [
            e for e in self._pending_dispatch if not (e[0].done() and e[1] is None)
        ]
        task = asyncio.get_running_loop().create_task(self.gateway.dispatch(event, data))
        self._pending_dispatch.append((task, check))

    async def flush(self, timeout: float = 2.0) -> None:  # noqa: ASYNC109 - a settle window
        """Wait until events queued by the builders were sent and the client's cache has them."""
        pending = list(self._pending_dispatch)
        deadline = time.monotonic() + timeout
        for entry in pending:
            task, check = entry
            await task
            # The client's cache has no event to wait on; poll it briefly.
            while check is not None and not check() and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
            if entry in self._pending_dispatch:
                self._pending_dispatch.remove(entry)

    async def settle(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - a settle window
        """Wait until ~50 ms pass with no bot request and no event sent to the bot (streamed
        edits have finished, dispatched events were handled)."""
        await self.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            quiet = time.monotonic() - max(self._last_request, self.gateway.last_dispatch)
            if self._in_flight == 0 and quiet >= 0.05:
                return
            await asyncio.sleep(0.01)

    # -- read API -----------------------------------------------------------------------------

    def messages(
        self, channel_id: int, *, include_deleted: bool = False, visible_to: int | None = None
    ) -> list[MessageRecord]:
        """Messages of a channel in order. ``visible_to``: only what that user can see
        (ephemeral messages of others are hidden); without it every message is listed."""
        out = []
        for mid in self.world.channel_messages.get(channel_id, []):
            msg = self.world.messages_by_id[mid]
            if msg.deleted and not include_deleted:
                continue
            if visible_to is not None and msg.visible_to not in (None, visible_to):
                continue
            out.append(msg)
        return out

    def last_message(self, channel_id: int, *, visible_to: int | None = None) -> MessageRecord:
        msgs = self.messages(channel_id, visible_to=visible_to)
        if not msgs:
            raise LookupError(f"no messages in channel {channel_id}")
        return msgs[-1]

    def message(self, message_id: int) -> MessageRecord:
        return self.world.messages_by_id[message_id]

    def threads(self, parent_id: int) -> list[int]:
        return [c.id for c in self.world.channels.values() if c.parent_id == parent_id]

    def attachment_bytes(self, attachment_id: int) -> bytes:
        return self.world.attachments[attachment_id].content

    # -- the application ----------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        r = app.router
        p = API_PREFIX
        r.add_get("/gateway", self.gateway.handle)
        r.add_get("/attachments/{cid}/{aid}/{filename}", self._get_attachment)
        r.add_get(p + "/gateway", self._get_gateway)
        r.add_get(p + "/gateway/bot", self._get_gateway)
        r.add_get(p + "/users/@me", self._get_me)
        r.add_post(p + "/users/@me/channels", self._create_dm)
        r.add_get(p + "/users/{uid}", self._get_user)
        r.add_get(p + "/applications/@me", self._get_application)
        r.add_get(p + "/oauth2/applications/@me", self._get_application)
        r.add_get(p + "/guilds/{gid}", self._get_guild)
        r.add_get(p + "/guilds/{gid}/members/{uid}", self._get_member)
        r.add_get(p + "/channels/{cid}", self._get_channel)
        r.add_post(p + "/channels/{cid}/typing", self._typing)
        r.add_get(p + "/channels/{cid}/messages", self._history)
        r.add_post(p + "/channels/{cid}/messages", self._send_message)
        r.add_post(p + "/channels/{cid}/messages/bulk-delete", self._bulk_delete)
        r.add_get(p + "/channels/{cid}/messages/{mid}", self._get_message)
        r.add_patch(p + "/channels/{cid}/messages/{mid}", self._edit_message)
        r.add_delete(p + "/channels/{cid}/messages/{mid}", self._delete_message)
        r.add_post(p + "/channels/{cid}/threads", self._create_thread)
        r.add_post(p + "/channels/{cid}/messages/{mid}/threads", self._create_thread)
        r.add_get(p + "/applications/{app}/commands", self._get_commands)
        r.add_put(p + "/applications/{app}/commands", self._put_commands)
        r.add_get(p + "/applications/{app}/guilds/{gid}/commands", self._get_commands)
        r.add_put(p + "/applications/{app}/guilds/{gid}/commands", self._put_commands)
        r.add_post(p + "/interactions/{iid}/{token}/callback", self._interaction_callback)
        r.add_post(p + "/webhooks/{app}/{token}", self._webhook_execute)
        r.add_get(p + "/webhooks/{app}/{token}/messages/{mid}", self._webhook_get)
        r.add_patch(p + "/webhooks/{app}/{token}/messages/{mid}", self._webhook_edit)
        r.add_delete(p + "/webhooks/{app}/{token}/messages/{mid}", self._webhook_delete)
        r.add_route("*", "/{tail:.*}", self._unknown)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(API_PREFIX):
            return await handler(request)
        self._in_flight += 1
        method, path = request.method, request.path
        try:
            now = time.monotonic()
            response = self._rate_limit(request, now)
            if response is None:
                response = await handler(request)
                self._add_bucket_headers(request, response, time.monotonic())
            self.requests.append(RequestRecord(method, path, self.clock(), response.status))
            return response
        finally:
            self._in_flight -= 1
            self._last_request = time.monotonic()

    # -- rate limits --------------------------------------------------------------------------

    def _route_template(self, request: web.Request) -> str:
        info = request.match_info.route.resource
        return info.canonical if info is not None else request.path

    def _channel_bucket(self, request: web.Request) -> int | None:
        """Channel id whose shared message window this request counts against, if any."""
        if request.method not in ("POST", "PATCH", "DELETE"):
            return None
        template = self._route_template(request)
        if template in (
            API_PREFIX + "/channels/{cid}/messages",
            API_PREFIX + "/channels/{cid}/messages/{mid}",
        ):
            try:
                return int(request.match_info["cid"])
            except ValueError:
                return None
        return None

    def _rate_limit(self, request: web.Request, now: float) -> web.Response | None:
        retry = self._global_window.try_hit(now)
        scope, limit, bucket = "global", GLOBAL_LIMIT, ""
        if retry is None:
            cid = self._channel_bucket(request)
            if cid is None:
                return None
            window = self._channel_windows.setdefault(
                cid, limits.SlidingWindow(CHANNEL_LIMIT, CHANNEL_PERIOD)
            )
            retry = window.try_hit(now)
            if retry is None:
                return None
            scope, limit = "user", CHANNEL_LIMIT
            bucket = _bucket_hash(f"{request.method} {self._route_template(request)}")
        self.rate_limited.append((request.method, request.path, self.clock()))
        headers = {
            "Retry-After": str(max(1, int(retry + 0.999))),
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset-After": f"{retry:.3f}",
            "X-RateLimit-Reset": f"{time.time() + retry:.3f}",
            "X-RateLimit-Scope": scope,
            # discord.py treats a 429 without Via as a Cloudflare ban; Discord's API sets it.
            "Via": "1.1 google",
        }
        if scope == "global":
            # No bucket header: discord.py would otherwise file every route under "global".
            headers["X-RateLimit-Global"] = "true"
        else:
            headers["X-RateLimit-Bucket"] = bucket
        body = {
            "message": "You are being rate limited.",
            "retry_after": round(retry, 3),
            "global": scope == "global",
        }
        return _json(body, status=429, headers=headers)

    def _add_bucket_headers(
        self, request: web.Request, response: web.StreamResponse, now: float
    ) -> None:
        if response.status == 429 or "X-RateLimit-Limit" in response.headers:
            return
        template = self._route_template(request)
        cid = self._channel_bucket(request)
        if cid is not None:
            window = self._channel_windows[cid]
            limit, remaining, reset_after = (
                CHANNEL_LIMIT,
                window.remaining(now),
                window.reset_after(now),
            )
        else:
            # Other routes: a roomy bucket, so discord.py never needs to wait on them.
            limit, remaining, reset_after = GLOBAL_LIMIT, GLOBAL_LIMIT - 1, 1.0
        response.headers["X-RateLimit-Limit"] = str(limit)
        response.headers["X-RateLimit-Remaining"] = str(remaining)
        response.headers["X-RateLimit-Reset-After"] = f"{max(reset_after, 0.001):.3f}"
        response.headers["X-RateLimit-Reset"] = f"{time.time() + reset_after:.3f}"
        response.headers["X-RateLimit-Bucket"] = _bucket_hash(f"{request.method} {template}")

    # -- helpers ------------------------------------------------------------------------------

    async def _read_body(self, request: web.Request) -> tuple[Any, list[_FileUpload]]:
        """JSON body, or multipart ``payload_json`` + ``files[n]`` as discord.py sends them."""
        if request.content_type.startswith("multipart/"):
            payload: Any = {}
            files: list[_FileUpload] = []
            reader = await request.multipart()
            while True:
                part = await reader.next()
                if part is None:
                    break
                name = getattr(part, "name", None) or ""
                if name == "payload_json":
                    payload = json.loads(await part.text())  # type: ignore[union-attr]
                elif name.startswith("files["):
                    index = int(name[6:-1])
                    content = await part.read(decode=False)  # type: ignore[union-attr]
                    files.append(
                        _FileUpload(index, getattr(part, "filename", None) or name, bytes(content))
                    )
            return payload, files
        if request.can_read_body:
            text = await request.text()
            return (json.loads(text) if text else {}), []
        return {}, []

    def _channel(self, request: web.Request) -> int | None:
        try:
            cid = int(request.match_info["cid"])
        except ValueError:
            return None
        return cid if cid in self.world.channels else None

    def _message_in(self, cid: int, request: web.Request) -> MessageRecord | None:
        try:
            mid = int(request.match_info["mid"])
        except ValueError:
            return None
        msg = self.world.messages_by_id.get(mid)
        if msg is None or msg.channel_id != cid or msg.deleted:
            return None
        return msg

    def _attachments_from(
        self,
        channel_id: int,
        payload: dict[str, Any],
        files: list[_FileUpload],
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

    def _new_message(
        self,
        channel_id: int,
        author_id: int,
        payload: dict[str, Any],
        files: list[_FileUpload],
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
            created=self.clock(),
            visible_to=visible_to,
            interaction_id=interaction_id,
            webhook_id=self.world.application_id if webhook else None,
        )
        msg.attachments = self._attachments_from(channel_id, payload, files)
        self.world.add_message(msg)
        self._announce("MESSAGE_CREATE", msg)
        return msg

    def _apply_edit(
        self, msg: MessageRecord, payload: dict[str, Any], files: list[_FileUpload]
    ) -> web.Response | None:
        """Validate and apply an edit; returns an error response or None."""
        problem = limits.check_message(payload, file_count=len(files), partial=True)
        if problem is not None:
            return _json(problem[1], status=problem[0])
        content = payload["content"] if "content" in payload else msg.content
        embeds = payload["embeds"] if "embeds" in payload else msg.embeds
        components = payload["components"] if "components" in payload else msg.components
        attachments = self._attachments_from(msg.channel_id, payload, files, msg.attachments)
        result = {"content": content, "embeds": embeds, "components": components}
        if not limits.message_has_body(result, len(attachments)):
            return _json(limits.empty_message_body(), status=400)
        msg.content = content or ""
        msg.embeds = list(embeds or [])
        msg.components = list(components or [])
        msg.attachments = attachments
        if "flags" in payload and payload["flags"] is not None:
            # Only SUPPRESS_EMBEDS can change on edit; keep the rest.
            msg.flags = (msg.flags & ~4) | (int(payload["flags"]) & 4)
        msg.flags &= ~FLAG_LOADING
        msg.edits.append((self.clock(), msg.content))
        msg.edited_timestamp = datetime.now(UTC).isoformat()
        self._announce("MESSAGE_UPDATE", msg)
        return None

    def _announce(self, event: str, msg: MessageRecord) -> None:
        """Tell the client about a message as Discord would (never for ephemeral ones)."""
        if msg.visible_to is not None or not self.gateway.connected:
            return
        channel = self.world.channels.get(msg.channel_id)
        intent = INTENT_DM_MESSAGES if channel and channel.type == DM else INTENT_GUILD_MESSAGES
        if not self.gateway.intents & intent:
            return
        if event == "MESSAGE_DELETE":
            data: dict[str, Any] = {"id": str(msg.id), "channel_id": str(msg.channel_id)}
            if channel is not None and channel.guild_id is not None:
                data["guild_id"] = str(channel.guild_id)
        else:
            data = self.world.message_payload(msg)
        self._dispatch_later(event, data)

    # -- basic routes -------------------------------------------------------------------------

    async def _unknown(self, request: web.Request) -> web.Response:
        self.unknown_routes.append((request.method, request.path))
        _log.warning("stand-in: unknown route %s %s", request.method, request.path)
        return _error(404, 0, "404: Not Found")

    async def _get_gateway(self, request: web.Request) -> web.Response:
        return _json(
            {
                "url": self.gateway_url,
                "shards": 1,
                "session_start_limit": {
                    "total": 1000,
                    "remaining": 999,
                    "reset_after": 86400000,
                    "max_concurrency": 1,
                },
            }
        )

    async def _get_me(self, request: web.Request) -> web.Response:
        return _json(
            {
                **self.world.bot_user.payload(),
                "verified": True,
                "mfa_enabled": False,
                "email": None,
                "locale": "en-US",
            }
        )

    async def _get_user(self, request: web.Request) -> web.Response:
        user = self.world.users.get(int(request.match_info["uid"]))
        if user is None:
            return _error(404, 10013, "Unknown User")
        return _json(user.payload())

    async def _get_application(self, request: web.Request) -> web.Response:
        return _json(self.world.application_payload())

    async def _get_guild(self, request: web.Request) -> web.Response:
        gid = int(request.match_info["gid"])
        if gid not in self.world.guilds:
            return _error(404, 10004, "Unknown Guild")
        data = self.world.guild_payload(gid)
        for key in ("members", "channels", "threads", "voice_states", "presences"):
            data.pop(key, None)
        return _json(data)

    async def _get_member(self, request: web.Request) -> web.Response:
        gid, uid = int(request.match_info["gid"]), int(request.match_info["uid"])
        guild = self.world.guilds.get(gid)
        if guild is None:
            return _error(404, 10004, "Unknown Guild")
        if uid not in guild.members:
            return _error(404, 10007, "Unknown Member")
        return _json(self.world.member_payload(gid, uid))

    async def _get_attachment(self, request: web.Request) -> web.Response:
        record = self.world.attachments.get(int(request.match_info["aid"]))
        if record is None:
            return web.Response(status=404, text="not found")
        return web.Response(
            body=record.content, content_type=record.content_type or "application/octet-stream"
        )

    async def _create_dm(self, request: web.Request) -> web.Response:
        body, _ = await self._read_body(request)
        uid = int(body.get("recipient_id", 0))
        if uid not in self.world.users:
            return _error(400, 50007, "Cannot send messages to this user")
        return _json(self.world.channel_payload(self.world.dm_channel(uid).id))

    async def _get_channel(self, request: web.Request) -> web.Response:
        cid = self._channel(request)
        if cid is None:
            return _error(404, 10003, "Unknown Channel")
        return _json(self.world.channel_payload(cid))

    async def _typing(self, request: web.Request) -> web.Response:
        if self._channel(request) is None:
            return _error(404, 10003, "Unknown Channel")
        return web.Response(status=204)

    # -- channel messages ---------------------------------------------------------------------

    async def _send_message(self, request: web.Request) -> web.Response:
        cid = self._channel(request)
        if cid is None:
            return _error(404, 10003, "Unknown Channel")
        payload, files = await self._read_body(request)
        problem = limits.check_message(payload, file_count=len(files))
        if problem is not None:
            return _json(problem[1], status=problem[0])
        flags = int(payload.get("flags") or 0) & ~FLAG_EPHEMERAL  # not settable here
        msg = self._new_message(cid, self.world.bot_user.id, payload, files, flags=flags)
        return _json(self.world.message_payload(msg))

    async def _get_message(self, request: web.Request) -> web.Response:
        cid = self._channel(request)
        if cid is None:
            return _error(404, 10003, "Unknown Channel")
        msg = self._message_in(cid, request)
        if msg is None or msg.visible_to is not None:
            return _error(404, 10008, "Unknown Message")
        return _json(self.world.message_payload(msg))

    async def _edit_message(self, request: web.Request) -> web.Response:
        cid = self._channel(request)
        if cid is None:
            return _error(404, 10003, "Unknown Channel")
        msg = self._message_in(cid, request)
        if msg is None or msg.visible_to is not None:
            return _error(404, 10008, "Unknown Message")
        if msg.author_id != self.world.bot_user.id:
            return _error(403, 50005, "Cannot edit a message authored by another user")
        payload, files = await self._read_body(request)
        error = self._apply_edit(msg, payload, files)
        if error is not None:
            return error
        return _json(self.world.message_payload(msg))

    async def _delete_message(self, request: web.Request) -> web.Response:
        cid = self._channel(request)
        if cid is None:
            return _error(404, 10003, "Unknown Channel")
        msg = self._message_in(cid, request)
        if msg is None or msg.visible_to is not None:
            return _error(404, 10008, "Unknown Message")
        msg.deleted = True
        self._announce("MESSAGE_DELETE", msg)
        return web.Response(status=204)

    async def _bulk_delete(self, request: web.Request) -> web.Response:
        cid = self._channel(request)
        if cid is None:
            return _error(404, 10003, "Unknown Channel")
        body, _ = await self._read_body(request)
        ids = [int(i) for i in body.get("messages") or []]
        if not 2 <= len(ids) <= 100:
            errors = limits.FormErrors()
            errors.add(["messages"], "BASE_TYPE_BAD_LENGTH", "Must be between 2 and 100 in length.")
            return _json(errors.body(), status=400)
        for mid in ids:
            msg = self.world.messages_by_id.get(mid)
            if msg is not None and msg.channel_id == cid and msg.visible_to is None:
                msg.deleted = True
                self._announce("MESSAGE_DELETE", msg)
        return web.Response(status=204)

    async def _history(self, request: web.Request) -> web.Response:
        cid = self._channel(request)
        if cid is None:
            return _error(404, 10003, "Unknown Channel")
        q = request.query
        limit = max(1, min(int(q.get("limit", 50)), 100))
        msgs = [m for m in self.messages(cid) if m.visible_to is None]
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
        return _json([self.world.message_payload(m) for m in reversed(msgs)])  # newest first

    async def _create_thread(self, request: web.Request) -> web.Response:
        cid = self._channel(request)
        if cid is None or self.world.channels[cid].guild_id is None:
            return _error(404, 10003, "Unknown Channel")
        payload, _ = await self._read_body(request)
        name = payload.get("name") or ""
        errors = limits.FormErrors()
        if not 1 <= len(name) <= 100:
            errors.add(["name"], "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
        body = errors.body()
        if body is not None:
            return _json(body, status=400)
        source: MessageRecord | None = None
        if "mid" in request.match_info:
            source = self._message_in(cid, request)
            if source is None:
                return _error(404, 10008, "Unknown Message")
            if source.thread_id is not None:
                return _error(400, 160004, "A thread has already been created for this message")
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
        if self.gateway.connected:
            self._dispatch_later(
                "THREAD_CREATE",
                {**data, "newly_created": True},
                self._client_has(lambda c: c.get_channel(thread.id) is not None),
            )
        await self.flush()
        return _json(data, status=201)

    # -- application commands ---------------------------------------------------------------

    def _scope(self, request: web.Request) -> int | None:
        gid = request.match_info.get("gid")
        return int(gid) if gid is not None else None

    async def _get_commands(self, request: web.Request) -> web.Response:
        return _json(self.commands.get(self._scope(request), []))

    async def _put_commands(self, request: web.Request) -> web.Response:
        scope = self._scope(request)
        if scope is not None and scope not in self.world.guilds:
            return _error(404, 10004, "Unknown Guild")
        body, _ = await self._read_body(request)
        existing = {(c["name"], c.get("type", 1)): c for c in self.commands.get(scope, [])}
        now = self.clock()
        creates = [t for t in self._command_creates.get(scope, []) if now - t < DAY_S]
        new = [c for c in body if (c["name"], c.get("type", 1)) not in existing]
        if len(creates) + len(new) > DAILY_COMMAND_CREATES:
            retry = creates[0] + DAY_S - now if creates else DAY_S
            # No Via header: discord.py raises at once instead of sleeping for hours, which is
            # what a bot sees from Discord for this limit.
            return _json(
                {
                    "message": "Max number of daily application command creates has been reached "
                    f"({DAILY_COMMAND_CREATES})",
                    "code": 30034,
                    "retry_after": round(retry, 3),
                    "global": False,
                },
                status=429,
            )
        stored = []
        for cmd in body:
            key = (cmd["name"], cmd.get("type", 1))
            old = existing.get(key)
            data = {
                "type": 1,
                "description": "",
                "options": [],
                "default_member_permissions": None,
                "nsfw": False,
                "name_localizations": None,
                "description_localizations": None,
                **cmd,
                "id": old["id"] if old else str(self.world.snowflake()),
                "application_id": str(self.world.application_id),
                "version": str(self.world.snowflake()),
            }
            if scope is not None:
                data["guild_id"] = str(scope)
            if old is None:
                creates.append(now)
            stored.append(data)
        self._command_creates[scope] = creates
        self.commands[scope] = stored
        return _json(stored)

    # -- interactions -------------------------------------------------------------------------

    def register_interaction(self, record: InteractionRecord) -> None:
        self.world.interactions[record.id] = record
        self._tokens[record.token] = record
        self._pending_ack.add(record.id)

    def _fail(self, record: InteractionRecord, reason: str) -> None:
        if record.failed is None and record.acknowledged is None:
            record.failed = reason
            self.failures.append(
                f"interaction {record.name or record.type} ({record.id}): {reason}"
            )
            record.done.set()
        self._pending_ack.discard(record.id)

    async def _watch_acks(self) -> None:
        """Marks interactions the bot did not answer within 3 s as failed, as the user sees."""
        while True:
            now = self.clock()
            for iid in list(self._pending_ack):
                rec = self.world.interactions[iid]
                if rec.acknowledged is not None:
                    self._pending_ack.discard(iid)
                elif now - rec.created > ACK_DEADLINE_S:
                    self._fail(rec, "not acknowledged within 3 s (This interaction failed)")
            await asyncio.sleep(0.05)

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        try:
            rec = self.world.interactions.get(int(request.match_info["iid"]))
        except ValueError:
            rec = None
        if rec is None or rec.token != request.match_info["token"]:
            return _error(404, 10062, "Unknown interaction")
        if rec.acknowledged is not None:
            return _error(400, 40060, "Interaction has already been acknowledged.")
        if rec.failed is not None or self.clock() - rec.created > ACK_DEADLINE_S:
            self._fail(rec, "acknowledged after the 3 s deadline")
            return _error(404, 10062, "Unknown interaction")
        body, files = await self._read_body(request)
        rtype = int(body.get("type", 0))
        data = body.get("data") or {}
        message: MessageRecord | None = None
        if rtype == 1:
            pass
        elif rtype == 4:
            problem = limits.check_message(data, file_count=len(files))
            if problem is not None:
                return _json(problem[1], status=problem[0])
            ephemeral = bool(int(data.get("flags") or 0) & FLAG_EPHEMERAL)
            message = self._new_message(
                rec.channel_id,
                self.world.bot_user.id,
                data,
                files,
                flags=int(data.get("flags") or 0),
                visible_to=rec.user_id if ephemeral else None,
                interaction_id=rec.id,
                webhook=True,
            )
            rec.original_message_id = message.id
        elif rtype == 5:
            ephemeral = bool(int(data.get("flags") or 0) & FLAG_EPHEMERAL)
            message = self._new_message(
                rec.channel_id,
                self.world.bot_user.id,
                {},
                [],
                flags=FLAG_LOADING | (FLAG_EPHEMERAL if ephemeral else 0),
                visible_to=rec.user_id if ephemeral else None,
                interaction_id=rec.id,
                webhook=True,
            )
            rec.original_message_id = message.id
        elif rtype in (6, 7):
            if rec.source_message_id is None:
                return _error(400, 50035, "Invalid Form Body")
            rec.original_message_id = rec.source_message_id
            message = self.world.messages_by_id[rec.source_message_id]
            if rtype == 7:
                error = self._apply_edit(message, data, files)
                if error is not None:
                    return error
        elif rtype == 8:
            if rec.type != 4:
                return _error(400, 50035, "Invalid Form Body")
            rec.choices = list(data.get("choices") or [])
        elif rtype == 9:
            if rec.type == 5:
                return _error(400, 50035, "Invalid Form Body")
            problem = limits.check_modal(data)
            if problem is not None:
                return _json(problem[1], status=problem[0])
            rec.modal = data
        else:
            return _error(400, 50035, "Invalid Form Body")
        rec.acknowledged = self.clock()
        rec.response_type = rtype
        rec.response_data = data
        self._pending_ack.discard(rec.id)
        rec.done.set()
        if request.query.get("with_response") not in ("1", "true", "True"):
            return web.Response(status=204)
        interaction: dict[str, Any] = {"id": str(rec.id), "type": rec.type}
        resource: dict[str, Any] = {"type": rtype}
        if message is not None:
            interaction["response_message_id"] = str(message.id)
            interaction["response_message_loading"] = rtype == 5
            interaction["response_message_ephemeral"] = message.ephemeral
            if rtype in (4, 5, 7):
                resource["message"] = self.world.message_payload(message)
        return _json({"interaction": interaction, "resource": resource})

    def _webhook_interaction(
        self, request: web.Request
    ) -> tuple[InteractionRecord | None, web.Response | None]:
        rec = self._tokens.get(request.match_info["token"])
        if rec is None or request.match_info["app"] != str(self.world.application_id):
            return None, _error(404, 10015, "Unknown Webhook")
        if self.clock() - rec.created > TOKEN_LIFETIME_S:
            return None, _error(401, 50027, "Invalid Webhook Token")
        if rec.acknowledged is None:
            return None, _error(404, 10015, "Unknown Webhook")
        return rec, None

    def _webhook_target(self, rec: InteractionRecord, mid: str) -> MessageRecord | None:
        if mid == "@original":
            target = rec.original_message_id
        else:
            try:
                target = int(mid)
            except ValueError:
                return None
            if target not in rec.followups and target != rec.original_message_id:
                return None
        msg = self.world.messages_by_id.get(target) if target is not None else None
        return None if msg is None or msg.deleted else msg

    async def _webhook_execute(self, request: web.Request) -> web.Response:
        rec, error = self._webhook_interaction(request)
        if rec is None:
            assert error is not None
            return error
        payload, files = await self._read_body(request)
        original = (
            self.world.messages_by_id.get(rec.original_message_id)
            if rec.original_message_id is not None
            else None
        )
        if original is not None and rec.response_type == 5 and original.flags & FLAG_LOADING:
            # The first followup after a "thinking" defer replaces the loading message, and
            # keeps the defer's ephemerality, as on Discord.
            problem = limits.check_message(payload, file_count=len(files))
            if problem is not None:
                return _json(problem[1], status=problem[0])
            error = self._apply_edit(original, payload, files)
            if error is not None:
                return error
            original.edits.clear()
            original.edited_timestamp = None
            msg = original
        else:
            problem = limits.check_message(payload, file_count=len(files))
            if problem is not None:
                return _json(problem[1], status=problem[0])
            flags = int(payload.get("flags") or 0)
            ephemeral = bool(flags & FLAG_EPHEMERAL)
            msg = self._new_message(
                rec.channel_id,
                self.world.bot_user.id,
                payload,
                files,
                flags=flags,
                visible_to=rec.user_id if ephemeral else None,
                interaction_id=rec.id,
                webhook=True,
            )
        rec.followups.append(msg.id)
        if request.query.get("wait") in ("1", "true", "True"):
            return _json(self.world.message_payload(msg))
        return web.Response(status=204)

    async def _webhook_get(self, request: web.Request) -> web.Response:
        rec, error = self._webhook_interaction(request)
        if rec is None:
            assert error is not None
            return error
        msg = self._webhook_target(rec, request.match_info["mid"])
        if msg is None:
            return _error(404, 10008, "Unknown Message")
        return _json(self.world.message_payload(msg))

    async def _webhook_edit(self, request: web.Request) -> web.Response:
        rec, error = self._webhook_interaction(request)
        if rec is None:
            assert error is not None
            return error
        msg = self._webhook_target(rec, request.match_info["mid"])
        if msg is None:
            return _error(404, 10008, "Unknown Message")
        payload, files = await self._read_body(request)
        error = self._apply_edit(msg, payload, files)
        if error is not None:
            return error
        return _json(self.world.message_payload(msg))

    async def _webhook_delete(self, request: web.Request) -> web.Response:
        rec, error = self._webhook_interaction(request)
        if rec is None:
            assert error is not None
            return error
        msg = self._webhook_target(rec, request.match_info["mid"])
        if msg is None:
            return _error(404, 10008, "Unknown Message")
        msg.deleted = True
        self._announce("MESSAGE_DELETE", msg)
        return web.Response(status=204)
