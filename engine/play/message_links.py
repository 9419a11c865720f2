"""Which messages of a chat front end show which story node, kept in the database.

A turn is shown as messages: the line with the player's action, and the narration in one or
more pieces. When the story's head moves (undo, redo, a branch switch, a take chosen), the
front end marks the messages of the turns that left the line, clears the mark of the turns
that came back, and moves the story buttons to the message of the turn the story stands on.
For that it needs to know, for any node, which messages show it, and which message carries a
channel's buttons now: in every process, and after a restart. So it is stored here, one row
per message (``story_messages``), never in a process's memory.

Writes are few and small: one transaction when a turn's messages are final (never per
streaming edit), one when the buttons move, one to forget a message the front end found gone.
The links are cosmetic: a write that fails is logged and the story goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import delete, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.storage.database import Database
from engine.storage.models import StoryMessage

log = logging.getLogger(__name__)

#: A piece of a node's text (the narration, the opening, or a line pointing at the head).
NARRATION = "narration"
#: The line that shows a player's action.
ACTION = "action"


@dataclass(frozen=True, slots=True)
class MessageLink:
    """One message that shows a story node."""

    channel_id: int
    message_id: int
    node_id: int
    kind: str


def _link(row: StoryMessage) -> MessageLink:
    return MessageLink(row.channel_id, row.message_id, row.node_id, row.kind)


class MessageLinks:
    """The ``story_messages`` rows: reading them, and the three small writes."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # --- reading ---------------------------------------------------------------------------

    async def of_nodes(self, node_ids: Iterable[int]) -> list[MessageLink]:
        """The messages showing any of ``node_ids``, newest first (ids grow with time)."""
        ids = list(node_ids)
        if not ids:
            return []
        async with self.db.session() as session:
            rows = await session.scalars(
                select(StoryMessage)
                .where(col(StoryMessage.node_id).in_(ids))
                .order_by(col(StoryMessage.message_id).desc())
            )
            return [_link(row) for row in rows]

    async def newest_narration(self, node_id: int) -> MessageLink | None:
        """The last message of the node's text: where its buttons go."""
        async with self.db.session() as session:
            row = await session.scalar(
                select(StoryMessage)
                .where(col(StoryMessage.node_id) == node_id, col(StoryMessage.kind) == NARRATION)
                .order_by(col(StoryMessage.message_id).desc())
                .limit(1)
            )
            return _link(row) if row is not None else None

    async def with_buttons(self, channel_id: int) -> MessageLink | None:
        """The message carrying the channel's story buttons now, if one is known."""
        async with self.db.session() as session:
            row = await session.scalar(
                select(StoryMessage)
                .where(col(StoryMessage.channel_id) == channel_id, col(StoryMessage.buttons))
                .order_by(col(StoryMessage.message_id).desc())
                .limit(1)
            )
            return _link(row) if row is not None else None

    # --- writing ---------------------------------------------------------------------------

    async def shown(
        self,
        channel_id: int,
        node_id: int,
        message_ids: Sequence[int],
        *,
        action: tuple[int, Sequence[int]] | None = None,
        replace: bool = True,
        buttons: bool = True,
    ) -> None:
        """A node's text is shown in ``message_ids`` (in order; the buttons, with ``buttons``,
        on the last); ``action``: (node, messages) of the player's action it answers.

        ``replace``: these messages are the node's text now (a new take shown below the
        earlier one, which keeps its own mark); otherwise they are added to it (a line
        pointing at a turn shown earlier)."""
        if not message_ids:
            return
        try:
            async with self.db.transaction() as session:
                new = set(message_ids) | (set(action[1]) if action else set())
                # A message shows one node; one shown again (the take pager) is moved.
                await session.execute(
                    delete(StoryMessage).where(col(StoryMessage.message_id).in_(new))
                )
                if replace:
                    await session.execute(
                        delete(StoryMessage).where(
                            col(StoryMessage.node_id) == node_id,
                            col(StoryMessage.kind) == NARRATION,
                        )
                    )
                if buttons:
                    await _clear_buttons(session, channel_id)
                last = message_ids[-1]
                for message_id in message_ids:
                    session.add(
                        StoryMessage(
                            message_id=message_id,
                            channel_id=channel_id,
                            node_id=node_id,
                            kind=NARRATION,
                            buttons=buttons and message_id == last,
                        )
                    )
                if action is not None:
                    action_node, action_ids = action
                    for message_id in action_ids:
                        session.add(
                            StoryMessage(
                                message_id=message_id,
                                channel_id=channel_id,
                                node_id=action_node,
                                kind=ACTION,
                            )
                        )
        except SQLAlchemyError:
            log.warning("could not record the messages of node %s", node_id, exc_info=True)

    async def buttons_on(self, channel_id: int, message_id: int | None) -> None:
        """The channel's buttons sit on ``message_id`` now (None: on no known message)."""
        try:
            async with self.db.transaction() as session:
                await _clear_buttons(session, channel_id)
                if message_id is not None:
                    await session.execute(
                        update(StoryMessage)
                        .where(col(StoryMessage.message_id) == message_id)
                        .values(buttons=True)
                    )
        except SQLAlchemyError:
            log.warning("could not record where the buttons are in %s", channel_id, exc_info=True)

    async def forget(self, message_ids: Iterable[int]) -> None:
        """These messages are gone (deleted in Discord): nothing will edit them again."""
        ids = list(message_ids)
        if not ids:
            return
        try:
            async with self.db.transaction() as session:
                await session.execute(
                    delete(StoryMessage).where(col(StoryMessage.message_id).in_(ids))
                )
        except SQLAlchemyError:
            log.warning("could not forget messages %s", ids, exc_info=True)


async def _clear_buttons(session: AsyncSession, channel_id: int) -> None:
    await session.execute(
        update(StoryMessage)
        .where(col(StoryMessage.channel_id) == channel_id, col(StoryMessage.buttons))
        .values(buttons=False)
    )
