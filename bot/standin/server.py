"""The stand-in's REST API: the routes discord.py calls, Discord's limits and its rate limits.

One aiohttp application on 127.0.0.1 serves ``/api/v10/...`` (REST), ``/gateway`` (the
WebSocket) and ``/attachments/...`` (uploaded files, so ``Attachment.read()`` works).

``FakeDiscord`` owns the lifecycle, the route table, request accounting and rate limiting
(``ratelimits``), the world builders and the read API; the routes themselves live in
``routes_messages``, ``routes_channels``, ``routes_interactions`` and ``routes_commands``, and
the user-side actions in ``interactions.InteractionDriver``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from aiohttp import web

from .faults import Faults
from .gateway import Gateway
from .interactions import InteractionDriver
from .ratelimits import CHANNEL_LIMIT, CHANNEL_PERIOD, GLOBAL_LIMIT, GLOBAL_PERIOD, RateLimiter
from .records import GUILD_TEXT, PRIVATE_THREAD, InteractionRecord, MessageRecord
from .rest import API_PREFIX, Handler, error_response
from .routes_channels import ChannelRoutes
from .routes_commands import DAILY_COMMAND_CREATES, DAY_S, CommandRoutes
from .routes_interactions import ACK_DEADLINE_S, TOKEN_LIFETIME_S, InteractionRoutes
from .routes_messages import MessageRoutes
from .world import World

if TYPE_CHECKING:
    import discord

__all__ = [
    "ACK_DEADLINE_S",
    "API_PREFIX",
    "CHANNEL_LIMIT",
    "CHANNEL_PERIOD",
    "DAILY_COMMAND_CREATES",
    "DAY_S",
    "GLOBAL_LIMIT",
    "GLOBAL_PERIOD",
    "TOKEN_LIFETIME_S",
    "FakeDiscord",
    "Handler",
    "Refusal",
    "RequestRecord",
]

_log = logging.getLogger(__name__)


def _code_of(response: web.StreamResponse) -> int:
    """Discord's JSON error code in a refusal's body (0 if it has none)."""
    body = getattr(response, "body", None)
    if not isinstance(body, bytes | bytearray):
        return 0
    try:
        data = json.loads(body)
    except ValueError:
        return 0
    code = data.get("code") if isinstance(data, dict) else None
    return code if isinstance(code, int) else 0


class RequestRecord(NamedTuple):
    method: str
    path: str
    time: float
    status: int


class Refusal(NamedTuple):
    """A request the stand-in refused with a 4xx other than a pacing 429 (Discord's JSON error
    code, 0 when the body has none, e.g. an unknown route)."""

    method: str
    path: str
    status: int
    code: int


class FakeDiscord(InteractionDriver):
    """A Discord stand-in: world state, REST routes, gateway, limits, and interaction drivers."""

    def __init__(self, *, channel_period: float = CHANNEL_PERIOD) -> None:
        """``channel_period``: the per-channel message window (``ratelimits.RateLimiter``)."""
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
        #: Every 4xx the stand-in answered but a pacing 429 (one without a JSON error code), and
        #: the codes a test provokes on purpose:
        #: Discord counts 401, 403 and 429 answers towards its invalid-request limit (10,000 in
        #: 10 minutes, then a temporary ban), so a refusal nobody expected is a bug.
        self.refused: list[Refusal] = []
        self.expected_codes: set[int] = set()
        #: Failures to inject (none unless a test asks): ``fake.faults.fail_edits(...)``.
        self.faults = Faults()
        self.client: discord.Client | None = None
        self.commands: dict[int | None, list[dict[str, Any]]] = {}
        self._limiter = RateLimiter(channel_period)
        self._in_flight = 0
        self._last_request = time.monotonic()
        self._runner: web.AppRunner | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._command_ids: dict[tuple[str, int | None], int] = {}
        self._pending_dispatch: list[tuple[asyncio.Task[None], Callable[[], bool] | None]] = []
        self.port = 0
        self.gateway = Gateway(self.world, lambda: self.gateway_url)
        self._message_routes = MessageRoutes(self)
        self._interaction_routes = InteractionRoutes(self, self._message_routes)
        self.faults.channel_of_token = self._interaction_routes.channel_of_token
        self._command_routes = CommandRoutes(self)
        self._channel_routes = ChannelRoutes(self)
        self.app = self._build_app()

    # -- clock --------------------------------------------------------------------------------

    def _default_clock(self) -> float:
        return time.monotonic() + self._clock_offset

    def forgive_own_starvation(self) -> None:
        """Forgive at the 3 s deadline the event loop's wait for a CPU even where the bot's own
        work caused it (``starvation``): the console's choice, on a player's machine."""
        self._interaction_routes.starved.counts_own_work = False

    def expect(self, *codes: int) -> None:
        """Discord error codes this test provokes on purpose (e.g. 50013 Missing Permissions):
        refusals with them are not counted as unexpected."""
        self.expected_codes.update(codes)

    def unexpected_refusals(self) -> list[Refusal]:
        return [r for r in self.refused if r.code not in self.expected_codes]

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
        # Port 0 lets the system pick one; the runner lists the addresses its sites are bound to.
        addresses = self._runner.addresses
        assert addresses, "the stand-in's site is not listening"
        self.port = addresses[0][1]
        self.world.base_url = self.base_url
        self._watchdog = asyncio.create_task(self._interaction_routes.watch_acks())

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

    def add_guilds(self, count: int, *, owner_id: int) -> list[int]:
        """``count`` guilds at once, before the bot connects (a bot in thousands of servers),
        each with no channel and no member but ``owner_id`` and the bot.

        Their ids are spread over past milliseconds, one each, as real servers' creation times
        are: the shard of a guild comes from its id's timestamp (``gateway.shard_of``), so ids
        minted in the same millisecond would all land on one shard."""
        world = self.world
        newest_ms = (world.snowflake() >> 22) - 1
        made: list[int] = []
        ms = newest_ms - count
        while len(made) < count:
            ms -= 1
            gid = ms << 22
            if gid not in world.guilds:
                made.append(world.add_guild(f"Server {len(made) + 1}", owner_id, guild_id=gid).id)
        return made

    def add_channel(
        self,
        guild_id: int,
        name: str,
        *,
        type: int = GUILD_TEXT,  # noqa: A002 - Discord's field name
        nsfw: bool = False,
    ) -> int:
        """A guild channel: a text channel unless ``type`` names another (``GUILD_VOICE``,
        ``GUILD_ANNOUNCEMENT``, ``GUILD_STAGE_VOICE``, ``GUILD_FORUM``, ``GUILD_MEDIA``);
        ``nsfw``: marked age-restricted."""
        channel = self.world.add_channel(guild_id, name, type=type, nsfw=nsfw)
        if self.gateway.connected:
            self._dispatch_later(
                "CHANNEL_CREATE",
                self.world.channel_payload(channel.id),
                self._client_has(lambda c: c.get_channel(channel.id) is not None),
            )
        return channel.id

    def add_thread(
        self, parent_id: int, name: str, owner_id: int, *, thread_id: int | None = None
    ) -> int:
        """A public thread of a text channel that exists already (the console reopens the
        thread of an adventure from an earlier run, under the id the database knows)."""
        thread = self.world.add_thread(parent_id, name, owner_id, thread_id=thread_id)
        if self.gateway.connected:
            self._dispatch_later(
                "THREAD_CREATE",
                self.world.channel_payload(thread.id),
                self._client_has(lambda c: c.get_channel(thread.id) is not None),
            )
        return thread.id

    def add_user(
        self,
        name: str,
        *,
        member_of: tuple[int, ...] | list[int] = (),
        manage_guild: bool = False,
        manage_messages: bool = False,
        user_id: int | None = None,
    ) -> int:
        """A user; ``user_id`` fixes the id (the console keeps one across runs).
        ``manage_guild`` and ``manage_messages`` give them the guilds' Manager or Moderator
        role."""
        user = self.world.add_user(name, user_id=user_id)
        for gid in member_of:
            guild = self.world.guilds[gid]
            roles = [guild.manager_role_id] if manage_guild else []
            roles += [guild.moderator_role_id] if manage_messages else []
            guild.members[user.id] = roles
            if self.gateway.connected:
                self._dispatch_later(
                    "GUILD_MEMBER_ADD",
                    {**self.world.member_payload(gid, user.id), "guild_id": str(gid)},
                )
        return user.id

    def archive_thread(self, thread_id: int, *, locked: bool = False) -> None:
        """Archive a thread, as Discord does after its inactivity period (``locked``: as a
        moderator locking it). The client drops it from its cache, as discord.py does."""
        self.world.channels[thread_id].locked = locked
        self.set_archived(thread_id, True)

    def add_private_thread(self, parent_id: int, name: str, owner_id: int) -> int:
        """A private thread a member opened: the bot is not in it, and without Manage Threads
        neither sees it nor hears of it (no THREAD_CREATE; discord-api-docs, Threads, "Thread
        Membership"), until it is added."""
        return self.world.add_thread(parent_id, name, owner_id, type=PRIVATE_THREAD).id

    def add_to_thread(self, thread_id: int, user_id: int) -> None:
        """A member adds ``user_id`` to a thread (Add Thread Member). The bot added to a
        private thread hears of it as Discord tells it: THREAD_CREATE "when the current user
        is added to a thread", with its thread member (Gateway Events, Thread Create), after
        which it sees the thread as any member does."""
        thread = self.world.channels[thread_id]
        thread.members.add(user_id)
        if user_id != self.world.bot_user.id or not self.gateway.connected:
            return
        payload = self.world.channel_payload(thread_id) | {
            "newly_created": False,
            "member": {
                "id": str(thread_id),
                "user_id": str(user_id),
                "join_timestamp": datetime.now(UTC).isoformat(),
                "flags": 0,
            },
        }
        self._dispatch_later(
            "THREAD_CREATE",
            payload,
            self._client_has(lambda c: c.get_channel(thread_id) is not None),
        )

    def lock_thread(self, thread_id: int, locked: bool = True) -> None:
        """Lock a thread without archiving it, as moderators usually do (discord-api-docs,
        Threads, "Locked Threads"): it stays open, and only Manage Threads may post there."""
        self.world.channels[thread_id].locked = locked
        self.thread_updated(thread_id)

    def set_archived(self, thread_id: int, archived: bool) -> None:
        thread = self.world.channels[thread_id]
        thread.archived = archived
        thread.archived_at = datetime.now(UTC).isoformat()
        self.thread_updated(thread_id)

    def thread_updated(self, thread_id: int) -> None:
        """THREAD_UPDATE for a thread that changed; the client drops an archived thread from
        its cache and takes an active one back, as discord.py does."""
        archived = self.world.channels[thread_id].archived
        if self.gateway.connected:
            self._dispatch_later(
                "THREAD_UPDATE",
                self.world.channel_payload(thread_id),
                self._client_has(lambda c: (c.get_channel(thread_id) is None) == archived),
            )

    def set_permissions(
        self, channel_id: int, *, allow: int = 0, deny: int = 0, target: int | None = None
    ) -> None:
        """Set a channel's permission overwrite for ``target``: a role id or a member's user id,
        the bot itself when None, as a server admin does in Edit Channel → Permissions. The
        channel's threads follow it. Takes effect at once on every route and interaction."""
        who = self.world.bot_user.id if target is None else target
        self.world.set_overwrite(channel_id, who, allow=allow, deny=deny)
        if self.gateway.connected:
            self._dispatch_later("CHANNEL_UPDATE", self.world.channel_payload(channel_id))

    def close_dms(self, user_id: int) -> None:
        """The user no longer takes DMs from the bot (privacy settings, or they blocked it):
        the bot's sends to their DM channel get 403 50007."""
        self.world.closed_dms.add(user_id)

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

    # -- interactions (the drivers register what they send) -----------------------------------

    def register_interaction(self, record: InteractionRecord) -> None:
        """Track an interaction a driver sends: its token, and its 3 s acknowledgement."""
        self._interaction_routes.register(record)

    # -- the application ----------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        msg, ixn, cmd = self._message_routes, self._interaction_routes, self._command_routes
        chan = self._channel_routes
        r = app.router
        p = API_PREFIX
        r.add_get("/gateway", self.gateway.handle)
        r.add_get("/attachments/{cid}/{aid}/{filename}", msg.get_attachment)
        r.add_get(p + "/gateway", self.gateway.get_gateway)
        r.add_get(p + "/gateway/bot", self.gateway.get_gateway_bot)
        r.add_get(p + "/users/@me", cmd.get_me)
        r.add_post(p + "/users/@me/channels", msg.create_dm)
        r.add_get(p + "/users/{uid}", cmd.get_user)
        r.add_get(p + "/applications/@me", cmd.get_application)
        r.add_get(p + "/oauth2/applications/@me", cmd.get_application)
        r.add_get(p + "/guilds/{gid}", cmd.get_guild)
        r.add_get(p + "/guilds/{gid}/members/{uid}", cmd.get_member)
        r.add_get(p + "/channels/{cid}", msg.get_channel)
        r.add_patch(p + "/channels/{cid}", chan.modify_channel)
        r.add_delete(p + "/channels/{cid}", chan.delete_channel)
        r.add_put(p + "/channels/{cid}/thread-members/{uid}", chan.add_thread_member)
        r.add_post(p + "/channels/{cid}/typing", msg.typing)
        r.add_get(p + "/channels/{cid}/messages", msg.history)
        r.add_post(p + "/channels/{cid}/messages", msg.send_message)
        r.add_post(p + "/channels/{cid}/messages/bulk-delete", msg.bulk_delete)
        r.add_get(p + "/channels/{cid}/messages/{mid}", msg.get_message)
        r.add_patch(p + "/channels/{cid}/messages/{mid}", msg.edit_message)
        r.add_delete(p + "/channels/{cid}/messages/{mid}", msg.delete_message)
        r.add_post(p + "/channels/{cid}/threads", msg.create_thread)
        r.add_post(p + "/channels/{cid}/messages/{mid}/threads", msg.create_thread)
        r.add_get(p + "/applications/{app}/commands", cmd.get_commands)
        r.add_put(p + "/applications/{app}/commands", cmd.put_commands)
        r.add_get(p + "/applications/{app}/guilds/{gid}/commands", cmd.get_commands)
        r.add_put(p + "/applications/{app}/guilds/{gid}/commands", cmd.put_commands)
        r.add_post(p + "/interactions/{iid}/{token}/callback", ixn.callback)
        r.add_post(p + "/webhooks/{app}/{token}", ixn.webhook_execute)
        r.add_get(p + "/webhooks/{app}/{token}/messages/{mid}", ixn.webhook_get)
        r.add_patch(p + "/webhooks/{app}/{token}/messages/{mid}", ixn.webhook_edit)
        r.add_delete(p + "/webhooks/{app}/{token}/messages/{mid}", ixn.webhook_delete)
        r.add_route("*", "/{tail:.*}", self._unknown)
        return app

    # -- request accounting and rate limits ---------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(API_PREFIX):
            return await handler(request)
        self._in_flight += 1
        method, path = request.method, request.path
        try:
            now = time.monotonic()
            response = self._limiter.hit(request, now)
            if response is not None:
                self.rate_limited.append((method, path, self.clock()))
            else:
                response = self.faults.answer(request) or await handler(request)
                if self.faults.loses_answer(request) and request.transport is not None:
                    request.transport.abort()  # made, never answered
                self._limiter.add_bucket_headers(request, response, time.monotonic())
            self.requests.append(RequestRecord(method, path, self.clock(), response.status))
            code = _code_of(response) if 400 <= response.status < 500 else 0
            # A 429 with a JSON code is one of Discord's "Maximum number of … reached" limits
            # (30034, 30046), not pacing: a refusal like any other.
            if 400 <= response.status < 500 and (response.status != 429 or code):
                self.refused.append(Refusal(method, path, response.status, code))
            return response
        finally:
            self._in_flight -= 1
            self._last_request = time.monotonic()

    async def _unknown(self, request: web.Request) -> web.Response:
        self.unknown_routes.append((request.method, request.path))
        _log.warning("stand-in: unknown route %s %s", request.method, request.path)
        return error_response(404, 0, "404: Not Found")
