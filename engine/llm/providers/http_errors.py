"""Turning HTTP failures from a model server into errors a player can act on.

Chat, embedding and moderation endpoints fail the same ways (refused key, unknown model, rate
limits, a server down or unreachable); only the words for what was being talked to differ.
Players read these messages, so an endpoint is named by its host alone, and whatever the server
said is redacted before it is passed on (a proxy may echo the key it refused).
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass, field
from typing import Any

import httpx

from engine.errors import (
    ModelBadReply,
    ModelError,
    ModelKeyRefused,
    ModelNotFound,
    ModelRateLimited,
    ModelServerError,
    ModelTimedOut,
    ModelUnreachable,
)
from engine.platform.redaction import host_of, redact, redact_url, url_secrets


@dataclass(frozen=True, slots=True)
class Endpoint:
    base_url: str
    model: str
    #: What the player knows this as: "model" or "embedding model".
    what: str = "model"
    #: Masked in anything the server says that is passed on.
    api_key: str | None = field(default=None, repr=False)
    #: Said instead of the host (the operator's endpoint: its address is not the players').
    shown_as: str | None = None

    @property
    def host(self) -> str:
        """Where the endpoint is, as players may see it: host and port, never credentials."""
        return self.shown_as or host_of(self.base_url)

    def said(self, detail: str) -> str:
        """What the server said, safe to pass on."""
        return redact(detail, [self.api_key, *url_secrets(self.base_url)])


def _then_retry(what: str) -> str:
    """Where a wrong key or model name is put right, and what then: a narration's Retry."""
    if what == "model":
        return " (`/model show`, or the operator's settings), then press Retry."
    return " in the settings."


#: The most of an error's body read: its message is a line or two; a server that sends an endless
#: body is read no further, and what is read is small enough to parse on the event loop.
ERROR_BODY_BYTES = 8 * 1024

#: The longest wait a server's Retry-After is believed for.
RETRY_AFTER_MAX_S = 3600.0


async def error_body(response: httpx.Response) -> bytes:
    """The start of a streamed response's body, at most ``ERROR_BODY_BYTES``; the rest is left
    unread (closing the response drops the connection)."""
    read = bytearray()
    async for piece in response.aiter_bytes():
        read += piece
        if len(read) >= ERROR_BODY_BYTES:
            break
    return bytes(read[:ERROR_BODY_BYTES])


def status_error(endpoint: Endpoint, response: httpx.Response, body: bytes) -> ModelError:
    """The error for an HTTP status of 400 or more; ``body``: the start of its body
    (``error_body``)."""
    status, host, what = response.status_code, endpoint.host, endpoint.what
    detail = endpoint.said(error_message(_json_or_none(body)))
    if status in (401, 403):
        return ModelKeyRefused(
            f"The {what} server at {host} refused the API key ({status}). "
            f"Check the key{_then_retry(what)}"
        )
    if status == 404:
        return ModelNotFound(
            f"The {what} server at {host} has no model called '{endpoint.model}'"
            + (f" ({detail})" if detail else "")
            + f". Check the model name{_then_retry(what)}"
        )
    if status == 429:
        wait = retry_after(response)
        when = f" Try again in {math.ceil(wait)} s." if wait is not None else ""
        return ModelRateLimited(
            f"The {what} at {host} is rate limited right now.{when}", retry_after=wait
        )
    if status >= 500:
        return ModelServerError(
            f"The {what} server at {host} had an internal error ({status}). "
            "Press Retry in a moment."
        )
    return ModelServerError(
        f"The {what} server at {host} refused the request ({status})"
        + (f": {detail}" if detail else ".")
    )


def transport_error(endpoint: Endpoint, error: Exception) -> ModelError:
    """The error for an httpx exception raised while talking to the endpoint."""
    host, what = endpoint.host, endpoint.what
    if isinstance(error, httpx.ConnectTimeout):
        return ModelUnreachable(f"Couldn't connect to the {what} at {host} in time. Is it running?")
    if isinstance(error, httpx.ConnectError):
        return ModelUnreachable(
            f"Couldn't reach the {what} at {host}. Is it running, and is the address right?"
        )
    if isinstance(error, httpx.TimeoutException):
        return ModelTimedOut(
            f"The {what} at {host} stopped answering. It may be overloaded; press Retry."
        )
    if isinstance(error, httpx.RemoteProtocolError | httpx.ReadError):
        return broken_off(endpoint)
    if isinstance(error, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ModelUnreachable(
            f"'{redact_url(endpoint.base_url)}' is not a usable {what} address. It should look "
            "like http://localhost:11434/v1."
        )
    return ModelUnreachable(
        f"Talking to the {what} at {host} failed. Is it running, and is the address right?"
    )


#: What ``transport_error`` understands; anything else is a bug, not a network problem.
TRANSPORT_ERRORS = (httpx.HTTPError, httpx.InvalidURL)


def broken_off(endpoint: Endpoint) -> ModelBadReply:
    return ModelBadReply(
        f"The connection to the {endpoint.what} at {endpoint.host} broke off in the middle of "
        "the reply. Press Retry."
    )


def retry_after(response: httpx.Response) -> float | None:
    """The server's Retry-After in seconds, held between 0 and ``RETRY_AFTER_MAX_S`` (a server
    may send "inf" or "1e400"); None when it sent none or no number (an HTTP date is not
    believed either)."""
    value = response.headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    if seconds is None or math.isnan(seconds):
        return None
    return min(max(0.0, seconds), RETRY_AFTER_MAX_S)


def error_message(body: Any) -> str:
    """The human part of an OpenAI-style error body, if there is one."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:300]
        if isinstance(error, str):
            return error[:300]
    return ""


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


async def post_answer(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    url: str,
    payload: dict[str, Any],
    seconds: float,
) -> httpx.Response:
    """POST ``payload`` to ``url`` of ``endpoint``'s server, within ``seconds`` in all (httpx's
    timeouts bound each read, not the whole; a server that trickles its answer must not hold a
    turn); the answer when its status is under 400, else the error a player can act on. For
    one-shot JSON endpoints (embeddings, moderations); chat streams are read as they come."""
    try:
        async with asyncio.timeout(seconds):
            response = await client.post(url, json=payload)
    except TRANSPORT_ERRORS as error:
        raise transport_error(endpoint, error) from None
    except TimeoutError:
        raise ModelTimedOut(
            f"The {endpoint.what} at {endpoint.host} did not answer within {seconds:g} seconds."
        ) from None
    if response.status_code >= 400:
        raise status_error(endpoint, response, response.content[:ERROR_BODY_BYTES])
    return response
