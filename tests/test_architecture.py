"""The dependency rule, checked on the source.

The layers (``bot → cogs → engine``, the engine's floors), the engine never importing a front
end, cogs never importing storage, and no import loop are import-linter's contracts
(``[tool.importlinter]`` in ``pyproject.toml``, docs/ARCHITECTURE.md); ``scripts/test`` runs
them, and so does the first test here, so that pytest alone catches a broken one. What
import-linter cannot say is checked here by reading the code's syntax trees: a cog never holds a
database handle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_import_contracts_hold():
    ran = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    assert "Contracts: 5 kept, 0 broken." in ran.stdout


def python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def database_handles(path: Path) -> list[str]:
    """Where a cog touches a database handle: any ``<something>.db``, or the name Database."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("db", "Database"):
            found.append((node.lineno, f"{ast.unparse(node)}"))
        elif isinstance(node, ast.Name) and node.id == "Database":
            found.append((node.lineno, "Database"))
        elif isinstance(node, ast.alias) and node.name.rpartition(".")[2] == "Database":
            found.append((node.lineno, f"import {node.name}"))
    return [f"{_where(path, line)}: {what}" for line, what in sorted(found)]


def test_no_cog_passes_a_database_handle():
    """A cog calls a service; it never hands the engine a database to run queries on."""
    wrong = [where for path in python_files("cogs") for where in database_handles(path)]
    assert not wrong, f"{len(wrong)} database handles in cogs:\n" + "\n".join(wrong)
