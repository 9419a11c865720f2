"""Discord's rate limits for the stand-in: a global window, per-channel message windows, a window
per interaction token, the 429 answers discord.py expects, and the ``X-RateLimit-*`` headers on
every other answer.

Interaction endpoints (the callback, and the token's webhook: follow-ups, ``@original``) are off
the global window: "Interaction endpoints are not bound to the bot's Global Rate Limit"
(discord-api-docs, Rate Limits, Global Rate Limit). Their messages are limited per token, not
per channel: a route's top-level resources are "channels (``channel_id``), guilds
(``guild_id``), and webhooks (``webhook_id`` or ``webhook_id + webhook_token``)" (same page).
Discord documents no number for a token's bucket ("rate limits should not be hard coded"): the
stand-in gives each token the channel's 5 in 5 s, and says so in its headers."""

from __future__ import annotations

import hashlib
import time

from aiohttp import web

from . import limits
from .rest import API_PREFIX, json_response

#: Messages sent, edited or deleted per channel: 5 in any 5 s (Discord answers it in its bucket
#: headers; tests may shorten the period, keeping the count, with the bot pacing to match).
CHANNEL_LIMIT, CHANNEL_PERIOD = 5, 5.0
GLOBAL_LIMIT, GLOBAL_PERIOD = 50, 1.0

# Routes whose POST / PATCH / DELETE share one message window per channel.
_CHANNEL_MESSAGE_ROUTES = (
    API_PREFIX + "/channels/{cid}/messages",
    API_PREFIX + "/channels/{cid}/messages/{mid}",
)
# Routes whose POST / PATCH / DELETE share one window per interaction token.
_TOKEN_MESSAGE_ROUTES = (
    API_PREFIX + "/webhooks/{app}/{token}",
    API_PREFIX + "/webhooks/{app}/{token}/messages/{mid}",
)


def bucket_hash(key: str) -> str:
    return hashlib.md5(key.encode()).hexdigest()  # noqa: S324 - an opaque id, not security


def route_template(request: web.Request) -> str:
    info = request.match_info.route.resource
    return info.canonical if info is not None else request.path


class RateLimiter:
    """Windows are in real time (``time.monotonic()``), because discord.py sleeps in real time.

    ``channel_period``: the per-channel message window (Discord's 5 s unless a test shortens
    it: its tests then wait a tenth as long on pacing, under the same rule)."""

    def __init__(self, channel_period: float = CHANNEL_PERIOD) -> None:
        self.channel_period = channel_period
        self.channel_windows: dict[int, limits.SlidingWindow] = {}
        self.global_window = limits.SlidingWindow(GLOBAL_LIMIT, GLOBAL_PERIOD)
        self.token_windows: dict[str, limits.SlidingWindow] = {}

    def channel_bucket(self, request: web.Request) -> int | None:
        """Channel id whose shared message window this request counts against, if any."""
        if request.method not in ("POST", "PATCH", "DELETE"):
            return None
        if route_template(request) in _CHANNEL_MESSAGE_ROUTES:
            try:
                return int(request.match_info["cid"])
            except ValueError:
                return None
        return None

    def token_window(self, request: web.Request) -> limits.SlidingWindow | None:
        """The window of the interaction token whose messages this request makes or changes."""
        if request.method not in ("POST", "PATCH", "DELETE"):
            return None
        if route_template(request) not in _TOKEN_MESSAGE_ROUTES:
            return None
        return self.token_windows.setdefault(
            request.match_info["token"], limits.SlidingWindow(CHANNEL_LIMIT, self.channel_period)
        )

    def hit(self, request: web.Request, now: float) -> web.Response | None:
        """Count the request; the 429 Discord answers when a window is full, else None."""
        if is_interaction_route(request):
            # Off the global window (the module's note); a token's messages have their own.
            window = self.token_window(request)
            retry = None if window is None else window.try_hit(now)
            if retry is None:
                return None
            scope, limit = "user", CHANNEL_LIMIT
            bucket = bucket_hash(f"{request.method} {route_template(request)}")
        else:
            retry = self.global_window.try_hit(now)
            scope, limit, bucket = "global", GLOBAL_LIMIT, ""
        if retry is None:
            cid = self.channel_bucket(request)
            if cid is None:
                return None
            window = self.channel_windows.setdefault(
                cid, limits.SlidingWindow(CHANNEL_LIMIT, self.channel_period)
            )
            retry = window.try_hit(now)
            if retry is None:
                return None
            scope, limit = "user", CHANNEL_LIMIT
            bucket = bucket_hash(f"{request.method} {route_template(request)}")
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
        return json_response(body, status=429, headers=headers)

    def add_bucket_headers(
        self, request: web.Request, response: web.StreamResponse, now: float
    ) -> None:
        if response.status == 429 or "X-RateLimit-Limit" in response.headers:
            return
        template = route_template(request)
        cid = self.channel_bucket(request)
        window = self.channel_windows[cid] if cid is not None else self.token_window(request)
        if window is not None:
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
        response.headers["X-RateLimit-Bucket"] = bucket_hash(f"{request.method} {template}")


def limit_reached_headers(request: web.Request, retry: float) -> dict[str, str]:
    """The headers Discord sends with a "Maximum number of … reached" 429 (30034 daily command
    creations, 30046 edits of hour-old messages): the rate-limit headers and ``Via``, as on a
    pacing 429, so discord.py reads it as a rate limit and sleeps ``retry_after`` unless its
    ``max_ratelimit_timeout`` is shorter (then it raises ``discord.RateLimited`` at once). A
    bot without that bound appears to hang for hours (JDA issue 2544 logs ``Retry-After:
    431000 ms`` on 30034)."""
    return {
        "Retry-After": str(max(1, int(retry + 0.999))),
        "X-RateLimit-Limit": "1",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset-After": f"{retry:.3f}",
        "X-RateLimit-Reset": f"{time.time() + retry:.3f}",
        "X-RateLimit-Scope": "user",
        "X-RateLimit-Bucket": bucket_hash(f"{request.method} {route_template(request)}"),
        "Via": "1.1 google",
    }


def is_interaction_route(request: web.Request) -> bool:
    """An interaction callback or an interaction's webhook (followups, @original)."""
    return is_interaction_path(request.path)


def is_interaction_path(path: str) -> bool:
    """Whether a request to ``path`` is an interaction endpoint's, off the global budget."""
    parts = path.split("/")
    # /api/v10/interactions/{id}/{token}/callback, /api/v10/webhooks/{app}/{token}[/...]
    return len(parts) > 3 and parts[3] in ("interactions", "webhooks")
