"""The story's shape for /tree: one lane per branch, where it leaves the lane it grew from, and
the marks along it (takes, save points, chapter ends, where the story stands).

Read with light columns and bounded work whatever a story holds: at most
:data:`NODES_READ_MAX` entries (the newest; an older start is said, not drawn), and lines found
in one walk over them, each entry visited once (a branch's walk stops at the first entry an
earlier branch already owns: that entry is where it leaves that branch). Drawn as text by
``picture`` and as an image by ``image``; both draw the same shape.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.storage.chapter_models import ChapterRecap
from engine.storage.models import Adventure, Branch, SavePoint, StoryNode

#: The most entries read for a picture: more than an imported story may hold (50,000), so only a
#: story played far past that loses its oldest stretch (read newest first, by the index's order).
NODES_READ_MAX = 60_000
#: The most save points and chapter recaps read (the newest): marks, not the story itself.
MARKS_READ_MAX = 500


class BranchRow(NamedTuple):
    """The columns of a branch that the shape needs."""

    id: int
    name: str
    tip_node_id: int | None


class Entry(NamedTuple):
    """The light columns of a story entry that the shape needs."""

    parent_id: int | None
    index: int
    take_count: int


@dataclass(frozen=True, slots=True)
class Lane:
    """One branch as drawn: from ``start`` (the last entry it shares with ``parent_id``'s
    lane, or its first entry) to ``tip``, its newest entry."""

    branch_id: int
    name: str
    parent_id: int | None
    start: int
    tip: int
    depth: int
    #: Entries on its own stretch with more than one take, by index: (index, takes).
    takes: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Mark:
    """A named place: a save point (``branch_id`` is the branch it was made on) or a chapter's
    end; ``lane_id`` is the lane whose stretch holds the entry, where it is drawn."""

    name: str
    branch_id: int | None
    lane_id: int | None
    index: int


@dataclass(frozen=True, slots=True)
class TreeShape:
    #: In drawing order: each lane followed by the lanes that leave it (depth first).
    lanes: tuple[Lane, ...]
    active_id: int | None
    #: The lane whose stretch holds the entry the story stands at, and that entry's index.
    head_lane: int | None
    head_index: int
    #: Whether the story stands at its branch's newest entry (else /redo walks on).
    at_tip: bool
    save_points: tuple[Mark, ...]
    chapters: tuple[Mark, ...]
    first_index: int
    last_index: int
    #: The oldest entries were not read (a story longer than ``NODES_READ_MAX``).
    cut: bool

    def lane(self, branch_id: int | None) -> Lane | None:
        return next((lane for lane in self.lanes if lane.branch_id == branch_id), None)

    def current_line(self) -> dict[int, tuple[int, int]]:
        """The path from the story's start to where it stands, as lane → (from, to) index:
        the head's lane up to the head, each lane above it up to where the next one leaves."""
        by_id = {lane.branch_id: lane for lane in self.lanes}
        line: dict[int, tuple[int, int]] = {}
        lane = by_id.get(self.head_lane) if self.head_lane is not None else None
        end = self.head_index
        while lane is not None and lane.branch_id not in line:
            line[lane.branch_id] = (lane.start, end)
            end = lane.start
            lane = by_id.get(lane.parent_id) if lane.parent_id is not None else None
        return line


