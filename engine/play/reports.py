"""Players report a turn to their server's moderators; the host or a moderator may undo it.

A report goes only to the channel the server's managers chose (``/server reports``): nothing
leaves the server, and in a DM there is no one to report to (the story is the player's own, who
can undo or retry it). The report carries the turn's text and a link to it; its Undo button
names the report, and undoing moves the story back to before that turn (``StoryTree.
undo_back_to``), under the same rule as any undo (``engine.people.access.checks.
check_may_rewrite``: the turn's player, the host, members who manage the server or its
messages). A player reports a turn once and at most ``REPORTS_PER_HOUR`` turns an hour, so the
moderators' channel cannot be flooded through the bot.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotFound
from engine.people.access.rules import Actor
from engine.play.message_links import NARRATION
from engine.storage.database import Database
from engine.storage.models import (
    ActionType,
    Adventure,
    Role,
    Server,
    StoryMessage,
    StoryNode,
    utcnow,
)
from engine.storage.report_models import TurnReport
from engine.story.line.read import is_turn_boundary, line_tail, narrator_turns
from engine.story.rounds import ROUND_MAX
from engine.story.tree import HeadMove, StoryTree

#: Reports one player may send in an hour, across the servers.
REPORTS_PER_HOUR = 5
#: The most of a reason a reporter may give (one Discord text input holds 4,000).
REASON_MAX = 500

NO_REPORTS_IN_DMS = (
    "Reports go to a server's moderators, and this story is yours alone: undo or retry the "
    "turn (↩️ Undo, 🔁 Retry). To tell the bot's operator, use the support link in `/help`."
)


@dataclass(frozen=True, slots=True)
class FiledReport:
    """A report stored and ready to post in the server's reports channel."""

    report_id: int
    server_id: int
    reports_channel_id: int
    adventure_title: str
    #: Where the adventure is played, and the narration's message there (for the link).
    adventure_channel_id: int | None
    message_channel_id: int | None
    message_id: int | None
    turn: int
    action_text: str
    narration: str
    reporter_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class UndoneReport:
    move: HeadMove
    #: Where the adventure is played: the channel whose messages the move marks.
    channel_id: int
    report: FiledReport


class TurnReports:
    def __init__(self, db: Database, tree: StoryTree) -> None:
        self.db = db
        self.tree = tree

    async def file(self, actor: Actor, channel_id: int, node_id: int, reason: str) -> FiledReport:
        """Store ``actor``'s report of narrator turn ``node_id`` of an adventure played in
        ``channel_id``; the front end posts it and says where (``posted``), or takes it back
        when Discord refuses the post (``withdraw``)."""
        if actor.server_id is None:
            raise InvalidInput(NO_REPORTS_IN_DMS)
        reason = reason.strip()[:REASON_MAX]
        try:
            async with self.db.transaction() as session:
                adventure, node = await _reported_turn(session, actor, channel_id, node_id)
                reports_channel = await _reports_channel(session, actor.server_id)
                await _check_bound(session, actor.user_id)
                report = TurnReport(
                    server_id=actor.server_id,
                    adventure_id=node.adventure_id,
                    node_id=node_id,
                    reporter_id=actor.user_id,
                    reason=reason,
                )
                session.add(report)
                await session.flush()
                assert report.id is not None
                return await _filed(session, report, adventure, node, reports_channel)
        except IntegrityError:
            raise InvalidInput(
                "You reported this turn already; the server's moderators have it."
            ) from None

    async def posted(self, report_id: int, channel_id: int, message_id: int) -> None:
        async with self.db.transaction() as session:
            await session.execute(
                update(TurnReport)
                .where(col(TurnReport.id) == report_id)
                .values(channel_id=channel_id, message_id=message_id)
            )

    async def withdraw(self, report_id: int) -> None:
        """A report Discord refused to post is not kept: the player may send it again once
        the channel is mended."""
        async with self.db.transaction() as session:
            await session.execute(delete(TurnReport).where(col(TurnReport.id) == report_id))

    async def undo(self, actor: Actor, report_id: int) -> UndoneReport:
        """Move the reported turn's story back to before it (its Undo button, pressed in the
        server's reports channel)."""
        async with self.db.session() as session:
            report = await session.get(TurnReport, report_id)
            # A forged button naming another server's report finds nothing here.
            if report is None or report.server_id != actor.server_id:
                raise NotFound("That report is not one of this server's.")
            adventure = await session.get(Adventure, report.adventure_id)
            node = await session.get(StoryNode, report.node_id)
            if adventure is None or node is None:
                raise NotFound("That turn is no longer in the story.")
            if adventure.ended_at is not None or adventure.channel_id is None:
                raise InvalidInput("That adventure has ended; there is nothing to undo.")
            channel_id = adventure.channel_id
            assert report.id is not None
            filed = await _filed(session, report, adventure, node, report.channel_id or 0)
        move = await self.tree.undo_back_to(actor, channel_id, adventure.id or 0, node.id or 0)
        async with self.db.transaction() as session:
            await session.execute(
                update(TurnReport)
                .where(col(TurnReport.id) == report_id)
                .values(undone_by=actor.user_id)
            )
        return UndoneReport(move, channel_id, filed)


