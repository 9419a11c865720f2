"""One cache of compiled SQL for all the engines a test process makes.

SQLAlchemy compiles a statement once and keeps the result in the engine's cache (and, for the
inserts and updates of a flush, in the mapper's), keyed by the dialect object of the engine that
compiled it. A running Campfire has one engine a process, so each statement is compiled once. The
suite makes two engines a test (the test's own and its bot's, on a fresh database each time), and
so compiled every statement again in every test: about a tenth of the suite's CPU.

Here, for the test processes only, compiled statements are keyed by the dialect's class instead
of its object, and every engine that ``engine.storage.dialect.create_engine`` makes shares one
cache. That is sound because those engines are made alike (the same options, against the same
SQLite library or the same PostgreSQL server), so a statement compiles to the same SQL for each;
what is gone is only the copy per engine. Nothing of Campfire's own code changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy.util
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import LRUCache

#: Distinct statements Campfire runs, with room to spare (SQLAlchemy's default per engine: 500).
CAPACITY = 20_000


def _by_class(key: Any) -> Any:
    # SQLAlchemy's compiled-cache keys are tuples led by the dialect object.
    if isinstance(key, tuple) and key and isinstance(key[0], Dialect):
        return (type(key[0]), *key[1:])
    return key


class CompiledAcrossEngines(LRUCache[Any, Any]):
    """SQLAlchemy's LRU cache, with a compiled statement's key naming its dialect's class."""

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(_by_class(key), default)

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(_by_class(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(_by_class(key), value)

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(_by_class(key))

    def __contains__(self, key: object) -> bool:
        return _by_class(key) in self._data


@contextmanager
def shared_compiled_cache() -> Iterator[CompiledAcrossEngines]:
    """For as long as it is held: every engine Campfire makes shares one compiled cache, and the
    caches SQLAlchemy makes from now on (the mappers', at their first flush) key by class."""
    shared = CompiledAcrossEngines(CAPACITY)
    import engine.storage.dialect as dialect

    make: Callable[..., AsyncEngine] = dialect.create_async_engine

    def create_async_engine(*args: Any, **kwargs: Any) -> AsyncEngine:
        made = make(*args, **kwargs)
        made.sync_engine._compiled_cache = shared
        return made

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlalchemy.util, "LRUCache", CompiledAcrossEngines)
        patch.setattr(dialect, "create_async_engine", create_async_engine)
        yield shared
