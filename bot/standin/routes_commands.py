"""Application command routes (each definition checked against Discord's schema in
``command_schema``, and Discord's daily create limit), and the lookups discord.py makes at login
and on demand: ``/users``, ``/applications/@me``, ``/guilds`` (``/gateway`` is the gateway's
own, in ``gateway``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from .command_schema import check_commands
from .ratelimits import limit_reached_headers
from .rest import error_response, json_response, read_body

if TYPE_CHECKING:
    from .host import StandinHost

DAILY_COMMAND_CREATES = 200
DAY_S = 86400.0


class CommandRoutes:
    def __init__(self, fake: StandinHost) -> None:
        self.fake = fake
        self.world = fake.world
        self.command_creates: dict[int | None, list[float]] = {}

    # -- application commands -----------------------------------------------------------------

    def _scope(self, request: web.Request) -> int | None:
        gid = request.match_info.get("gid")
        return int(gid) if gid is not None else None

    async def get_commands(self, request: web.Request) -> web.Response:
        return json_response(self.fake.commands.get(self._scope(request), []))

    async def put_commands(self, request: web.Request) -> web.Response:
        scope = self._scope(request)
        if scope is not None and scope not in self.world.guilds:
            return error_response(404, 10004, "Unknown Guild")
        body, _ = await read_body(request)
        problem = check_commands(body)
        if problem is not None:
            return json_response(problem[1], status=problem[0])
        existing = {(c["name"], c.get("type", 1)): c for c in self.fake.commands.get(scope, [])}
        now = self.fake.clock()
        creates = [t for t in self.command_creates.get(scope, []) if now - t < DAY_S]
        new = [c for c in body if (c["name"], c.get("type", 1)) not in existing]
        if len(creates) + len(new) > DAILY_COMMAND_CREATES:
            retry = creates[0] + DAY_S - now if creates else DAY_S
            return json_response(
                {
                    "message": "Max number of daily application command creates has been reached "
                    f"({DAILY_COMMAND_CREATES})",
                    "code": 30034,
                    "retry_after": round(retry, 3),
                    "global": False,
                },
                status=429,
                headers=limit_reached_headers(request, retry),
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
        self.command_creates[scope] = creates
        self.fake.commands[scope] = stored
        return json_response(stored)

    # -- lookups ------------------------------------------------------------------------------

    async def get_me(self, request: web.Request) -> web.Response:
        return json_response(
            {
                **self.world.bot_user.payload(),
                "verified": True,
                "mfa_enabled": False,
                "email": None,
                "locale": "en-US",
            }
        )

    async def get_user(self, request: web.Request) -> web.Response:
        user = self.world.users.get(int(request.match_info["uid"]))
        if user is None:
            return error_response(404, 10013, "Unknown User")
        return json_response(user.payload())

    async def get_application(self, request: web.Request) -> web.Response:
        return json_response(self.world.application_payload())

    async def get_guild(self, request: web.Request) -> web.Response:
        gid = int(request.match_info["gid"])
        if gid not in self.world.guilds:
            return error_response(404, 10004, "Unknown Guild")
        data = self.world.guild_payload(gid)
        for key in ("members", "channels", "threads", "voice_states", "presences"):
            data.pop(key, None)
        return json_response(data)

    async def get_member(self, request: web.Request) -> web.Response:
        gid, uid = int(request.match_info["gid"]), int(request.match_info["uid"])
        guild = self.world.guilds.get(gid)
        if guild is None:
            return error_response(404, 10004, "Unknown Guild")
        if uid not in guild.members:
            return error_response(404, 10007, "Unknown Member")
        return json_response(self.world.member_payload(gid, uid))
