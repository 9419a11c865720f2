"""What a trial needs before it can run, said in one line instead of a traceback.

Every trial exits 0 when it ran and found nothing wrong, 1 when it ran and found a fault, and 2
when it could not run at all (a missing extra, no PostgreSQL): ``run_trial`` turns a
``CannotRun`` raised anywhere in a trial into that one line and exit status 2, so that CI, and
anyone trying a trial by hand, can tell "Campfire is broken" from "this machine lacks a part".
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The exit status of a trial that could not run (argparse's own for a wrong option).
COULD_NOT_RUN = 2
INSTALL_POSTGRES_EXTRA = (
    "install the postgres extra: .venv/bin/pip install -e '.[postgres]' (scripts/test installs it)"
)


class CannotRun(Exception):
    """The trial lacks something this machine does not give it; the message says what to do."""


def require_module(module: str, how: str) -> None:
    """Raise ``CannotRun`` when ``module`` is not importable; ``how`` says how to get it."""
    try:
        importlib.import_module(module)
    except ImportError:
        raise CannotRun(f"the Python module {module!r} is missing: {how}") from None


@contextlib.contextmanager
def postgres_server(say: Callable[[str], None], port: int) -> Iterator[str]:
    """The PostgreSQL server to use: ``CAMPFIRE_TEST_POSTGRES_URL`` when set, else a throwaway
    one on ``port`` (``scripts/test-postgres``, which installs Debian's package as root), stopped
    at the end."""
    require_module("asyncpg", INSTALL_POSTGRES_EXTRA)
    url = os.environ.get("CAMPFIRE_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    env = {**os.environ, "CAMPFIRE_TEST_POSTGRES_PORT": str(port)}
    script = str(ROOT / "scripts" / "test-postgres")
    started = subprocess.run([script, "start"], env=env, capture_output=True, text=True)
    found = re.search(r"CAMPFIRE_TEST_POSTGRES_URL=(\S+)", started.stdout)
    if started.returncode != 0 or not found:
        why = (started.stderr.strip().splitlines() or ["it printed no URL"])[-1]
        raise CannotRun(
            f"no PostgreSQL server: set CAMPFIRE_TEST_POSTGRES_URL to one, or let "
            f"scripts/test-postgres start one (as root it installs Debian's postgresql "
            f"package; here it said: {why})"
        )
    say(f"started a throwaway PostgreSQL server on port {port}")
    try:
        yield found.group(1)
    finally:
        subprocess.run([script, "stop"], env=env, capture_output=True, check=False)


def run_trial(name: str, main: Callable[[], int]) -> int:
    """Run a trial's ``main``; a ``CannotRun`` becomes one line on standard error and exit
    status 2."""
    try:
        return main()
    except CannotRun as missing:
        print(f"{name}: could not run: {missing}", file=sys.stderr, flush=True)
        return COULD_NOT_RUN
