"""What must hold in Campfire's database whatever failed: one check over the tables.

A turn is written in one transaction, so a fault at any moment must leave either the whole
turn or none of it. ``inconsistencies`` reads every table a turn touches and returns, in words,
each thing that could only come from a half-written turn or a lost piece of coordination; an
empty list means the database is whole.

``settled``: no turn is running anywhere (the bot is idle, or gone for good). Then every turn
lease must be free and every request finished. While a turn may still be running (or its
process was just killed), a held lease is allowed as long as it expires by itself.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlmodel import col

from engine.platform.coordination.jobs import DEFAULT_TTL as JOB_TTL
from engine.platform.coordination.leases import DEFAULT_TTL as TURN_TTL
from engine.platform.coordination.leases import FREE, as_utc
from engine.platform.coordination.request_status import (
    DONE,
    FAILED,
    INTERRUPTED,
    QUEUED,
    REFUSED,
    RETRIED,
    RUNNING,
)
from engine.storage.coordination_models import JobLease, RequestRecord, TurnLease
from engine.storage.database import Database
from engine.storage.models import Adventure, Branch, Role, StoryNode, Take, utcnow

#: Clock differences between the processes writing leases, and time spent checking.
SLACK = timedelta(seconds=5)
STATUSES = {QUEUED, RUNNING, DONE, FAILED, REFUSED, INTERRUPTED, RETRIED}


async def inconsistencies(db: Database, *, settled: bool) -> list[str]:
    """Every inconsistency found, in words (empty: the database is whole)."""
    found: list[str] = []
    async with db.session() as session:
        nodes = (
            await session.execute(
                select(
                    col(StoryNode.id),
                    col(StoryNode.adventure_id),
                    col(StoryNode.parent_id),
                    # "index" would be shadowed by the row's own index() method.
                    col(StoryNode.index).label("depth"),
                    col(StoryNode.role),
                    col(StoryNode.text),
                    col(StoryNode.live_take),
                    col(StoryNode.take_count),
                )
            )
        ).all()
        takes = (
            await session.execute(select(col(Take.node_id), col(Take.number), col(Take.text)))
        ).all()
        adventures = (
            await session.execute(
                select(
                    col(Adventure.id),
                    col(Adventure.head_node_id),
                    col(Adventure.active_branch_id),
                )
            )
        ).all()
        branches = (
            await session.execute(
                select(col(Branch.id), col(Branch.adventure_id), col(Branch.tip_node_id))
            )
        ).all()
        leases = (
            await session.execute(
                select(
                    col(TurnLease.adventure_id), col(TurnLease.holder), col(TurnLease.expires_at)
                )
            )
        ).all()
        jobs = (
            await session.execute(
                select(col(JobLease.name), col(JobLease.holder), col(JobLease.expires_at))
            )
        ).all()
        requests = (
            await session.execute(
                select(
                    col(RequestRecord.interaction_id),
                    col(RequestRecord.adventure_id),
                    col(RequestRecord.status),
                    col(RequestRecord.result),
                )
            )
        ).all()

    by_id = {n.id: n for n in nodes}
    children: Counter[int] = Counter(n.parent_id for n in nodes if n.parent_id is not None)
    roots: Counter[int] = Counter(n.adventure_id for n in nodes if n.parent_id is None)
    for node in nodes:
        where = f"node {node.id} (adventure {node.adventure_id})"
        if node.parent_id is None:
            if node.depth != 0:
                found.append(f"{where}: no parent but index {node.depth}")
        else:
            parent = by_id.get(node.parent_id)
            if parent is None:
                found.append(f"{where}: its parent {node.parent_id} is missing")
            elif parent.adventure_id != node.adventure_id:
                found.append(f"{where}: its parent {parent.id} is in another adventure")
            elif node.depth != parent.depth + 1:
                found.append(f"{where}: index {node.depth} under a parent at {parent.depth}")
        # A turn stores its actions and their narration together: an action alone is half of one.
        if node.role == Role.PLAYER and children[node.id] == 0:
            found.append(f"{where}: a player's action with no narration after it")
        if node.role == Role.NARRATOR and node.depth > 0 and not node.text.strip():
            found.append(f"{where}: a narration without text")
        if not 1 <= node.live_take <= node.take_count:
            found.append(f"{where}: live take {node.live_take} of {node.take_count}")
    for adventure_id, count in roots.items():
        if count != 1:
            found.append(f"adventure {adventure_id}: {count} opening nodes")

    found += _takes(by_id, takes)

    branch_by_id = {b.id: b for b in branches}
    for adventure in adventures:
        where = f"adventure {adventure.id}"
        head = by_id.get(adventure.head_node_id) if adventure.head_node_id is not None else None
        if adventure.head_node_id is None:
            if roots[adventure.id]:
                found.append(f"{where}: has a story but no head")
        elif head is None or head.adventure_id != adventure.id:
            found.append(f"{where}: its head {adventure.head_node_id} is not one of its nodes")
        if adventure.active_branch_id is not None:
            branch = branch_by_id.get(adventure.active_branch_id)
            if branch is None or branch.adventure_id != adventure.id:
                found.append(f"{where}: its branch {adventure.active_branch_id} is not its own")
    for branch in branches:
        if branch.tip_node_id is None:
            continue
        tip = by_id.get(branch.tip_node_id)
        if tip is None or tip.adventure_id != branch.adventure_id:
            found.append(f"branch {branch.id}: its tip {branch.tip_node_id} is not in its story")

    now = as_utc(utcnow())
    for lease in leases:
        if lease.holder == FREE:
            continue
        if settled:
            found.append(
                f"adventure {lease.adventure_id}: turn lease held by {lease.holder} "
                "with no turn running"
            )
        elif as_utc(lease.expires_at) > now + timedelta(seconds=TURN_TTL) + SLACK:
            found.append(f"adventure {lease.adventure_id}: turn lease held past any heartbeat")
    for job in jobs:
        if job.holder != FREE and as_utc(job.expires_at) > now + timedelta(seconds=JOB_TTL) + SLACK:
            found.append(f"job {job.name}: lease held past any heartbeat")

    for request in requests:
        where = f"request {request.interaction_id}"
        if request.status not in STATUSES:
            found.append(f"{where}: unknown status {request.status!r}")
        elif settled and request.status in (QUEUED, RUNNING):
            found.append(f"{where}: still {request.status} with no turn running")
        if request.status == DONE:
            node = by_id.get((request.result or {}).get("node"))
            if node is None or node.role != Role.NARRATOR:
                found.append(f"{where}: done, but its narration is not stored")
            elif node.adventure_id != request.adventure_id:
                found.append(f"{where}: done in another adventure than its narration's")
    return found


def _takes(by_id: dict[int, Any], takes: Sequence[Any]) -> list[str]:
    found = []
    numbers: dict[int, list[int]] = defaultdict(list)
    texts: dict[tuple[int, int], str] = {}
    for take in takes:
        numbers[take.node_id].append(take.number)
        texts[take.node_id, take.number] = take.text
        if not take.text.strip():
            found.append(f"node {take.node_id}: take {take.number} without text")
    for node in by_id.values():
        stored = sorted(numbers.get(node.id, []))
        where = f"node {node.id}"
        if node.take_count == 1:
            if stored:
                found.append(f"{where}: one take, yet take rows {stored}")
            continue
        if stored != list(range(1, node.take_count + 1)):
            found.append(f"{where}: {node.take_count} takes, but take rows {stored}")
        elif texts[node.id, node.live_take] != node.text:
            found.append(f"{where}: its text is not its live take's")
    for node_id in numbers:
        if node_id not in by_id:
            found.append(f"takes of node {node_id}, which is missing")
    return found


async def stored_actions(db: Database) -> Counter[str]:
    """How many times each player's action is in the stories (its text as stored)."""
    async with db.session() as session:
        texts = await session.scalars(
            select(col(StoryNode.text)).where(col(StoryNode.role) == Role.PLAYER)
        )
        return Counter(texts)
