"""The dependency rule, checked on the source: ``bot → cogs → engine``, never back.

These tests read the code's syntax trees and import nothing of it, so they hold even for a
module that no other test imports.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Top-level packages the engine must never import: the front ends sit above it.
# prometheus_client: the engine tells what happened (engine.observer); bot/metrics.py exports it.
ABOVE_THE_ENGINE = ("discord", "cogs", "bot", "prometheus_client")


@dataclass(frozen=True)
class Import:
    importer: str  # dotted name of the module that imports
    path: Path
    line: int
    modules: tuple[str, ...]  # `import a.b, c`: a.b and c; `from a import b`: a
    members: tuple[str, ...]  # `from a import b`: a.b, a submodule or a name in a
    type_checking_only: bool

    @property
    def names(self) -> tuple[str, ...]:
        return self.modules + self.members


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(module: str | None, level: int, importer: str, is_package: bool) -> str:
    if level == 0:
        return module or ""
    base = importer.split(".")
    # A package's own name is where its relative imports start; a module's is its package.
    base = base[: len(base) - level + (1 if is_package else 0)]
    return ".".join(base + ([module] if module else []))


def imports_in(path: Path) -> Iterator[Import]:
    """Every import statement in the file, at any depth (a function's deferred import too)."""
    importer = module_name(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def visit(node: ast.AST, guarded: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                modules = tuple(alias.name for alias in child.names)
                yield Import(importer, path, child.lineno, modules, (), guarded)
            elif isinstance(child, ast.ImportFrom):
                base = _absolute(child.module, child.level, importer, is_package)
                members = tuple(f"{base}.{alias.name}" for alias in child.names)
                yield Import(importer, path, child.lineno, (base,), members, guarded)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.body:
                    yield from visit(ast.Module(body=[statement], type_ignores=[]), True)
                for statement in child.orelse:
                    yield from visit(ast.Module(body=[statement], type_ignores=[]), guarded)
            else:
                yield from visit(child, guarded)

    yield from visit(tree, False)


def _top(name: str) -> str:
    return name.partition(".")[0]


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


# --- the engine ----------------------------------------------------------------------------------


def engine_graph() -> dict[str, dict[str, str]]:
    """Module → {engine module it imports → where}, for the imports that run.

    An import under ``if TYPE_CHECKING:`` is left out: it never runs, so it cannot make the
    half-initialised module that a cycle does, and it is how a type is named across layers
    without a runtime dependency. A deferred import inside a function is kept: it runs at the
    first call, and a cycle through it is a cycle in the design that the deferral only hides.
    """
    modules = {module_name(path): path for path in python_files("engine")}
    graph: dict[str, dict[str, str]] = {name: {} for name in modules}
    for path in modules.values():
        for found in imports_in(path):
            if found.type_checking_only:
                continue
            for target in _imported_modules(found, modules):
                if target != found.importer:
                    graph[found.importer].setdefault(target, _where(path, found.line))
    return graph


def _imported_modules(found: Import, modules: dict[str, Path]) -> Iterator[str]:
    """The engine modules an import statement runs, by the name each is known in ``modules``.

    ``from engine.memory import bank`` runs engine.memory.bank; ``from engine.memory import
    Bank`` runs engine.memory's ``__init__``. The parent package that Python also initialises on
    the way to a submodule is left out: a package's ``__init__`` importing its own submodules
    would otherwise look like a cycle with every one of them.
    """
    if found.members:
        names = [m if m in modules else found.modules[0] for m in found.members]
    else:
        names = list(found.modules)
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            yield name


def find_cycle(graph: dict[str, dict[str, str]]) -> list[str] | None:
    """One cycle as the modules along it (the first repeated at the end), or None."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" once cleared
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def test_the_engine_has_no_import_cycle():
    graph = engine_graph()
    assert len(graph) > 50  # the walk found the engine
    cycle = find_cycle(graph)
    if cycle:
        steps = [f"{a} → {b} ({graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False)]
        raise AssertionError("import cycle in engine/:\n  " + "\n  ".join(steps))


def test_the_engine_never_imports_a_front_end():
    # Here a TYPE_CHECKING import counts too: the engine should not even name Discord's types.
    wrong = [
        f"{_where(found.path, found.line)}: {module}"
        for path in python_files("engine")
        for found in imports_in(path)
        for module in found.modules
        if _top(module) in ABOVE_THE_ENGINE
    ]
    assert not wrong, "engine modules importing a front end:\n" + "\n".join(wrong)


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b": "x:1"}, "b": {"c": "x:2"}, "c": {"a": "x:3"}, "d": {"a": "x:4"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": "x:1"}, "b": {}}) is None


# --- the cogs ------------------------------------------------------------------------------------


def test_no_cog_imports_storage():
    """The cogs reach the database only through the engine's services."""
    # Members count: `from engine import storage` imports it through its parent.
    wrong = [
        f"{_where(found.path, found.line)}: {found.names[0]}"
        for path in python_files("cogs")
        for found in imports_in(path)
        if any(_within(name, "engine.storage") for name in found.names)
    ]
    assert not wrong, "cogs importing the storage layer:\n" + "\n".join(wrong)


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
