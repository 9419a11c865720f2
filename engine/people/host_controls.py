"""Host controls: what the host of a server adventure (and members who manage the server or its
messages) set for everyone else there: a lock, muted and kicked players, a closed party, who
passes the adventure on to whom, and who may retry, undo or edit turns (``/host …``).

Each change is one transaction on the adventure's row (locked for update, so two changes queue)
and refuses a change that changes nothing, so every change the front end announces to the party
is a real one. The settings are kept on the adventure and in ``muted_players``; the rules that
read them (``may_act``, ``may_rewrite``) live in ``engine.people.access`` and are asked in each
request's own transaction, before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput
from engine.people.access.checks import (
    Member,
    check_may_host,
    check_may_mute,
    check_may_steer,
    check_may_transfer,
    muting_of,
)
from engine.people.access.rules import adventure_here
from engine.people.accounts import touch_actor
from engine.people.content import clean_banned
from engine.storage.models import Adventure, RewriteRight, TurnMode, User
from engine.storage.party_models import MutedPlayer, RoundAction

__all__ = ["HostChange", "HostControls", "HostSettings", "RewriteRight", "TurnMode"]

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
    from engine.storage.database import Database


@dataclass(frozen=True, slots=True)
class HostSettings:
    """An adventure's host controls as they stand."""

    adventure_id: int
    title: str
    host_id: int | None
    host_name: str
    locked: bool
    rewrite_right: RewriteRight
    #: Discord ids, oldest first.
    muted: tuple[int, ...]
    kicked: tuple[int, ...]
    turn_mode: TurnMode = TurnMode.FREE
    #: Only the party's players act; nobody joins (``engine.people.party``).
    party_closed: bool = False


@dataclass(frozen=True, slots=True)
class HostChange:
    """A change made, for the party's announcement: the settings after it and, for a
    transfer, who hosted before (None: nobody, its host had left)."""

    settings: HostSettings
    previous_host_id: int | None = None
    previous_host_name: str = ""


