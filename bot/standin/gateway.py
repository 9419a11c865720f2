"""The stand-in's Gateway: ``/gateway`` and ``/gateway/bot``, HELLO, IDENTIFY → READY +
GUILD_CREATE per shard, heartbeats, and dispatches routed by shard and filtered by intent.

Built to discord-api-docs, Gateway (Sharding, Gateway Intents, Get Gateway Bot) and Opcodes and
Status Codes (the gateway close codes).

Frames are sent as JSON text. discord.py asks for zlib-stream compression in the URL, but its
``received_message`` only decompresses ``bytes`` frames, so text frames are read as they are.

Not modelled: the identify rate (``max_concurrency`` identifies per 5 s; discord.py waits 5 s
between its shards' identifies by itself), session start counts, and resuming (a RESUME is
answered with Invalid Session, so the client identifies afresh).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from .rest import json_response

if TYPE_CHECKING:
    from .world import World

_log = logging.getLogger(__name__)

OP_DISPATCH = 0
OP_HEARTBEAT = 1
OP_IDENTIFY = 2
OP_PRESENCE = 3
OP_RESUME = 6
OP_REQUEST_MEMBERS = 8
OP_INVALID_SESSION = 9
OP_HELLO = 10
OP_HEARTBEAT_ACK = 11

HEARTBEAT_INTERVAL_MS = 41250

# Gateway, List of Intents.
INTENT_GUILDS = 1 << 0
INTENT_GUILD_MEMBERS = 1 << 1
INTENT_GUILD_PRESENCES = 1 << 8
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DM_MESSAGES = 1 << 12
INTENT_MESSAGE_CONTENT = 1 << 15
#: Gateway, Privileged Intents: asked for without being enabled for the app, they close the
#: connection with 4014.
PRIVILEGED_INTENTS = INTENT_GUILD_MEMBERS | INTENT_GUILD_PRESENCES | INTENT_MESSAGE_CONTENT

#: The events the stand-in sends and the intent each needs; events not listed need none
#: (READY, INTERACTION_CREATE, GUILD_MEMBERS_CHUNK). MESSAGE_* are decided by the channel.
EVENT_INTENTS: dict[str, int] = {
    **dict.fromkeys(
        (
            "GUILD_CREATE",
            "GUILD_UPDATE",
            "GUILD_DELETE",
            "GUILD_ROLE_CREATE",
            "GUILD_ROLE_UPDATE",
            "GUILD_ROLE_DELETE",
            "CHANNEL_CREATE",
            "CHANNEL_UPDATE",
            "CHANNEL_DELETE",
            "THREAD_CREATE",
            "THREAD_UPDATE",
            "THREAD_DELETE",
            "THREAD_LIST_SYNC",
            "THREAD_MEMBER_UPDATE",
        ),
        INTENT_GUILDS,
    ),
    **dict.fromkeys(
        ("GUILD_MEMBER_ADD", "GUILD_MEMBER_UPDATE", "GUILD_MEMBER_REMOVE"),
        INTENT_GUILD_MEMBERS,
    ),
    "PRESENCE_UPDATE": INTENT_GUILD_PRESENCES,
}
#: What a message is sent with when its content is withheld: the fields that expose content
#: "will receive empty values" (Change Log 2022-09-01).
WITHOUT_CONTENT: dict[str, Any] = {"content": "", "embeds": [], "attachments": [], "components": []}
MESSAGE_EVENTS = ("MESSAGE_CREATE", "MESSAGE_UPDATE", "MESSAGE_DELETE", "MESSAGE_DELETE_BULK")

# Opcodes and Status Codes, Gateway Close Event Codes.
CLOSE_INVALID_SHARD = 4010
CLOSE_SHARDING_REQUIRED = 4011
CLOSE_DISALLOWED_INTENTS = 4014

#: Gateway, Sharding: "Each shard can only support a maximum of 2500 guilds".
MAX_GUILDS_PER_SHARD = 2500
#: Get Gateway Bot's recommendation. The documentation gives no formula; Discord is known to
#: recommend about one shard per 1,000 guilds, which keeps each well under the maximum.
GUILDS_PER_RECOMMENDED_SHARD = 1000


def shard_of(guild_id: int, num_shards: int) -> int:
    """Gateway, Sharding Formula."""
    return (guild_id >> 22) % num_shards


class GatewaySession:
    """One connected client socket, and the shard it identified as."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws
        self.identified = False
        self.intents = 0
        self.session_id = ""
        self.shard_id = 0
        self.num_shards = 1
        self.sequence = 0
        #: (event, guild id or None) of every event sent here, for tests that look at routing.
        self.received: list[tuple[str, int | None]] = []

    def holds(self, guild_id: int | None) -> bool:
        """Whether this connection gets the events of ``guild_id``: "Gateway events that do
        not contain a guild_id will only be sent to the first shard" (Gateway, Sharding)."""
        if guild_id is None:
            return self.shard_id == 0
        return shard_of(guild_id, self.num_shards) == self.shard_id

    def subscribed(self, event: str, data: dict[str, Any]) -> bool:
        if event in MESSAGE_EVENTS:
            needed = INTENT_GUILD_MESSAGES if "guild_id" in data else INTENT_DM_MESSAGES
        else:
            needed = EVENT_INTENTS.get(event, 0)
        return needed == 0 or bool(self.intents & needed)


