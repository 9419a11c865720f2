"""``/operator status``: what the bot is doing, from what the database holds, for its operator.

Turns and tokens today are counted from the story itself (narrator entries written since
midnight UTC and the usage the provider reported for each); requests from ``request_records``.
Queue depths are this process's (``engine.platform.queue``) beside the turns being written in every
process (turn leases held).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time

from sqlalchemy import func, select
from sqlmodel import col

from engine.people.access.checks import check_may_operate
from engine.people.access.rules import Actor
from engine.platform.coordination.leases import FREE
from engine.platform.coordination.request_status import QUEUED, RUNNING
from engine.platform.queue import AdventureQueue
from engine.storage.coordination_models import RequestRecord, TurnLease
from engine.storage.database import Database
from engine.storage.models import Adventure, Block, Role, Server, StoryNode, utcnow


@dataclass(frozen=True, slots=True)
class StatusReport:
    servers: int
    active_adventures: int
    adventures_played_today: int
    turns_today: int
    tokens_today: int
    requests_today: int
    requests_waiting: int
    turns_writing: int
    running_here: int
    waiting_here: int
    blocked_users: int
    blocked_servers: int


class OperatorStatus:
    def __init__(self, db: Database, queue: AdventureQueue) -> None:
        self.db = db
        self.queue = queue

    async def report(self, actor: Actor) -> StatusReport:
        check_may_operate(actor)
        midnight = datetime.combine(utcnow().date(), time(), tzinfo=utcnow().tzinfo)
        today = col(StoryNode.created_at) >= midnight
        # A turn is the narrator answering (the opening, with no parent, is none).
        narrated = (
            (col(StoryNode.role) == Role.NARRATOR) & col(StoryNode.parent_id).is_not(None) & today
        )
        async with self.db.session() as session:
            servers = await session.scalar(
                select(func.count()).select_from(Server).where(col(Server.left_at).is_(None))
            )
            active = await session.scalar(
                select(func.count()).select_from(Adventure).where(col(Adventure.ended_at).is_(None))
            )
            turns = (
                await session.execute(
                    select(
                        func.count(),
                        func.count(func.distinct(col(StoryNode.adventure_id))),
                        func.coalesce(
                            func.sum(
                                func.coalesce(col(StoryNode.prompt_tokens), 0)
                                + func.coalesce(col(StoryNode.completion_tokens), 0)
                            ),
                            0,
                        ),
                    ).where(narrated)
                )
            ).one()
            requests = await session.scalar(
                select(func.count())
                .select_from(RequestRecord)
                .where(col(RequestRecord.created_at) >= midnight)
            )
            waiting = await session.scalar(
                select(func.count())
                .select_from(RequestRecord)
                .where(col(RequestRecord.status).in_((QUEUED, RUNNING)))
            )
            writing = await session.scalar(
                select(func.count())
                .select_from(TurnLease)
                .where(col(TurnLease.holder) != FREE, col(TurnLease.expires_at) > utcnow())
            )
            blocks = (
                await session.execute(select(col(Block.kind), func.count()).group_by(Block.kind))
            ).all()
        blocked: dict[str, int] = {str(kind): int(count) for kind, count in blocks}
        running_here, waiting_here = self.queue.depths()
        return StatusReport(
            servers=servers or 0,
            active_adventures=active or 0,
            adventures_played_today=int(turns[1] or 0),
            turns_today=int(turns[0] or 0),
            tokens_today=int(turns[2] or 0),
            requests_today=requests or 0,
            requests_waiting=waiting or 0,
            turns_writing=writing or 0,
            running_here=running_here,
            waiting_here=waiting_here,
            blocked_users=int(blocked.get("user", 0)),
            blocked_servers=int(blocked.get("server", 0)),
        )