class HostControls:
    """What the front end calls for ``/host …``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def show(self, channel_id: int) -> HostSettings:
        """The host controls of the adventure here (anyone may read them)."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            return await _settings_of(session, adventure)

    async def lock(self, actor: Actor, channel_id: int, *, locked: bool) -> HostChange:
        """Lock the adventure (only the host and managers act) or open it again."""
        async with self.db.transaction() as session:
            adventure = await self._hosted(session, actor, channel_id)
            if adventure.locked == locked:
                state = "locked" if locked else "not locked"
                raise InvalidInput(f"This adventure is already {state}; nothing was changed.")
            adventure.locked = locked
            return HostChange(await _settings_of(session, adventure))

    async def mute(
        self, actor: Actor, channel_id: int, target: Member, *, kick: bool = False
    ) -> HostChange:
        """Mute ``target`` here (``kick``: remove them from the adventure): they may not act,
        nor retry, undo or edit turns. A muted player may be kicked; a kicked one stays so."""
        async with self.db.transaction() as session:
            adventure = await self._hosted(session, actor, channel_id)
            check_may_mute(adventure, target)
            muting = await muting_of(session, adventure, target.user_id)
            if muting is not None and (muting.kicked or not kick):
                state = "removed from this adventure" if muting.kicked else "muted here"
                raise InvalidInput(f"{target.name} is already {state}; nothing was changed.")
            assert adventure.id is not None
            if muting is None:
                session.add(
                    MutedPlayer(adventure_id=adventure.id, user_id=target.user_id, kicked=kick)
                )
            else:
                muting.kicked = kick
            # Their action waiting for the round goes with their voice: it would play after.
            await session.execute(
                delete(RoundAction).where(
                    col(RoundAction.adventure_id) == adventure.id,
                    col(RoundAction.user_id) == target.user_id,
                )
            )
            await session.flush()
            return HostChange(await _settings_of(session, adventure))

    async def unmute(self, actor: Actor, channel_id: int, target: Member) -> HostChange:
        """Lift ``target``'s mute or kick."""
        async with self.db.transaction() as session:
            adventure = await self._hosted(session, actor, channel_id)
            muting = await muting_of(session, adventure, target.user_id)
            if muting is None:
                raise InvalidInput(
                    f"{target.name} is neither muted nor removed here; nothing was changed."
                )
            await session.delete(muting)
            await session.flush()
            return HostChange(await _settings_of(session, adventure))

    async def transfer(self, actor: Actor, channel_id: int, target: Member) -> HostChange:
        """Make ``target`` the host; a mute or kick of theirs here goes (a host is neither)."""
        async with self.db.transaction() as session:
            adventure = await self._hosted(session, actor, channel_id)
            await check_may_transfer(session, adventure, target)
            previous_id = adventure.host_id
            previous = await _settings_of(session, adventure)
            assert adventure.id is not None
            await session.execute(
                delete(MutedPlayer).where(
                    col(MutedPlayer.adventure_id) == adventure.id,
                    col(MutedPlayer.user_id) == target.user_id,
                )
            )
            adventure.host_id = target.user_id
            await session.flush()
            return HostChange(
                await _settings_of(session, adventure), previous_id, previous.host_name
            )

    async def close_party(self, actor: Actor, channel_id: int, *, closed: bool) -> HostChange:
        """Close the party (only its players act, nobody joins) or open it again."""
        async with self.db.transaction() as session:
            adventure = await self._hosted(session, actor, channel_id)
            if adventure.party_closed == closed:
                state = "closed" if closed else "open"
                raise InvalidInput(f"The party is already {state}; nothing was changed.")
            adventure.party_closed = closed
            return HostChange(await _settings_of(session, adventure))

    async def set_rights(self, actor: Actor, channel_id: int, right: RewriteRight) -> HostChange:
        """Who besides the host and managers may retry, undo or edit turns."""
        async with self.db.transaction() as session:
            adventure = await self._hosted(session, actor, channel_id)
            if adventure.rewrite_right == right:
                raise InvalidInput(
                    f"Retry, undo and edit are already “{right}”; nothing was changed."
                )
            adventure.rewrite_right = right
            return HostChange(await _settings_of(session, adventure))

    async def set_mode(self, actor: Actor, channel_id: int, mode: TurnMode) -> HostChange:
        """How actions become turns here (``engine.story.rounds``). Back to ``free``, the actions
        waiting for a round are dropped: nothing would close their round any more."""
        async with self.db.transaction() as session:
            adventure = await self._hosted(session, actor, channel_id)
            if adventure.turn_mode == mode:
                raise InvalidInput(f"The turn mode is already “{mode}”; nothing was changed.")
            adventure.turn_mode = mode
            if mode is TurnMode.FREE:
                await session.execute(
                    delete(RoundAction).where(col(RoundAction.adventure_id) == adventure.id)
                )
            return HostChange(await _settings_of(session, adventure))

    async def banned(self, actor: Actor, channel_id: int) -> list[str]:
        """The words the adventure here bans of its own, for those who steer it (the host and
        managers; in a DM its player): a list of banned words is not for the party to read."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            await check_may_steer(session, adventure, actor)
            return list(adventure.banned_words)

    async def set_banned(self, actor: Actor, channel_id: int, words: Sequence[str]) -> list[str]:
        """Replace the adventure's own banned words (the server's and the operator's apply
        besides); an empty list clears them. Its steering's right, so a DM's player has it."""
        cleaned = clean_banned(words)
        async with self.db.transaction() as session:
            await touch_actor(session, actor)
            adventure = await adventure_here(session, channel_id, for_update=True)
            await check_may_steer(session, adventure, actor)
            adventure.banned_words = cleaned
            return cleaned

    @staticmethod
    async def _hosted(session: AsyncSession, actor: Actor, channel_id: int) -> Adventure:
        """The adventure here, locked for the change, once ``actor`` may change it."""
        await touch_actor(session, actor)
        adventure = await adventure_here(session, channel_id, for_update=True)
        await check_may_host(session, adventure, actor)
        return adventure


async def _settings_of(session: AsyncSession, adventure: Adventure) -> HostSettings:
    assert adventure.id is not None
    host_name = ""
    if adventure.host_id is not None:
        host_name = (
            await session.scalar(select(col(User.name)).where(col(User.id) == adventure.host_id))
            or ""
        )
    rows = (
        await session.execute(
            select(col(MutedPlayer.user_id), col(MutedPlayer.kicked))
            .where(col(MutedPlayer.adventure_id) == adventure.id)
            .order_by(col(MutedPlayer.created_at), col(MutedPlayer.user_id))
        )
    ).all()
    return HostSettings(
        adventure.id,
        adventure.title,
        adventure.host_id,
        host_name,
        adventure.locked,
        RewriteRight(adventure.rewrite_right),
        tuple(row.user_id for row in rows if not row.kicked),
        tuple(row.user_id for row in rows if row.kicked),
        TurnMode(adventure.turn_mode),
        adventure.party_closed,
    )