def _guild_of(event: str, data: dict[str, Any]) -> int | None:
    raw = data.get("id") if event in ("GUILD_CREATE", "GUILD_UPDATE", "GUILD_DELETE") else None
    raw = raw or data.get("guild_id")
    return int(raw) if raw is not None else None


class Gateway:
    def __init__(self, world: World, base_ws_url: Callable[[], str]) -> None:
        self.world = world
        self._base_ws_url = base_ws_url
        self.sessions: list[GatewaySession] = []
        #: The privileged intents enabled for the application in the Developer Portal: none,
        #: as for a new application.
        self.privileged_intents = 0
        # Dispatches go out one at a time so sequence numbers reach the client in order.
        self._send_lock = asyncio.Lock()
        # Every dispatched (event name, payload), for tests that want to look.
        self.dispatched: list[tuple[str, dict[str, Any]]] = []
        #: The close codes the gateway ended connections with, in order.
        self.closed_with: list[int] = []
        self.last_dispatch = 0.0  # time.monotonic() of the latest event sent

    @property
    def connected(self) -> bool:
        return any(s.identified for s in self.sessions)

    def recommended_shards(self) -> int:
        return max(1, math.ceil(len(self.world.guilds) / GUILDS_PER_RECOMMENDED_SHARD))

    def held_guilds(self) -> set[int]:
        """The guilds some identified connection holds (a client running only some shards
        never hears of the others)."""
        return {
            gid for gid in self.world.guilds for s in self.sessions if s.identified and s.holds(gid)
        }

    # -- REST ---------------------------------------------------------------------------------

    async def get_gateway(self, request: web.Request) -> web.Response:
        return json_response({"url": self._base_ws_url()})

    async def get_gateway_bot(self, request: web.Request) -> web.Response:
        return json_response(
            {
                "url": self._base_ws_url(),
                "shards": self.recommended_shards(),
                "session_start_limit": {
                    "total": 1000,
                    "remaining": 999,
                    "reset_after": 86400000,
                    "max_concurrency": 1,
                },
            }
        )

    # -- the socket ---------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        session = GatewaySession(ws)
        self.sessions.append(session)
        try:
            await self._send(
                session,
                {
                    "op": OP_HELLO,
                    "d": {"heartbeat_interval": HEARTBEAT_INTERVAL_MS, "_trace": ["standin"]},
                },
            )
            async for msg in ws:
                if msg.type is WSMsgType.TEXT:
                    await self._receive(session, json.loads(msg.data))
                elif msg.type in (WSMsgType.ERROR, WSMsgType.CLOSE):
                    break
        finally:
            self.sessions.remove(session)
        return ws

    async def _send(self, session: GatewaySession, frame: dict[str, Any]) -> None:
        if not session.ws.closed:
            await session.ws.send_str(json.dumps(frame))

    async def _close(self, session: GatewaySession, code: int, reason: str) -> None:
        self.closed_with.append(code)
        await session.ws.close(code=code, message=reason.encode())

    async def _receive(self, session: GatewaySession, frame: dict[str, Any]) -> None:
        op = frame.get("op")
        data = frame.get("d")
        if op == OP_HEARTBEAT:
            await self._send(session, {"op": OP_HEARTBEAT_ACK, "d": None})
        elif op == OP_IDENTIFY:
            await self._identify(session, data or {})
        elif op == OP_RESUME:
            # No replay buffer: tell the client to identify afresh, as Discord does when a
            # session cannot be resumed.
            await self._send(session, {"op": OP_INVALID_SESSION, "d": False})
        elif op == OP_REQUEST_MEMBERS:
            await self._members_chunk(session, data or {})
        elif op == OP_PRESENCE:
            pass
        else:
            _log.debug("stand-in gateway ignored op %s", op)

    async def _identify(self, session: GatewaySession, data: dict[str, Any]) -> None:
        session.intents = int(data.get("intents", 0))
        shard = data.get("shard") or [0, 1]
        session.shard_id, session.num_shards = int(shard[0]), int(shard[1])
        if session.num_shards < 1 or not 0 <= session.shard_id < session.num_shards:
            await self._close(session, CLOSE_INVALID_SHARD, "Invalid shard.")
            return
        if session.intents & PRIVILEGED_INTENTS & ~self.privileged_intents:
            await self._close(session, CLOSE_DISALLOWED_INTENTS, "Disallowed intent(s).")
            return
        guilds = [gid for gid in self.world.guilds if session.holds(gid)]
        if len(guilds) > MAX_GUILDS_PER_SHARD:
            await self._close(session, CLOSE_SHARDING_REQUIRED, "Sharding required.")
            return
        session.session_id = f"standin-session-{self.world.snowflake()}"
        await self._ready(session, guilds)

    async def _ready(self, session: GatewaySession, guilds: list[int]) -> None:
        world = self.world
        ready = {
            "v": 10,
            "user": {
                **world.bot_user.payload(),
                "verified": True,
                "mfa_enabled": False,
                "email": None,
            },
            "guilds": [{"id": str(g), "unavailable": True} for g in guilds],
            "session_id": session.session_id,
            "session_type": "normal",
            "resume_gateway_url": self._base_ws_url(),
            "shard": [session.shard_id, session.num_shards],
            "application": {"id": str(world.application_id), "flags": 0},
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "user_settings": {},
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
            "_trace": ["standin"],
        }
        async with self._send_lock:
            await self._send_event(session, "READY", ready)
            session.identified = True
            if not session.intents & INTENT_GUILDS:
                return
            for gid in guilds:
                await self._send_event(session, "GUILD_CREATE", world.guild_payload(gid))

    async def _send_event(self, session: GatewaySession, event: str, data: dict[str, Any]) -> None:
        if event == "GUILD_CREATE" and not session.intents & INTENT_GUILD_PRESENCES:
            # Gateway Events, Guild Create: without GUILD_PRESENCES, "members and presences
            # returned in this event will only contain your bot and users in voice channels".
            bot = str(self.world.bot_user.id)
            data = {**data, "members": [m for m in data["members"] if m["user"]["id"] == bot]}
        if event in ("MESSAGE_CREATE", "MESSAGE_UPDATE") and not self._content_for(session, data):
            data = {**data, **WITHOUT_CONTENT}
        session.sequence += 1
        session.received.append((event, _guild_of(event, data)))
        await self._send(session, {"op": OP_DISPATCH, "t": event, "s": session.sequence, "d": data})

    def _content_for(self, session: GatewaySession, data: dict[str, Any]) -> bool:
        """Whether a message's content reaches this connection: with the Message Content
        intent; else only in a DM, in the bot's own messages, and in those that mention it
        (discord-api-docs, Change Log 2022-09-01, "Message Content is a Privileged Intent":
        "These restrictions do not apply for messages that a bot or app sends, in DMs that it
        receives, or in messages in which it is mentioned")."""
        if session.intents & INTENT_MESSAGE_CONTENT or "guild_id" not in data:
            return True
        bot = str(self.world.bot_user.id)
        author = data.get("author") or {}
        return author.get("id") == bot or any(
            user.get("id") == bot for user in data.get("mentions") or []
        )

    async def _members_chunk(self, session: GatewaySession, data: dict[str, Any]) -> None:
        gid = int(data.get("guild_id", 0))
        if gid not in self.world.guilds:
            return
        members = [self.world.member_payload(gid, uid) for uid in self.world.guilds[gid].members]
        chunk = {
            "guild_id": str(gid),
            "members": members,
            "chunk_index": 0,
            "chunk_count": 1,
            "not_found": [],
            "presences": [],
        }
        if data.get("nonce"):
            chunk["nonce"] = data["nonce"]
        await self.dispatch("GUILD_MEMBERS_CHUNK", chunk)

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send an op-0 event to the connections that get it: the one holding its guild's shard
        (a DM's: shard 0), when subscribed to its intent."""
        self.dispatched.append((event, data))
        self.last_dispatch = time.monotonic()
        guild_id = _guild_of(event, data)
        async with self._send_lock:
            for session in list(self.sessions):
                if session.identified and session.holds(guild_id):
                    if session.subscribed(event, data):
                        await self._send_event(session, event, data)

    async def close(self) -> None:
        for session in list(self.sessions):
            await session.ws.close()
