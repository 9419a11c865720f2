"""Which model a server or a player chose, as stored: read with an adventure, or for a place.

A DM adventure uses its player's own model when they chose one; a server adventure uses the
server's when its managers chose one; anything else uses the operator's (``None`` here). The
key stays encrypted in what is read: only the resolver decrypts it, to use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.storage.models import Adventure, Server, UserModel

Owner = Literal["player", "server"]

#: Stored as a choice's URL for a model picked on the operator's own endpoint (``/model pick``,
#: among ``CAMPFIRE_MODEL_WHITELIST``): never a URL anyone could type (``/model set`` takes
#: http and https only), and never the operator's address, which stays in its settings.
OPERATORS_ENDPOINT = "operator:"


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """A server's or player's own model, as stored."""

    owner: Owner
    url: str
    model: str
    #: The API key, encrypted (``engine.platform.crypto.SecretBox``); None when none was given.
    key_encrypted: str | None = field(default=None, repr=False)

    @property
    def on_operators_endpoint(self) -> bool:
        """A model picked on the operator's endpoint: the operator's to pay for and cap."""
        return self.url == OPERATORS_ENDPOINT


async def player_choice(session: AsyncSession, user_id: int) -> ModelChoice | None:
    row = (
        await session.execute(
            select(
                col(UserModel.url), col(UserModel.model_name), col(UserModel.api_key_encrypted)
            ).where(col(UserModel.user_id) == user_id)
        )
    ).first()
    return None if row is None else ModelChoice("player", row[0], row[1], row[2])


async def server_choice(session: AsyncSession, server_id: int) -> ModelChoice | None:
    row = (
        await session.execute(
            select(
                col(Server.model_url), col(Server.model_name), col(Server.model_api_key_encrypted)
            ).where(col(Server.id) == server_id)
        )
    ).first()
    if row is None or not row[0] or not row[1]:
        return None
    return ModelChoice("server", row[0], row[1], row[2])


async def choice_for(session: AsyncSession, adventure: Adventure) -> ModelChoice | None:
    """The model ``adventure`` uses; None for the operator's."""
    if adventure.server_id is not None:
        return await server_choice(session, adventure.server_id)
    if adventure.owner_id is not None:
        return await player_choice(session, adventure.owner_id)
    return None


async def choice_here(
    session: AsyncSession, server_id: int | None, user_id: int
) -> ModelChoice | None:
    """The model chosen for a place: the server's in a server, the player's own in a DM."""
    if server_id is not None:
        return await server_choice(session, server_id)
    return await player_choice(session, user_id)
