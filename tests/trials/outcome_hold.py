"""Looking for a gap between a turn's commit and the record of its outcome, for a kill to land.

A process that dies after storing a turn but before marking its request done would leave a
stored turn whose request still says "running": a restart would announce it as interrupted,
and its Retry would play it twice. The two are written by one transaction
(``engine.turns.plan.Fence.stored``), so there is no such gap; ``OutcomeHold`` keeps trying
to find one, so that a kill would land in it every time:

* PostgreSQL: the request's row is locked (``FOR UPDATE``) while the turn streams; had the
  turn's transaction not touched that row it would commit while the request's update waited
  on the lock. It does, so it waits itself, and the kill finds nothing stored.
* SQLite has no row locks: a thread watches for the stored turn and takes the database's write
  lock the moment it appears. A quick process may mark its request done before that; ``held``
  then says the gap was missed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from engine.platform.coordination.request_status import RUNNING

_STORED = "SELECT count(*) FROM story_nodes WHERE role = 'player' AND text = :text"


class OutcomeHold:
    def __init__(self, url: str, stored_text: str) -> None:
        self.url = url
        self.stored_text = stored_text
        self.sqlite = make_url(url).get_backend_name() == "sqlite"
        #: Whether the turn was stored while its request was still running, and held there.
        self.held = False
        self._engine: AsyncEngine | None = None
        self._connection: AsyncConnection | None = None
        self._watcher: threading.Thread | None = None
        self._seen = threading.Event()
        self._stop = threading.Event()
        self._lock: sqlite3.Connection | None = None
        self._locked_rows = 0

    async def start(self, adventure_id: int) -> None:
        """Once the turn runs (its request marked running): keep its outcome from being stored."""
        if self.sqlite:
            self._watcher = threading.Thread(target=self._watch, daemon=True)
            self._watcher.start()
            return
        self._engine = create_async_engine(self.url)
        self._connection = await self._engine.connect()
        await self._connection.begin()
        locked = await self._connection.execute(
            text(
                "SELECT interaction_id FROM request_records "
                "WHERE adventure_id = :adventure AND status = :running FOR UPDATE"
            ),
            {"adventure": adventure_id, "running": RUNNING},
        )
        self._locked_rows = len(locked.all())

    async def wait_stored(self, seconds: float) -> bool:
        """Until the turn is stored (and, on SQLite, the write lock taken); False if it is not
        within ``seconds``."""
        if self.sqlite:
            seen = await asyncio.to_thread(self._seen.wait, seconds)
            return seen
        assert self._engine is not None
        deadline = time.monotonic() + seconds
        async with self._engine.connect() as reader:
            while time.monotonic() < deadline:
                count = await reader.scalar(text(_STORED), {"text": self.stored_text})
                await reader.rollback()
                if count:
                    self.held = self._locked_rows > 0
                    return True
                await asyncio.sleep(0.005)
        return False

    def _watch(self) -> None:
        path = make_url(self.url).database
        assert path
        watcher = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        query = _STORED.replace(":text", "?")
        try:
            while not self._stop.is_set():
                (count,) = watcher.execute(query, (self.stored_text,)).fetchone()
                if count:
                    watcher.execute("BEGIN IMMEDIATE")
                    running = watcher.execute(
                        "SELECT count(*) FROM request_records WHERE status = ?", (RUNNING,)
                    ).fetchone()[0]
                    self.held = bool(running)
                    self._lock = watcher
                    self._seen.set()
                    return
                time.sleep(0.0005)
        except BaseException:
            watcher.close()
            raise
        watcher.close()

    async def release(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            await asyncio.to_thread(self._watcher.join)
        if self._lock is not None:
            self._lock.execute("ROLLBACK")
            self._lock.close()
            self._lock = None
        if self._connection is not None:
            await self._connection.rollback()
            await self._connection.close()
        if self._engine is not None:
            await self._engine.dispose()
