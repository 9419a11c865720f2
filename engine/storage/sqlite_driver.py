"""SQLite through aiosqlite with one hand-off between threads a statement, not four.

aiosqlite runs every call on an SQLite connection in that connection's own thread and hands the
result back to the event loop. SQLAlchemy's adapter for it makes four such calls a statement:
open a cursor, execute, fetch every row, close the cursor; each is a wake-up of the thread and
then of the loop (about 0.12 ms apiece on an idle machine, 0.45 ms a statement). A turn's
context assembly runs six statements; a turn's writes a dozen more.

This adapter runs the same four steps in the connection's thread as one call: the statement
does what it did and returns what it returned (the rows, their description, the row count and
the last row id), only the hand-offs are fewer. Everything else is SQLAlchemy's adapter as it
is: transactions, errors (raised in the thread, re-raised on the loop, translated by
SQLAlchemy), server-side cursors (they fetch in steps, so they keep their own calls).

It queues its call through ``aiosqlite.Connection._execute``, the method aiosqlite's own
cursors use for theirs (aiosqlite 0.20-0.22, as pyproject pins). Where a version lacks it,
``dbapi()`` returns None and SQLAlchemy's stock adapter is used: slower, never wrong.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)

#: What one statement gives back from the connection's thread: its description (None for a
#: statement without rows), its rows, its last row id and its row count.
_Outcome = tuple[Any, list[Any] | None, int | None, int]


def _run(connection: aiosqlite.Connection, operation: str, parameters: Any, many: bool) -> _Outcome:
    """Run in the connection's thread: the statement from cursor to close."""
    cursor = connection._conn.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        elif parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        if cursor.description:
            return cursor.description, cursor.fetchall(), -1, -1
        return None, None, cursor.lastrowid, cursor.rowcount
    finally:
        cursor.close()


class _OneCallCursor(AsyncAdapt_aiosqlite_cursor):
    """SQLAlchemy's cursor with its statement run in one call of the connection's thread."""

    __slots__ = ()

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        self._run(operation, parameters, many=False)

    def executemany(self, operation: Any, seq_of_parameters: Any) -> Any:
        self._run(operation, seq_of_parameters, many=True)

    def _run(self, operation: Any, parameters: Any, *, many: bool) -> None:
        connection = self._connection
        try:
            description, rows, lastrowid, rowcount = self.await_(
                connection._execute(_run, connection, operation, parameters, many)  # type: ignore[attr-defined]
            )
        except Exception as error:
            self._adapt_connection._handle_exception(error)
        self.description = description
        if description is not None:
            self._rows = deque(rows or ())
            self.lastrowid = self.rowcount = -1
        else:
            self.lastrowid = lastrowid
            self.rowcount = rowcount


class _Connection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ()

    def cursor(self, server_side: bool = False) -> AsyncAdapt_aiosqlite_cursor:
        if server_side:
            return super().cursor(server_side=True)
        return _OneCallCursor(self)


class _DBAPI(AsyncAdapt_aiosqlite_dbapi):
    def connect(self, *arg: Any, **kw: Any) -> AsyncAdapt_aiosqlite_connection:
        adapted = super().connect(*arg, **kw)
        if type(adapted) is not AsyncAdapt_aiosqlite_connection:
            return adapted  # SQLAlchemy's synchronous fallback: left as it is
        return _Connection(self, adapted._connection)


def dbapi() -> AsyncAdapt_aiosqlite_dbapi | None:
    """The DBAPI module to give ``create_async_engine(module=…)`` for SQLite, or None where the
    installed aiosqlite does not queue calls the way this adapter relies on."""
    if not callable(getattr(aiosqlite.Connection, "_execute", None)):
        return None
    return _DBAPI(aiosqlite, sqlite3)
