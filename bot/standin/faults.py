"""Injected failures: the stand-in answering message edits with Discord's server and permission
errors, for trying how a bot copes. Nothing is injected unless a test asks.

Discord documents (discord-api-docs, "Opcodes and Status Codes", HTTP Response Codes) that any
request may be answered ``5xx SERVER ERROR`` ("these are rare") or ``502 GATEWAY UNAVAILABLE``
("wait a bit and retry"), and ``403 FORBIDDEN`` when the token lacks permission to the resource,
with JSON error code ``50013`` ("You lack permissions to perform that action"; its message on the
wire is "Missing Permissions"). discord.py retries 500, 502, 504 and 524 itself (sleeping
1 + 2 × attempt seconds, five attempts) and raises ``DiscordServerError`` for any other 5xx and
``Forbidden`` for a 403 at once.

    fake.faults.fail_edits(SERVICE_UNAVAILABLE, times=3)          # the next three edits
    fake.faults.fail_edits(MISSING_PERMISSIONS, channel_id=thread) # every edit there, until…
    fake.faults.clear()
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from .ratelimits import route_template
from .rest import API_PREFIX, error_response


@dataclass(frozen=True, slots=True)
class DiscordError:
    """An error answer as Discord gives it: the HTTP status, the JSON ``code`` and message."""

    status: int
    code: int
    message: str


INTERNAL_SERVER_ERROR = DiscordError(500, 0, "500: Internal Server Error")
SERVICE_UNAVAILABLE = DiscordError(503, 0, "503: Service Unavailable")
MISSING_PERMISSIONS = DiscordError(403, 50013, "Missing Permissions")

#: Which requests are message edits: a channel message's and an interaction's own messages
#: (``@original`` and followups, through the interaction's webhook).
_EDIT_ROUTES = (
    API_PREFIX + "/channels/{cid}/messages/{mid}",
    API_PREFIX + "/webhooks/{app}/{token}/messages/{mid}",
)


@dataclass
class _EditFault:
    error: DiscordError
    times: int | None  # None: until cleared
    channel_id: int | None  # None: any channel


@dataclass
class Faults:
    """The failures the stand-in injects, and the requests it answered with them."""

    _edits: list[_EditFault] = field(default_factory=list)
    _lost_answers: int = 0
    #: (method, path, status) of every request answered with an injected error, in order.
    injected: list[tuple[str, str, int]] = field(default_factory=list)
    #: The channel of the interaction a token belongs to (the stand-in's), so that a fault
    #: for a channel meets the edits of its interactions' messages too.
    channel_of_token: Callable[[str], int | None] = lambda _token: None

    def fail_edits(
        self, error: DiscordError, *, times: int | None = 1, channel_id: int | None = None
    ) -> None:
        """Answer the next ``times`` message edits (every one while ``times`` is None) with
        ``error``; with ``channel_id``, only edits of that channel's messages."""
        if times is not None and times < 1:
            raise ValueError("a fault answers at least one edit")
        self._edits.append(_EditFault(error, times, channel_id))

    def lose_followup_answers(self, times: int = 1) -> None:
        """Make the next ``times`` interaction follow-ups, then cut the connection before
        answering: the bot cannot know whether its message was made (a reset connection is
        how such a request ends on the wire)."""
        self._lost_answers += times

    def loses_answer(self, request: web.Request) -> bool:
        """Whether the answer to this request, already served, is to be lost."""
        if self._lost_answers < 1 or request.method != "POST":
            return False
        if route_template(request) != API_PREFIX + "/webhooks/{app}/{token}":
            return False
        self._lost_answers -= 1
        self.injected.append((request.method, request.path, 0))
        return True

    def clear(self) -> None:
        """Inject nothing more."""
        self._edits.clear()
        self._lost_answers = 0

    def answer(self, request: web.Request) -> web.Response | None:
        """The injected error for this request, or None to serve it as usual."""
        if request.method != "PATCH" or route_template(request) not in _EDIT_ROUTES:
            return None
        channel = request.match_info.get("cid")
        token = request.match_info.get("token")
        if channel is None and token is not None and request.match_info["mid"] != "@original":
            # An interaction's follow-up is one of its channel's messages; its response is the
            # interaction's own (a channel's faults leave it alone).
            owner = self.channel_of_token(token)
            channel = None if owner is None else str(owner)
        for fault in self._edits:
            if fault.channel_id is not None and channel != str(fault.channel_id):
                continue
            if fault.times is not None:
                fault.times -= 1
                if fault.times == 0:
                    self._edits.remove(fault)
            error = fault.error
            self.injected.append((request.method, request.path, error.status))
            return error_response(error.status, error.code, error.message)
        return None
