"""The package is whole: a wheel built from this checkout carries what Campfire reads at run
time (the shipped scenarios, the scripting prelude, the migrations), inside its packages, so an
install from it (``pip install .``, the Docker image) finds them as an editable install does.
The scenarios live in the top-level ``data/`` (data/README.md); the package reaches them through
a link, which the build follows."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: What the code reads beside its modules; each must be in the wheel.
RUNTIME_FILES = [
    "engine/library/scenarios/builtin/lantern-road.json",
    "engine/library/scenarios/builtin/bandit-camp.json",
    "engine/library/scripting/prelude.js",
    "engine/migrations/env.py",
    "engine/migrations/script.py.mako",
    "engine/migrations/versions/0001_initial_schema.py",
]


def test_a_built_wheel_carries_the_runtime_data(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    # As the Dockerfile copies them: the packages and data/, links kept as links.
    for folder in ("bot", "cogs", "engine", "data"):
        shutil.copytree(ROOT / folder, source / folder, ignore=ignore, symlinks=True)
    built = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta; "
            "print(build_meta.build_wheel(sys.argv[1]))",
            str(tmp_path / "dist"),
        ],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    wheel = tmp_path / "dist" / built.stdout.strip().splitlines()[-1]
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [name for name in RUNTIME_FILES if name not in names] == []
    shipped = sorted((ROOT / "data" / "scenarios").glob("*.json"))
    assert len(shipped) >= 3
    carried = [f"engine/library/scenarios/builtin/{path.name}" for path in shipped]
    assert [name for name in carried if name not in names] == []
    # Nothing outside the packages: the code never looks beside them.
    assert not any(name.startswith("data/") for name in names)
