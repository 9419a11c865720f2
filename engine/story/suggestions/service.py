"""What the front end asks about suggested actions: the text a pressed suggestion plays, and a
server's switch for them.

A suggestion button names its adventure, the story version it was drawn under, its turn and
its place in the list (``cf:sg:…``), never its text: a ``custom_id`` is whatever the client
sends, so the text is read here, from the turn's live take, and only while that turn is still
the newest of the adventure running where it is pressed. The press then plays the text as the
presser's own action, through the same request as /do (``PlayService.act``), so every group
rule (the host's lock and mutes, the party, rounds, the rate limits) holds as it does for
typed actions, and the version guard refuses a second press under the same turn.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from engine.errors import NoAdventureHere, NotFound, StoryMovedOn
from engine.people.access.checks import check_may_press
from engine.people.access.rules import NO_ADVENTURE, active_adventure
from engine.storage.database import Database
from engine.storage.models import Adventure, StoryNode
from engine.story.suggestions.store import offered, suggestions_on
from engine.story.tree import MOVED_ON

#: A press naming a suggestion its turn never offered (a forged ``custom_id``).
NOT_OFFERED = "That suggestion is not offered under this turn; nothing was played."


class SuggestionService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def chosen(self, channel_id: int, *, adventure_id: int, node_id: int, index: int) -> str:
        """The text of suggestion ``index`` of turn ``node_id``: refused when the adventure
        running here is another, when the story has moved past that turn, or when the turn
        offered no such suggestion."""
        async with self.db.session() as session:
            adventure = await active_adventure(session, channel_id)
            if adventure is None:
                raise NoAdventureHere(NO_ADVENTURE)
            check_may_press(adventure, adventure_id)
            if adventure.head_node_id != node_id:
                raise StoryMovedOn(MOVED_ON)
            texts = await _live_suggestions(session, node_id)
        if not 0 <= index < len(texts):
            raise NotFound(NOT_OFFERED)
        return texts[index]

    async def of_turn(self, adventure_id: int, node_id: int, take: int) -> tuple[str, ...]:
        """What take ``take`` of a turn offers, for its buttons when the story stands on it
        again (undo, redo, a chosen take): none where suggestions are off now."""
        async with self.db.session() as session:
            adventure = await session.get(Adventure, adventure_id)
            if adventure is None or not await suggestions_on(session, adventure):
                return ()
            return await offered(session, node_id, take)


async def _live_suggestions(session: AsyncSession, node_id: int) -> tuple[str, ...]:
    node = await session.get(StoryNode, node_id)
    if node is None:
        return ()
    return await offered(session, node_id, node.live_take)
