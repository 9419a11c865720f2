"""The fault trial: turns of a real Campfire played through the Discord stand-in against the
fake model server while things break, and the database checked after every fault.

    python -m tests.trials.faults [--backend sqlite|postgresql] [--keep] [-v]

Injected, on an SQLite file and on PostgreSQL where one can be had (``CAMPFIRE_TEST_POSTGRES_URL``
when it names a server, else a throwaway one started as the tests do; ``--backend`` picks one,
and then one that cannot be had is an exit status of 2):

* kill -9 of the bot mid-turn and a restart on the same database, five times
  (``kill_restart``);
* each model server fault: 500, 429 with Retry-After, 401, a timeout before any answer, a
  stream gone silent, a dropped connection, a malformed chunk, an empty reply, a stream that
  never ends (``live_faults``);
* Discord answering message edits with 500, 503 and 403 Missing Permissions (``live_faults``);
* the database locked by another connection for longer than the busy timeout while a turn
  commits (``live_faults``).

After each: the database check (``invariants``) and every action counted (``tally``). One line
per fault, then the counts; the last line is exactly
``faults: <N> injected, lost <n>, half-written <n>, duplicated <n>, stuck <n>``, and the exit
status is 1 when any of the last four is not 0, and 2 when it could not run (``needs``). Not
part of pytest's run (pytest collects ``test_*.py`` only): ``python -m tests.trials`` runs it in
CI. About two minutes per database.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from engine.storage.database import Database
from tests.fakes.openai_server import FakeModelServer
from tests.trials.kill_restart import run_kills
from tests.trials.live_faults import campfire, database_lock, discord_faults, provider_faults
from tests.trials.needs import CannotRun, postgres_server, run_trial
from tests.trials.tally import Tally

#: The model's read timeout and its limit on one whole reply, small so faults end quickly.
MODEL_TIMEOUT = 1.0
MODEL_REPLY_SECONDS = 3.0
#: The throwaway server's port when the trial starts one (the tests' default is 54329).
POSTGRES_PORT = 54349
PARTS = ("kills", "model", "discord", "database")


def say(line: str) -> None:
    print(line, flush=True)


def bot_settings(work: Path, database_url: str, model: FakeModelServer) -> dict[str, Any]:
    return {
        "data_dir": str(work / "data"),
        "database_url": database_url,
        "model_url": model.base_url,
        "model_name": model.model,
        "model_timeout": MODEL_TIMEOUT,
        # The total limit on one reply; ignored by a Campfire that has none.
        "model_reply_seconds": MODEL_REPLY_SECONDS,
        # Memories and summaries would take the fake model's scripted replies out of turn.
        "background_model_use": False,
        # The trial plays faster than a person: the turn rate limits are not what it checks.
        "turns_per_user_per_minute": 10_000,
        "turns_per_adventure_per_minute": 10_000,
        "log_level": "WARNING",
    }


@asynccontextmanager
async def database(server: str | None, work: Path) -> AsyncIterator[str]:
    """A fresh, empty database (the bot migrates it): an SQLite file when ``server`` is None,
    else one on that PostgreSQL server, dropped afterwards."""
    if server is None:
        yield f"sqlite+aiosqlite:///{work / 'campfire.db'}"
        return
    name = f"campfire_trial_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(server, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as connection:
            await connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        async with admin.connect() as connection:
            await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


async def run_backend(backend: str, server: str | None, work: Path, parts: list[str]) -> Tally:
    tally = Tally()
    async with database(server, work) as url:
        with FakeModelServer() as model:
            model.default_text = "The road goes on into the dusk."
            settings = bot_settings(work, url, model)
            db = Database(url)
            try:
                if "kills" in parts:
                    say(f"{backend}: kill -9 mid-turn and restart")
                    await run_kills(model, settings, db, tally, work / "bot.log", say)
                async with campfire(settings, work / "live.log") as live:
                    if "model" in parts:
                        say(f"{backend}: model server faults")
                        limits = (MODEL_TIMEOUT, MODEL_REPLY_SECONDS)
                        await provider_faults(live, model, tally, limits, say)
                    if "discord" in parts:
                        say(f"{backend}: Discord faults on edits")
                        await discord_faults(live, model, tally, say)
                    if "database" in parts:
                        say(f"{backend}: the database locked")
                        await database_lock(live, model, tally, say)
                    for failure in live.fake.failures:
                        tally.problems.append(f"Discord: {failure}")
            finally:
                await db.dispose()
            if model.errors:
                tally.problems.append(f"the fake model server failed: {model.errors!r}")
    say(f"{backend}: {tally.line()}")
    return tally


async def trial(servers: dict[str, str | None], work: Path, parts: list[str]) -> Tally:
    """The faults on each backend (its name → its PostgreSQL server, None for SQLite)."""
    tallies = {}
    for backend, server in servers.items():
        tallies[backend] = await run_backend(backend, server, work / backend, parts)
    return Tally.summed(tallies)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.trials.faults",
        description="Play Campfire through the Discord stand-in while injecting faults.",
    )
    parser.add_argument(
        "--backend",
        choices=["sqlite", "postgresql"],
        action="append",
        help="a database backend (default: SQLite, and PostgreSQL where one can be had: "
        "CAMPFIRE_TEST_POSTGRES_URL's server when set, else a throwaway one)",
    )
    parser.add_argument(
        "--part",
        choices=PARTS,
        action="append",
        help="only these faults (default: all of them)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the databases and logs")
    args = parser.parse_args(argv)
    backends = args.backend or ["sqlite", "postgresql"]
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="campfire-faults-"))
    try:
        with contextlib.ExitStack() as servers:
            where: dict[str, str | None] = {}
            for backend in backends:
                (work / backend).mkdir()
                if backend == "sqlite":
                    where[backend] = None
                    continue
                try:
                    where[backend] = servers.enter_context(postgres_server(say, POSTGRES_PORT))
                except CannotRun as missing:
                    if args.backend:  # asked for by name: the trial cannot do what it was told
                        raise
                    say(f"PostgreSQL left out: {missing}")
            total = asyncio.run(trial(where, work, args.part or list(PARTS)))
    finally:
        if args.keep:
            say(f"databases and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    for problem in total.problems:
        say(f"  - {problem}")
    say(f"({time.monotonic() - started:.0f} s)")
    say(total.line())
    return 1 if total.failed else 0


if __name__ == "__main__":
    sys.exit(run_trial("faults", main))
