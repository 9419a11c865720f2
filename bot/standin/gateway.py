"""The stand-in's Gateway: HELLO, IDENTIFY → READY + GUILD_CREATE, heartbeats, dispatches.

Frames are sent as JSON text. discord.py asks for zlib-stream compression in the URL, but its
``received_message`` only decompresses ``bytes`` frames, so text frames are read as they are.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

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

INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DM_MESSAGES = 1 << 12


class GatewaySession:
    """One connected client socket."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws
        self.identified = False
        self.intents = 0
        self.session_id = ""


class Gateway:
    def __init__(self, world: World, base_ws_url: Callable[[], str]) -> None:
        self.world = world
        self._base_ws_url = base_ws_url
        self.sessions: list[GatewaySession] = []
        self.sequence = 0
        # Dispatches go out one at a time so sequence numbers reach the client in order.
        self._send_lock = asyncio.Lock()
        # Every dispatched (event name, payload), for tests that want to look.
        self.dispatched: list[tuple[str, dict[str, Any]]] = []
        self.last_dispatch = 0.0  # time.monotonic() of the latest event sent

    @property
    def intents(self) -> int:
        return next((s.intents for s in self.sessions if s.identified), 0)

    @property
    def connected(self) -> bool:
        return any(s.identified for s in self.sessions)

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

    async def _receive(self, session: GatewaySession, frame: dict[str, Any]) -> None:
        op = frame.get("op")
        data = frame.get("d")
        if op == OP_HEARTBEAT:
            await self._send(session, {"op": OP_HEARTBEAT_ACK, "d": None})
        elif op == OP_IDENTIFY:
            session.intents = int((data or {}).get("intents", 0))
            session.session_id = f"standin-session-{self.world.snowflake()}"
            await self._ready(session)
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

    async def _ready(self, session: GatewaySession) -> None:
        world = self.world
        ready = {
            "v": 10,
            "user": {
                **world.bot_user.payload(),
                "verified": True,
                "mfa_enabled": False,
                "email": None,
            },
            "guilds": [{"id": str(g), "unavailable": True} for g in world.guilds],
            "session_id": session.session_id,
            "session_type": "normal",
            "resume_gateway_url": self._base_ws_url(),
            "shard": [0, 1],
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
            self.sequence += 1
            await self._send(
                session, {"op": OP_DISPATCH, "t": "READY", "s": self.sequence, "d": ready}
            )
            session.identified = True
            for gid in list(world.guilds):
                self.sequence += 1
                await self._send(
                    session,
                    {
                        "op": OP_DISPATCH,
                        "t": "GUILD_CREATE",
                        "s": self.sequence,
                        "d": world.guild_payload(gid),
                    },
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
        """Send an op-0 event to every identified client, with increasing sequence numbers."""
        self.dispatched.append((event, data))
        self.last_dispatch = time.monotonic()
        async with self._send_lock:
            for session in list(self.sessions):
                if not session.identified:
                    continue
                self.sequence += 1
                await self._send(
                    session, {"op": OP_DISPATCH, "t": event, "s": self.sequence, "d": data}
                )

    async def close(self) -> None:
        for session in list(self.sessions):
            await session.ws.close()
