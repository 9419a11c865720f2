"""Tables of who plays an adventure together: players' characters, the host's mutes and kicks,
the party's seats, and the actions waiting for a round to close (``engine.story.characters``,
``engine.people.party``, ``engine.story.rounds``).

Kept apart from ``engine.storage.models`` (the adventure, its story and its cards) so that each
module holds one subject; registered with the others in ``engine.storage.tables``.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from sqlalchemy import BigInteger, Column, ForeignKey, Integer, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from engine.storage.models import _fk, _text, _when


class RoundAction(SQLModel, table=True):
    """A player's action waiting for its round to close (``engine.story.rounds``): one per player
    and adventure (a new one replaces it, keeping its place); the round's close takes them all
    at once (a DELETE that only one closer wins)."""

    __tablename__: ClassVar[str] = "round_actions"

    adventure_id: int = Field(
        sa_column=Column(Integer, ForeignKey("adventures.id", ondelete="CASCADE"), primary_key=True)
    )
    #: The player's data goes with them (``/profile delete``), their waiting action with it.
    user_id: int = Field(
        sa_column=Column(
            BigInteger,
            ForeignKey("users.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        )
    )
    #: The order of submission within the round (a replaced action keeps its place).
    position: int = 0
    type: str = Field(sa_column=Column(String(16), nullable=False))
    text: str = _text()
    #: Who the action is written as (their character's name, or display name), read as it
    #: was submitted.
    actor_name: str = Field(default="", sa_column=Column(String(100), nullable=False))
    submitted_at: datetime = _when()


class Character(SQLModel, table=True):
    """A player's character in one adventure (``engine.story.characters``): the name their actions
    are written with in group play, and a line about them the narrator reads in the party."""

    __tablename__: ClassVar[str] = "characters"
    __table_args__ = (
        UniqueConstraint("adventure_id", "user_id", name="uq_characters_player"),
        # Two players' characters of one name could not be told apart by the narrator; the
        # database refuses the second even when both are set at once.
        UniqueConstraint("adventure_id", "name_key", name="uq_characters_name"),
    )

    id: int | None = Field(default=None, primary_key=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)
    # The player's own data: it goes with them (/profile delete).
    user_id: int = _fk("users.id", ondelete="CASCADE", nullable=False, big=True)
    name: str = Field(sa_column=Column(String(40), nullable=False))
    #: The name case-folded (``engine.story.characters.name_key``): what "the same name" means.
    name_key: str = Field(sa_column=Column(String(160), nullable=False))
    about: str = _text()
    #: Five forms, slash-separated (``engine.story.pronouns``); "" is the singular "they".
    pronouns: str = Field(
        default="", sa_column=Column(String(64), nullable=False, server_default="")
    )
    created_at: datetime = _when()
    updated_at: datetime = _when()


class MutedPlayer(SQLModel, table=True):
    """A player the host muted (or kicked) in one adventure: they may not act there, nor
    retry, undo or edit turns. ``user_id`` is a Discord id, not a user row: a host may mute
    someone who never used Campfire, and deleting one's data does not lift a mute."""

    __tablename__: ClassVar[str] = "muted_players"

    adventure_id: int = Field(
        sa_column=Column(Integer, ForeignKey("adventures.id", ondelete="CASCADE"), primary_key=True)
    )
    user_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    #: Kicked rather than muted: told so when refused, and listed apart.
    kicked: bool = False
    created_at: datetime = _when()


class PartySeat(SQLModel, table=True):
    """A player's own say in whether they play an adventure (``engine.people.party``): ``/join``
    (``seated``) or ``/leave`` (not: they watch). Most players have no row: acting or making a
    character puts them in the party, so only these two choices are written down. Only the
    player makes theirs (a user row, then), so it goes with their data."""

    __tablename__: ClassVar[str] = "party_seats"

    adventure_id: int = Field(
        sa_column=Column(Integer, ForeignKey("adventures.id", ondelete="CASCADE"), primary_key=True)
    )
    user_id: int = Field(
        sa_column=Column(
            BigInteger,
            ForeignKey("users.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        )
    )
    seated: bool = True
    updated_at: datetime = _when()
