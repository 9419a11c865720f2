"""Every database write the bot makes, with the moment it was sent, on the stand-in's clock;
and the write transactions it commits.

Discord gives an interaction 3 seconds to be answered, and a write can wait far longer than
that for the database's lock (another turn being stored, SQLite's one writer, a PostgreSQL
row lock). So an interaction is acknowledged (deferred or answered) before it writes; this
recorder is how a test sees that it was: each write's time is comparable with an
``InteractionRecord``'s ``created`` and ``acknowledged``.

What counts as a write is what takes a lock others wait for: ``INSERT``, ``UPDATE``,
``DELETE`` (also when a ``WITH`` leads them), schema changes, and ``SELECT … FOR UPDATE`` /
``FOR SHARE``. On SQLite the engine's row-lock stand-in is a no-op ``UPDATE``
(``engine.storage.dialect.locked_read``), already counted as one.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

_WRITE_VERB = re.compile(
    r"^\s*(?:WITH\b.*?\)\s*)?(INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER)\b",
    re.IGNORECASE | re.DOTALL,
)
_ROW_LOCK = re.compile(r"\bFOR\s+(?:NO\s+KEY\s+)?(?:UPDATE|SHARE|KEY\s+SHARE)\b", re.IGNORECASE)


def is_write(statement: str) -> bool:
    """Whether ``statement`` writes or takes a write lock."""
    return bool(_WRITE_VERB.match(statement) or _ROW_LOCK.search(statement))


@dataclass(frozen=True, slots=True)
class Write:
    at: float  # on the recorder's clock
    statement: str
    task: str  # the asyncio task that sent it, to say who wrote

    def __str__(self) -> str:
        first = " ".join(self.statement.split())[:120]
        return f"{first} (task {self.task})"


class WriteRecorder:
    """Records each write sent through ``engine`` while ``recording`` is open; with
    ``reads_too``, every statement (no database access at all is allowed before Discord is
    answered)."""

    def __init__(
        self, engine: AsyncEngine, clock: Callable[[], float], *, reads_too: bool = False
    ) -> None:
        self.engine = engine.sync_engine
        self.clock = clock
        self.reads_too = reads_too
        self.writes: list[Write] = []

    def _seen(
        self,
        _connection: Any,
        _cursor: Any,
        statement: str,
        _parameters: Any,
        _context: Any,
        _executemany: bool,
    ) -> None:
        if not (self.reads_too or is_write(statement)):
            return
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no loop running in this thread
            task = None
        name = task.get_name() if task is not None else "?"
        self.writes.append(Write(self.clock(), statement, name))

    @contextmanager
    def recording(self) -> Iterator[WriteRecorder]:
        event.listen(self.engine, "before_cursor_execute", self._seen)
        try:
            yield self
        finally:
            event.remove(self.engine, "before_cursor_execute", self._seen)

    def between(self, start: float, end: float) -> list[Write]:
        """The writes sent from ``start`` (included) until ``end`` (excluded)."""
        return [w for w in self.writes if start <= w.at < end]


class WriteTransactions:
    """Counts the transactions that wrote something and committed, through ``engine``, while
    ``counting`` is open: a turn's cost in the database's one writer lock (SQLite) and in
    commits (both)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine.sync_engine
        #: Per committed write transaction, the first write it sent (to say which it was).
        self.committed: list[str] = []
        #: Per committed write transaction, every write it sent (each one's start).
        self.writes: list[list[str]] = []
        self._open: dict[int, list[str]] = {}

    def _begin(self, connection: Any) -> None:
        self._open.pop(id(connection), None)

    def _seen(self, connection: Any, _c: Any, statement: str, *_: Any) -> None:
        if is_write(statement):
            self._open.setdefault(id(connection), []).append(" ".join(statement.split())[:100])

    def _commit(self, connection: Any) -> None:
        writes = self._open.pop(id(connection), None)
        if writes:
            self.committed.append(writes[0])
            self.writes.append(writes)

    def _rollback(self, connection: Any) -> None:
        self._open.pop(id(connection), None)

    @contextmanager
    def counting(self) -> Iterator[WriteTransactions]:
        hooks = {
            "begin": self._begin,
            "before_cursor_execute": self._seen,
            "commit": self._commit,
            "rollback": self._rollback,
        }
        for name, hook in hooks.items():
            event.listen(self.engine, name, hook)
        try:
            yield self
        finally:
            for name, hook in hooks.items():
                event.remove(self.engine, name, hook)

    def since(self, mark: int) -> list[str]:
        """The write transactions committed after ``mark`` (a length of ``committed``)."""
        return self.committed[mark:]