def build_shape(
    branches: Sequence[BranchRow],
    entries: dict[int, Entry],
    active_id: int | None,
    head_id: int | None,
    save_points: list[tuple[str, int | None, int]],
    recaps: list[tuple[str, int | None]],
    *,
    cut: bool = False,
) -> TreeShape:
    """The shape of a story from its branches (oldest first), its entries by id, and its save
    points (name, branch, entry) and chapter recaps (title, entry that ended the chapter)."""
    owner: dict[int, int] = {}
    parent_of: dict[int, int | None] = {}
    spans: dict[int, tuple[int, int, tuple[tuple[int, int], ...]]] = {}
    for branch in branches:
        node = branch.tip_node_id if branch.tip_node_id in entries else None
        tip = entries[node].index if node is not None else 0
        own: list[int] = []
        while node is not None and node in entries and node not in owner:
            owner[node] = branch.id
            own.append(node)
            node = entries[node].parent_id
        if node is not None and node in owner:
            parent_of[branch.id] = owner[node]
            start = entries[node].index
        else:
            parent_of[branch.id] = None
            start = entries[own[-1]].index if own else 0
        takes = tuple(
            sorted(
                (entries[n].index, entries[n].take_count) for n in own if entries[n].take_count > 1
            )
        )
        spans[branch.id] = (start, tip, takes)
    names = {branch.id: branch.name for branch in branches}
    children: dict[int | None, list[int]] = {}
    for branch in branches:
        children.setdefault(parent_of[branch.id], []).append(branch.id)
    lanes: list[Lane] = []
    # Depth first without recursion: a chain of a thousand nested branches is a valid story.
    stack = [(branch_id, 0) for branch_id in reversed(children.get(None, []))]
    while stack:
        branch_id, depth = stack.pop()
        start, tip, takes = spans[branch_id]
        lanes.append(
            Lane(branch_id, names[branch_id], parent_of[branch_id], start, tip, depth, takes)
        )
        stack.extend((child, depth + 1) for child in reversed(children.get(branch_id, [])))
    active_tip = next((b.tip_node_id for b in branches if b.id == active_id), None)
    head = entries.get(head_id) if head_id is not None else None
    indexes = [entry.index for entry in entries.values()]

    def mark(name: str, branch_id: int | None, node_id: int | None) -> Mark | None:
        if node_id is None or node_id not in entries:
            return None
        return Mark(name, branch_id, owner.get(node_id, branch_id), entries[node_id].index)

    points = [mark(name, branch_id, node_id) for name, branch_id, node_id in save_points]
    # A retry that ends the chapter again writes another version at the same entry: one mark.
    ends = [mark(title, None, node_id) for title, node_id in dict.fromkeys(recaps)]
    return TreeShape(
        lanes=tuple(lanes),
        active_id=active_id,
        head_lane=owner.get(head_id) if head_id is not None else None,
        head_index=head.index if head is not None else 0,
        at_tip=head_id is not None and head_id == active_tip,
        save_points=tuple(p for p in points if p is not None),
        chapters=tuple(m for m in ends if m is not None and m.lane_id is not None),
        first_index=min(indexes, default=0),
        last_index=max(indexes, default=0),
        cut=cut,
    )


async def read_shape(session: AsyncSession, adventure: Adventure) -> TreeShape:
    """The shape of ``adventure``'s story, read in a few light queries and built in a worker
    thread (a long story's walk takes a tenth of a second or more: not on the event loop)."""
    branches = await session.execute(
        select(col(Branch.id), col(Branch.name), col(Branch.tip_node_id))
        .where(col(Branch.adventure_id) == adventure.id)
        .order_by(col(Branch.created_at), col(Branch.id))
    )
    rows = await session.execute(
        select(
            col(StoryNode.id),
            col(StoryNode.parent_id),
            col(StoryNode.index),
            col(StoryNode.take_count),
        )
        .where(col(StoryNode.adventure_id) == adventure.id)
        .order_by(col(StoryNode.index).desc())
        .limit(NODES_READ_MAX + 1)
    )
    points = await session.execute(
        select(col(SavePoint.name), col(SavePoint.branch_id), col(SavePoint.node_id))
        .where(col(SavePoint.adventure_id) == adventure.id)
        .order_by(col(SavePoint.id).desc())
        .limit(MARKS_READ_MAX)
    )
    recaps = await session.execute(
        select(col(ChapterRecap.title), col(ChapterRecap.node_id))
        .where(col(ChapterRecap.adventure_id) == adventure.id)
        .order_by(col(ChapterRecap.id).desc())
        .limit(MARKS_READ_MAX)
    )
    return await asyncio.to_thread(
        _built,
        [BranchRow(*row) for row in branches.all()],
        rows.tuples().all(),
        adventure.active_branch_id,
        adventure.head_node_id,
        [(p.name, p.branch_id, p.node_id) for p in reversed(points.all())],
        [(r.title, r.node_id) for r in reversed(recaps.all())],
    )


def _built(
    branches: list[BranchRow],
    rows: Sequence[tuple[int | None, int | None, int, int]],
    active_id: int | None,
    head_id: int | None,
    save_points: list[tuple[str, int | None, int]],
    recaps: list[tuple[str, int | None]],
) -> TreeShape:
    # Stored rows: every id is set (the column's type allows None before a row is stored).
    entries = {
        node_id: Entry(parent_id, index, takes)
        for node_id, parent_id, index, takes in rows
        if node_id is not None
    }
    cut = len(entries) > NODES_READ_MAX
    if cut:
        # The entries read past the limit are of the oldest index read: drop that whole index,
        # so that every line read starts at one index.
        oldest = min(entry.index for entry in entries.values())
        entries = {i: e for i, e in entries.items() if e.index > oldest}
    return build_shape(branches, entries, active_id, head_id, save_points, recaps, cut=cut)
