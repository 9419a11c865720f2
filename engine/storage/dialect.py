"""What differs between SQLite and PostgreSQL, in one place.

The rest of the engine writes portable SQLAlchemy and comes here where the two backends differ:

* connecting (``create_engine``): SQLite's file, its pragmas and its driver
  (``sqlite_driver``), PostgreSQL's pre-ping;
* upserts (``insert_for``): both speak ``INSERT … ON CONFLICT``, each through its own construct;
* row locks (``locked_read``): PostgreSQL locks the row, SQLite takes its one write lock;
* start-up's schema work and seeding, one process at a time (``hold_setup_lock``);
* full-text search (``FullTextTable``, ``term_hits_query``): SQLite's FTS5 tables,
  PostgreSQL's ``tsvector`` columns; the few functions spelled differently (``spelling``);
  SQLite's ``ln`` where the build lacks its math functions.

Migrations keep their own branches: they describe the schema per backend as it was at their
revision, and must not change when this module does.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Table, event, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    create_async_engine,
)

from engine.storage import sqlite_driver
from engine.storage.private_files import private_sqlite_database

# How long an SQLite writer waits for another one before giving up, in milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 10_000


def is_postgres(session: AsyncSession) -> bool:
    return session.get_bind().dialect.name == "postgresql"


# --- connecting ----------------------------------------------------------------------------------


#: Connections a process keeps open to PostgreSQL, and how many more it may open at a peak.
#: SQLAlchemy's 5 + 10 made hundreds of turns at once wait past the pool's 30 s for a
#: connection and fail (the cluster trial, one process, 600 adventures); 10 + 20 leaves three
#: processes within PostgreSQL's default 100 connections.
POSTGRES_POOL_SIZE = 10
POSTGRES_POOL_OVERFLOW = 20

#: The PostgreSQL advisory lock start-up's migrations and seeding hold (any fixed number that
#: nothing else uses as a key; this one spells "Camp").
SETUP_LOCK_KEY = 0x43616D70


async def hold_setup_lock(connection: AsyncConnection | AsyncSession) -> None:
    """Make the caller's transaction wait for, then hold until it ends, the one lock of
    start-up's schema work: several processes started at once on a fresh PostgreSQL database
    would otherwise each create the tables (all but one failing on them) and each insert the
    shipped scenarios. On SQLite the transaction's write lock already serialises them."""
    bind = connection.get_bind() if isinstance(connection, AsyncSession) else connection
    if bind.dialect.name != "postgresql":
        return
    await connection.execute(select(func.pg_advisory_xact_lock(SETUP_LOCK_KEY)))


