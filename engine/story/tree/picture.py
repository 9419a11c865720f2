"""The story's shape as a compact text diagram, for /tree."""

from __future__ import annotations

from typing import Any

from engine.storage.models import Branch


def _stored_id(branch: Branch) -> int:
    assert branch.id is not None  # the branches drawn are stored rows
    return branch.id


def draw_tree(
    branches: list[Branch],
    lines: dict[int, dict[int, int]],
    active_id: int | None,
    head_id: int | None,
    head_line: dict[int, int],
    points: list[Any],
) -> str:
    """A compact diagram: one row per branch, indented under the branch it leaves."""
    parent_of: dict[int, int | None] = {}
    fork_at: dict[int, int] = {}
    seen: list[Branch] = []
    for branch in branches:
        branch_id = _stored_id(branch)
        line = lines.get(branch_id, {})
        best: tuple[int, int | None] = (-1, None)
        for earlier in seen:
            earlier_id = _stored_id(earlier)
            shared = [i for n, i in line.items() if n in lines.get(earlier_id, {})]
            depth = max(shared) if shared else -1
            if depth > best[0]:
                best = (depth, earlier_id)
        parent_of[branch_id] = best[1]
        fork_at[branch_id] = max(best[0], 0)
        seen.append(branch)
    head_index = head_line.get(head_id, 0) if head_id is not None else 0
    rows: list[str] = []

    def draw(branch: Branch, depth: int) -> None:
        branch_id = _stored_id(branch)
        line = lines.get(branch_id, {})
        tip = max(line.values()) if line else 0
        start = fork_at[branch_id] if parent_of[branch_id] is not None else 0
        length = max(tip - start, 0)
        bar = "━" * min(length, 24) + ("…" if length > 24 else "")
        prefix = "  " * (depth - 1) + "┗" if depth else ""
        where = f"from {start} " if parent_of[branch_id] is not None else ""
        text = f"{prefix}{branch.name} {where}{bar}● {tip}"
        if branch_id == active_id:
            text += "  ◀ here" if head_id in line and head_index == tip else f"  ◀ at {head_index}"
        marks = [f"⚑{p.name}@{p.node_index}" for p in points if p.branch_id == branch_id]
        if marks:
            text += "  " + " ".join(marks)
        rows.append(text)
        for child in branches:
            if parent_of[_stored_id(child)] == branch_id:
                draw(child, depth + 1)

    for branch in branches:
        if parent_of[_stored_id(branch)] is None:
            draw(branch, 0)
    return "\n".join(rows)
