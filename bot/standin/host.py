"""What the route modules use of the stand-in: a protocol that ``server.FakeDiscord`` meets.

The server builds the routes and hands them itself; typed against this instead of the server's
class, the routes import nothing of the server, and the two are no import loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .gateway import Gateway
from .records import MessageRecord
from .world import World


class StandinHost(Protocol):
    world: World
    gateway: Gateway
    #: Seconds on the stand-in's clock (a test may stop or move it).
    clock: Callable[[], float]
    #: What the stand-in refused that no test expected, in words.
    failures: list[str]
    #: Registered application commands: per guild id, None for the global ones.
    commands: dict[int | None, list[dict[str, Any]]]

    def _client_has(self, check: Callable[[Any], bool]) -> Callable[[], bool] | None: ...

    def _dispatch_later(
        self, event: str, data: dict[str, Any], check: Callable[[], bool] | None = None
    ) -> None: ...

    async def flush(self, timeout: float = 2.0) -> None: ...  # noqa: ASYNC109 - as the server's

    def messages(
        self, channel_id: int, *, include_deleted: bool = False, visible_to: int | None = None
    ) -> list[MessageRecord]: ...

    def set_archived(self, thread_id: int, archived: bool) -> None: ...

    def thread_updated(self, thread_id: int) -> None: ...