def create_engine(url: str, *, echo: bool = False) -> AsyncEngine:
    """An engine for ``url``, set up for its backend."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        # A pooled PostgreSQL connection can be dropped by the server while it waits.
        return create_async_engine(
            url,
            echo=echo,
            pool_pre_ping=True,
            pool_size=POSTGRES_POOL_SIZE,
            max_overflow=POSTGRES_POOL_OVERFLOW,
        )
    if parsed.database and parsed.database != ":memory:" and not parsed.query.get("uri"):
        # Created owner-only before SQLite opens it: its -wal and -shm files take its mode.
        private_sqlite_database(Path(parsed.database).expanduser())
    driver = sqlite_driver.dbapi()
    engine = create_async_engine(url, echo=echo, **({"module": driver} if driver else {}))
    event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers go on while a turn is written; foreign keys are off by default in
    # SQLite and the cascading deletes depend on them.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    try:
        cursor.execute("SELECT ln(1)")
    except sqlite3.OperationalError:
        # Lexical retrieval scores in SQL with ln(); a build without SQLite's math functions
        # gets Python's, which computes the same.
        dbapi_connection.create_function("ln", 1, _ln, deterministic=True)
    cursor.close()


def _ln(x: float | None) -> float | None:
    return math.log(x) if x is not None and x > 0 else None


# --- writing and locking -------------------------------------------------------------------------


class WriteGateTimeout(Exception):
    """A write transaction waited too long for its process's SQLite write gate
    (``engine.storage.database.Database.transaction``): a busy database, as SQLite's own
    "database is locked" is."""


#: PostgreSQL's codes for "waited for another transaction's lock and gave up": lock_not_available,
#: deadlock_detected, serialization_failure.
_POSTGRES_BUSY = frozenset({"55P03", "40P01", "40001"})


def is_busy(error: BaseException) -> bool:
    """Whether ``error`` means another writer held the database past our wait (SQLite's
    "database is locked" after its busy timeout; PostgreSQL's lock and serialisation
    failures): nothing is wrong with the request, and trying again in a moment can work."""
    if isinstance(error, WriteGateTimeout):
        return True
    if not isinstance(error, DBAPIError):
        return False
    cause = error.orig
    code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    # SQLite's SQLITE_BUSY, as its driver words it.
    return code in _POSTGRES_BUSY or "database is locked" in str(cause)


def insert_for(session: AsyncSession, table: Any) -> Any:
    """The backend's own ``INSERT`` construct for ``table`` (a model or a core table), which
    has ``on_conflict_do_update`` / ``on_conflict_do_nothing`` for upserts."""
    return (postgresql.insert if is_postgres(session) else sqlite.insert)(table)


def locked_read(
    session: AsyncSession, table: Table, columns: Sequence[Any], where: ColumnElement[bool]
) -> Any:
    """A statement that reads ``columns`` of the rows ``where`` selects and keeps them from
    changing until the transaction ends.

    PostgreSQL: ``SELECT ... FOR UPDATE``. SQLite has no row locks, and with Python's sqlite3 a
    plain SELECT even runs outside the transaction; a (no-op) UPDATE opens the transaction and
    takes the database's write lock, which every other writer waits for.
    """
    if is_postgres(session):
        return table.select().with_only_columns(*columns).where(where).with_for_update()
    first = columns[0]
    return update(table).where(where).values({first.key: first}).returning(*columns)


# --- full-text search ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FullTextTable:
    """A table with text and the full-text structures a migration built over that text: an FTS5
    table on SQLite (external content, its rowid the row's id), a stored ``tsvector`` column on
    PostgreSQL. Only what the queries need is named; which column is indexed is the
    migration's business."""

    table: str
    id_column: str
    #: SQLite: the FTS5 table.
    fts_table: str
    #: PostgreSQL: the ``tsvector`` column, and the text search configuration it was built with.
    tsvector_column: str
    text_search_config: str = "english"
    #: Boolean columns that hide a row from the search while true ("forgotten").
    hidden_when: tuple[str, ...] = ()
    #: A boolean column whose true rows every search returns, whatever they share ("pinned").
    always_when: str | None = None
    #: A number column that multiplies a row's squashed score when the search ranks
    #: (``engine.llm.retrieval.lexical``; knowledge: its class's weight). None: the raw score ranks.
    weight_column: str | None = None
    #: SQLite: a column the FTS5 table indexes too ("adventure_id", "library"). A search
    #: scoped by it matches its value (or one of its values) with each term, so FTS5 reads a
    #: term's entries only where they meet the scope's instead of every row's in the table.
    fts_scope_column: str | None = None
    #: SQLite: the FTS5 columns the terms are matched in, where the scope column's own words
    #: could be taken for a term's ("adventure" in "adventure:7"). Empty: every column.
    fts_text_columns: tuple[str, ...] = ()


def in_scope(table: FullTextTable, scope: Mapping[str, object], params: dict[str, object]) -> str:
    """The condition (over the table aliased ``t``) that a row is in ``scope`` (columns it must
    equal, ``{"adventure_id": 7}``, or be one of, given a tuple: ``{"library": ("server:1",
    "adventure:7")}``) and not hidden; the scope's values are bound into ``params``. Names of
    tables and columns come from code, never from players."""
    conditions = []
    for n, (column, value) in enumerate(scope.items()):
        if isinstance(value, tuple):
            names = [f"s{n}_{i}" for i in range(len(value))]
            params.update(zip(names, value, strict=True))
            listed = ", ".join(f":{name}" for name in names)
            conditions.append(f"t.{column} IN ({listed})" if names else "1 = 0")
            continue
        params[f"s{n}"] = value
        conditions.append(f"t.{column} = :s{n}")
    conditions += [f"NOT t.{column}" for column in table.hidden_when]
    return " AND ".join(conditions) or "1 = 1"


def term_hits_query(
    session: AsyncSession,
    table: FullTextTable,
    terms: Sequence[str],
    scope: Mapping[str, object],
    params: dict[str, object],
) -> str:
    """A select of one row ``(term, id)`` for each term and each row in ``scope`` that matches
    it: the term's position in ``terms`` and the row's id. Each term is matched on its own, so
    a row's shared terms are known. The terms and the scope's values are bound into
    ``params``; with no terms, it selects no rows."""
    sqlite_fts = not is_postgres(session)
    scoped = _fts_scope(table, scope)
    if sqlite_fts and scoped and set(scope) == {table.fts_scope_column}:
        return _scoped_term_hits(table, terms, scoped, scope, params)
    filters = in_scope(table, scope, params)
    t, row_id = table.table, table.id_column
    parts = []
    for i, term in enumerate(terms):
        # The term's number is inlined (it is ours, an int): a bound parameter in a select
        # list has no type PostgreSQL could infer.
        if sqlite_fts:
            params[f"q{i}"] = scoped + _fts_term(table, term)
            # The full-text index drives (one lookup per term); joined the other way round,
            # SQLite would run the MATCH once per row in scope.
            parts.append(
                f"SELECT {i} AS term, t.{row_id} AS id FROM {t} AS t "
                f"WHERE t.{row_id} IN (SELECT rowid FROM {table.fts_table} "
                f"WHERE {table.fts_table} MATCH :q{i}) AND {filters}"
            )
        else:
            params[f"q{i}"] = term
            parts.append(
                f"SELECT {i} AS term, t.{row_id} AS id FROM {t} AS t "
                f"WHERE t.{table.tsvector_column} @@ "
                f"plainto_tsquery('{table.text_search_config}', :q{i}) AND {filters}"
            )
    return " UNION ALL ".join(parts) or "SELECT 0 AS term, 0 AS id WHERE 1 = 0"


def _phrase(text: str) -> str:
    """``text`` as an FTS5 phrase: read through the tokenizer as words, never as the query
    syntax."""
    return '"' + text.replace('"', '""') + '"'


def _fts_term(table: FullTextTable, term: str) -> str:
    """A term as FTS5 matches it: a phrase, in the table's text columns where it names them."""
    columns = " ".join(table.fts_text_columns)
    return f"{{{columns}}} : {_phrase(term)}" if columns else _phrase(term)


def _fts_scope(table: FullTextTable, scope: Mapping[str, object]) -> str:
    """The FTS5 condition that keeps a match to the scope's value(s) of the index's scope
    column, ``'adventure_id : ("7") AND '``; "" where the scope does not name that column or a
    value is not a whole number or a word-bearing string (then the table's filters alone
    decide). Each value is a phrase: FTS5 reads it through the tokenizer as the index did."""
    column = table.fts_scope_column
    if column is None or column not in scope:
        return ""
    value = scope[column]
    values = value if isinstance(value, tuple) else (value,)
    phrases = []
    for one in values:
        if isinstance(one, bool) or not isinstance(one, int | str):
            return ""
        if not any(character.isalnum() for character in str(one)):
            return ""
        phrases.append(_phrase(str(one)))
    if not phrases:
        return ""
    return f"{column} : ({' OR '.join(phrases)}) AND "


def _scoped_term_hits(
    table: FullTextTable,
    terms: Sequence[str],
    scoped: str,
    scope: Mapping[str, object],
    params: dict[str, object],
) -> str:
    """``term_hits_query`` on SQLite when the scope is the index's scope column alone: the
    index's MATCH already keeps to the scope's rows (the table's triggers keep the column in
    step with the row), so the table is read only for the scope's hidden rows, once, instead of
    once for every row each term matches."""
    fts, row_id = table.fts_table, table.id_column
    matches = []
    for i, term in enumerate(terms):
        params[f"q{i}"] = scoped + _fts_term(table, term)
        matches.append(f"SELECT {i} AS term, rowid AS id FROM {fts} WHERE {fts} MATCH :q{i}")
    if not matches:
        return "SELECT 0 AS term, 0 AS id WHERE 1 = 0"
    union = " UNION ALL ".join(matches)
    if not table.hidden_when:
        return union
    in_place = in_scope(replace(table, hidden_when=()), scope, params)
    hidden = " OR ".join(f"t.{column}" for column in table.hidden_when)
    # The hidden rows are read once, first: SQLite pushes the NOT IN down into every MATCH of
    # the union, and would read the scope's rows again for each term (a fifth of the search's
    # time with 29 terms and 200 memories). "+m.id": it would otherwise hand the NOT IN to FTS5
    # as a rowid constraint on every MATCH, and run each once per hidden row.
    return (
        f"WITH hidden AS MATERIALIZED (SELECT t.{row_id} AS id FROM {table.table} AS t "
        f"WHERE {in_place} AND ({hidden})) "
        f"SELECT m.term, m.id FROM ({union}) AS m WHERE +m.id NOT IN (SELECT id FROM hidden)"
    )


@dataclass(frozen=True, slots=True)
class SqlSpelling:
    """How each backend spells what a portable statement needs (``{}`` takes the argument)."""

    #: The texts of a group joined with commas.
    joined: str
    #: The larger of two numbers.
    greatest: str
    #: A non-negative number rounded down to a whole one.
    whole: str
    #: A number as a double-precision float.
    double: str
    #: The sum of ``1 << {}`` over a group, as a 64-bit integer (each shift a distinct bit).
    bits: str
    #: An inner join that keeps the left table as the outer loop.
    join_in_order: str


_SQLITE_SPELLING = SqlSpelling(
    joined="group_concat({})",
    greatest="max({}, {})",
    whole="CAST({} AS INTEGER)",
    double="CAST({} AS REAL)",
    bits="sum(1 << {})",
    # SQLite's planner takes CROSS JOIN's order as written.
    join_in_order="CROSS JOIN",
)
_POSTGRES_SPELLING = SqlSpelling(
    joined="string_agg({}, ',')",
    greatest="greatest({}, {})",
    whole="floor({})",
    double="CAST({} AS double precision)",
    bits="CAST(sum(CAST(1 AS bigint) << {}) AS bigint)",
    join_in_order="JOIN",
)


def spelling(session: AsyncSession) -> SqlSpelling:
    return _POSTGRES_SPELLING if is_postgres(session) else _SQLITE_SPELLING
