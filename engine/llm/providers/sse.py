"""A model server's event stream, read within bounds.

The stream is untrusted: a server or player may point Campfire at any endpoint (``/model
set``). httpx-sse, used before, reads lines through a decoder whose buffer has no bound: one
line that never ends (no newline, ever) grew the bot by 860 MB, and a huge event was parsed
whole on the event loop. No well-kept library bounds them, so the few rules of the format are
read here, as the HTML standard gives them ("Server-sent events", §9.2.6 "Interpreting an event
stream"): lines end in CRLF, LF or CR; a blank line dispatches the event; a line starting with a
colon is a comment; ``field: value`` with one leading space dropped; ``data`` lines join with
LF; an event cut off by the end of the stream is dropped. ``id`` and ``retry`` are ignored:
Campfire never reconnects a reply.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx

#: The longest line, and the largest event, a reply may carry. A chat-completions chunk is a
#: few hundred characters; these leave room for a whole reply sent as one event.
MAX_LINE_CHARS = 256 * 1024
MAX_EVENT_CHARS = 256 * 1024

_BREAK = re.compile(r"\r\n|\r|\n")


class EventTooLarge(Exception):
    """A line or an event past its bound: the stream is read no further."""


@dataclass(frozen=True, slots=True)
class Event:
    event: str
    data: str


def is_event_stream(response: httpx.Response) -> bool:
    content_type = response.headers.get("content-type", "").partition(";")[0]
    return "text/event-stream" in content_type


async def events(
    response: httpx.Response,
    *,
    max_line: int = MAX_LINE_CHARS,
    max_event: int = MAX_EVENT_CHARS,
) -> AsyncIterator[Event]:
    """The events of ``response``'s body, as they come; ``EventTooLarge`` past a bound."""
    pending = ""
    kind = ""
    data: list[str] = []
    size = 0
    async for text in response.aiter_text():
        pending += text
        start = 0
        while (found := _BREAK.search(pending, start)) is not None:
            if found.group() == "\r" and found.end() == len(pending):
                break  # maybe the first half of a CRLF split between two reads
            line = pending[start : found.start()]
            start = found.end()
            if len(line) > max_line:
                raise EventTooLarge(f"a line of more than {max_line:,} characters")
            if not line:
                if data:
                    yield Event(kind or "message", "\n".join(data))
                kind, data, size = "", [], 0
                continue
            if line.startswith(":"):
                continue
            name, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if name == "data":
                size += len(value) + 1
                if size > max_event:
                    raise EventTooLarge(f"an event of more than {max_event:,} characters")
                data.append(value)
            elif name == "event":
                kind = value
        pending = pending[start:]
        if len(pending) > max_line:
            raise EventTooLarge(f"a line of more than {max_line:,} characters")