async def _reported_turn(
    session: AsyncSession, actor: Actor, channel_id: int, node_id: int
) -> tuple[Adventure, StoryNode]:
    """The narrator turn ``node_id`` of a server adventure played in ``channel_id`` (a button
    is whatever the client sends: a turn of anywhere else is not found)."""
    node = await session.get(StoryNode, node_id)
    adventure = None if node is None else await session.get(Adventure, node.adventure_id)
    if (
        node is None
        or adventure is None
        or adventure.channel_id != channel_id
        or adventure.server_id != actor.server_id
    ):
        raise NotFound("That turn no longer exists.")
    if node.role != Role.NARRATOR or node.action == ActionType.START:
        raise InvalidInput("Only the narrator's turns can be reported, not the opening.")
    return adventure, node


async def _reports_channel(session: AsyncSession, server_id: int) -> int:
    server = await session.get(Server, server_id)
    if server is None or server.reports_channel_id is None:
        raise InvalidInput(
            "This server has not chosen a channel for reports, so this one could not be sent. "
            "Its admins can choose one with `/server reports`; until then, tell a moderator."
        )
    return server.reports_channel_id


async def _check_bound(session: AsyncSession, user_id: int) -> None:
    since = utcnow() - timedelta(hours=1)
    sent = await session.scalar(
        select(func.count())
        .select_from(TurnReport)
        .where(col(TurnReport.reporter_id) == user_id, col(TurnReport.created_at) >= since)
    )
    if (sent or 0) >= REPORTS_PER_HOUR:
        raise InvalidInput(
            f"You have sent {REPORTS_PER_HOUR} reports in the last hour, the most one player "
            "may; tell a moderator directly, or report again later."
        )


async def _filed(
    session: AsyncSession,
    report: TurnReport,
    adventure: Adventure,
    node: StoryNode,
    reports_channel: int,
) -> FiledReport:
    assert report.id is not None and node.id is not None
    # The actions the turn answered: the entries above it back to the turn before.
    stretch = await line_tail(session, node.id, ROUND_MAX + 2)
    actions: list[str] = []
    for entry in reversed(stretch[:-1]):
        if is_turn_boundary(entry):
            break
        if entry.text.strip():
            actions.insert(0, entry.text.strip())
    link = (
        await session.execute(
            select(col(StoryMessage.channel_id), col(StoryMessage.message_id))
            .where(col(StoryMessage.node_id) == node.id, col(StoryMessage.kind) == NARRATION)
            .order_by(col(StoryMessage.message_id))
            .limit(1)
        )
    ).first()
    return FiledReport(
        report_id=report.id,
        server_id=report.server_id,
        reports_channel_id=reports_channel,
        adventure_title=adventure.title,
        adventure_channel_id=adventure.channel_id,
        message_channel_id=link.channel_id if link else None,
        message_id=link.message_id if link else None,
        turn=len(await narrator_turns(session, node.id)),
        action_text="\n".join(actions),
        narration=node.text,
        reporter_id=report.reporter_id,
        reason=report.reason,
    )
