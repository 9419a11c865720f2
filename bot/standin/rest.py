"""REST plumbing shared by the stand-in's routes: JSON answers, Discord errors, request bodies."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from aiohttp import web

API_PREFIX = "/api/v10"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class FileUpload(NamedTuple):
    index: int
    filename: str
    content: bytes


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    # Exactly "application/json", no charset: discord.py compares the header verbatim.
    response = web.Response(body=json.dumps(data).encode(), status=status, headers=headers)
    response.headers["Content-Type"] = "application/json"
    return response


def error_response(status: int, code: int, message: str) -> web.Response:
    """Discord's error body: ``{"message": ..., "code": ...}``."""
    return json_response({"message": message, "code": code}, status=status)


async def read_body(request: web.Request) -> tuple[Any, list[FileUpload]]:
    """JSON body, or multipart ``payload_json`` + ``files[n]`` as discord.py sends them."""
    if request.content_type.startswith("multipart/"):
        payload: Any = {}
        files: list[FileUpload] = []
        reader = await request.multipart()
        while True:
            part = await reader.next()
            if part is None:
                break
            name = getattr(part, "name", None) or ""
            # The ignores below: a part may be typed as a nested multipart reader, which has no
            # text() or read(); discord.py sends only plain body parts.
            if name == "payload_json":
                payload = json.loads(await part.text())  # type: ignore[union-attr]
            elif name.startswith("files["):
                index = int(name[6:-1])
                content = await part.read(decode=False)  # type: ignore[union-attr]
                files.append(
                    FileUpload(index, getattr(part, "filename", None) or name, bytes(content))
                )
        return payload, files
    if request.can_read_body:
        text = await request.text()
        return (json.loads(text) if text else {}), []
    return {}, []
