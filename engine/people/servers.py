"""Every per-server setting, read and written in one place.

A server's settings are columns of its row (``servers``): the role whose members may import
scenarios besides the managers, and whether turns offer suggested actions. One right governs
them all (``check_may_set_server``: the server's managers, never in a DM) and ``/server`` is
their command group (``cogs.server``). The server's own model is a model choice like a DM
player's and is set with theirs (``engine.llm.model_settings``, under the model's right).

A new per-server setting: a column on ``Server`` with a migration, a field of ``ServerView``
with its default, a setter here, a ``/server`` subcommand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from engine.errors import InvalidInput
from engine.people.access.checks import check_may_set_server
from engine.people.access.rules import Actor
from engine.people.accounts import touch_server
from engine.people.content import ContentPolicy, Rating, clean_banned
from engine.storage.database import Database
from engine.storage.models import Server


@dataclass(frozen=True)
class ServerView:
    """A server's settings; a server never seen has the defaults."""

    importer_role_id: int | None = None
    suggestions: bool = True
    #: The server's own content rating; None: the operator's default (``engine.people.content``).
    content_rating: Rating | None = None
    banned_words: tuple[str, ...] = ()
    #: Where players' reports of turns go (``engine.play.reports``); None: nowhere yet.
    reports_channel_id: int | None = None


async def server_settings(session: AsyncSession, server_id: int | None) -> ServerView:
    """The settings of ``server_id`` in ``session`` (the defaults for a DM or a new server)."""
    server = None if server_id is None else await session.get(Server, server_id)
    if server is None:
        return ServerView()
    return ServerView(
        importer_role_id=server.importer_role_id,
        suggestions=server.suggestions,
        content_rating=Rating.parse(server.content_rating),
        banned_words=tuple(server.banned_words),
        reports_channel_id=server.reports_channel_id,
    )


class ServerSettings:
    def __init__(self, db: Database, content: ContentPolicy | None = None) -> None:
        self.db = db
        #: The operator's content rules: the ceiling a server's rating is held to.
        self.content = content or ContentPolicy()

    async def of(self, server_id: int) -> ServerView:
        async with self.db.session() as session:
            return await server_settings(session, server_id)

    async def of_managed(self, actor: Actor) -> ServerView:
        """The settings of the actor's server, for one who may change them."""
        check_may_set_server(actor)
        assert actor.server_id is not None  # the check refuses a DM
        return await self.of(actor.server_id)

    async def set_importer_role(self, actor: Actor, role_id: int | None) -> ServerView:
        """Name the role whose members may import (None: only managers)."""
        return await self._set(actor, importer_role_id=role_id)

    async def switch_suggestions(self, actor: Actor, *, on: bool) -> ServerView:
        """Turn suggested actions on or off for every adventure of the actor's server."""
        return await self._set(actor, suggestions=on)

    async def set_rating(self, actor: Actor, rating: Rating | None) -> ServerView:
        """The server's content rating (None: the operator's default), within the operator's
        ceiling; mature applies only in channels Discord marks age-restricted."""
        ceiling = self.content.ceiling
        if rating is not None and rating > ceiling:
            raise InvalidInput(
                f"This bot's operator allows ratings up to **{ceiling.label}**, so this "
                f"server cannot be rated {rating.label}."
            )
        return await self._set(actor, content_rating=None if rating is None else rating.label)

    async def set_banned(self, actor: Actor, words: Sequence[str]) -> ServerView:
        """Replace the words banned in every adventure of the server (empty: none)."""
        return await self._set(actor, banned_words=clean_banned(words))

    async def set_reports_channel(self, actor: Actor, channel_id: int | None) -> ServerView:
        """The channel players' reports of turns go to (None: reports are off). The front end
        checks that the bot can post there before calling."""
        return await self._set(actor, reports_channel_id=channel_id)

    async def _set(self, actor: Actor, **settings: Any) -> ServerView:
        check_may_set_server(actor)
        assert actor.server_id is not None  # the check refuses a DM
        async with self.db.transaction() as session:
            await touch_server(session, actor.server_id, actor.server_name)
            server = await session.get(Server, actor.server_id)
            assert server is not None
            for name, value in settings.items():
                setattr(server, name, value)
            return await server_settings(session, actor.server_id)
