"""A trial that lacks a part says what to install in one line and exits 2 ("could not run"),
never with a traceback, so that CI and a person trying it tell a missing part from a fault."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# asyncpg hidden as if the postgres extra were not installed (an import of it fails).
WITHOUT_ASYNCPG = """
import sys
sys.modules["asyncpg"] = None
sys.argv = ["trial", *sys.argv[1:]]
from tests.trials.needs import run_trial
from tests.trials.{module} import main
sys.exit(run_trial("{module}", main))
"""


def run_without_asyncpg(module: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_ASYNCPG.format(module=module), *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_cluster_trial_without_the_postgres_extra_says_what_to_install():
    ran = run_without_asyncpg("cluster", "--adventures", "1")
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.strip().splitlines() == [
        "cluster: could not run: the Python module 'asyncpg' is missing: install the postgres "
        "extra: .venv/bin/pip install -e '.[postgres]' (scripts/test installs it)"
    ]
    assert "Traceback" not in ran.stdout + ran.stderr


def test_the_fault_trial_asked_for_postgresql_without_it_could_not_run():
    ran = run_without_asyncpg("faults", "--backend", "postgresql")
    assert ran.returncode == 2, ran.stderr
    assert "faults: could not run: the Python module 'asyncpg' is missing" in ran.stderr
    assert "Traceback" not in ran.stdout + ran.stderr
