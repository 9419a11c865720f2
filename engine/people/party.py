"""Who is in a group adventure's party, and who only watches (issue 17: group play).

The party is derived, not kept: the host, every player who acted here, and every player with a
character, in the order they came to the table. Only a player's own choice to differ is written
down (``PartySeat``): ``/join`` seats someone who has done neither yet, ``/leave`` makes a player
a spectator (their character stays for when they come back). So playing costs no write to keep
the party, and an adventure from before seats existed has the party it always had.

An open party (the default) lets anyone in the adventure's place act, and acting seats again a
player who had left. When the host closes it (``/host party closed``) only its players act and
nobody joins: everyone else watches. Muted players stay in the party (marked); kicked ones are
out of it. The rules are ``engine.people.access``'s; this module only reads (and writes the seat a
returning player takes), and imports nothing that decides a right.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.storage.models import Adventure, Role, StoryNode, utcnow
from engine.storage.party_models import Character, MutedPlayer, PartySeat


async def players_who_acted(
    session: AsyncSession, adventure_id: int, *, limit: int | None = None
) -> list[int]:
    """The players who wrote an action in the adventure (on any line), in the order of their
    first one: the order they came to the table in."""
    query = (
        select(col(StoryNode.author_id), func.min(col(StoryNode.id)))
        .where(
            col(StoryNode.adventure_id) == adventure_id,
            col(StoryNode.role) == Role.PLAYER,
            col(StoryNode.author_id).is_not(None),
        )
        .group_by(col(StoryNode.author_id))
        .order_by(func.min(col(StoryNode.id)))
    )
    if limit is not None:
        query = query.limit(limit)
    return [author for author, _ in await session.execute(query) if author is not None]


async def seats(session: AsyncSession, adventure_id: int) -> dict[int, bool]:
    """Who chose to join (True) or to leave (False), oldest choice first."""
    rows = await session.execute(
        select(col(PartySeat.user_id), col(PartySeat.seated))
        .where(col(PartySeat.adventure_id) == adventure_id)
        .order_by(col(PartySeat.updated_at), col(PartySeat.user_id))
    )
    return {user: seated for user, seated in rows}


async def party_order(
    session: AsyncSession, adventure: Adventure, *, host_first: bool = True
) -> list[int]:
    """The party's players in the order they came: the host (``host_first``; otherwise only
    as they came by playing), those who acted, those with a character, those who joined; not
    those who left, nor those kicked out."""
    assert adventure.id is not None
    chosen = await seats(session, adventure.id)
    characters = await session.scalars(
        select(col(Character.user_id))
        .where(col(Character.adventure_id) == adventure.id)
        .order_by(col(Character.id))
    )
    kicked = set(
        await session.scalars(
            select(col(MutedPlayer.user_id)).where(
                col(MutedPlayer.adventure_id) == adventure.id, col(MutedPlayer.kicked)
            )
        )
    )
    came = [
        *([adventure.host_id] if host_first and adventure.host_id is not None else []),
        *await players_who_acted(session, adventure.id),
        *characters,
        *(user for user, seated in chosen.items() if seated),
    ]
    return [user for user in dict.fromkeys(came) if chosen.get(user, True) and user not in kicked]


async def spectators(session: AsyncSession, adventure_id: int) -> list[int]:
    """The players who left the party and watch."""
    return [user for user, seated in (await seats(session, adventure_id)).items() if not seated]


async def in_party(session: AsyncSession, adventure: Adventure, user_id: int) -> bool:
    """Whether ``user_id`` plays here (a kick is the access rule's to weigh, not this)."""
    assert adventure.id is not None
    seat = await session.get(PartySeat, (adventure.id, user_id))
    if seat is not None:
        return seat.seated
    if user_id == adventure.host_id:
        return True
    came = await session.scalar(
        select(col(StoryNode.id))
        .where(
            col(StoryNode.adventure_id) == adventure.id,
            col(StoryNode.role) == Role.PLAYER,
            col(StoryNode.author_id) == user_id,
        )
        .limit(1)
    )
    if came is not None:
        return True
    character = await session.scalar(
        select(col(Character.id)).where(
            col(Character.adventure_id) == adventure.id, col(Character.user_id) == user_id
        )
    )
    return character is not None


async def take_seat(session: AsyncSession, adventure: Adventure, user_id: int) -> bool:
    """Seat ``user_id`` (``/join``, or acting again after ``/leave``); False when their seat
    was already theirs. Written in the caller's transaction."""
    assert adventure.id is not None
    seat = await session.get(PartySeat, (adventure.id, user_id))
    if seat is not None and seat.seated:
        return False
    if seat is None:
        session.add(PartySeat(adventure_id=adventure.id, user_id=user_id, seated=True))
    else:
        seat.seated = True
        seat.updated_at = utcnow()
    await session.flush()
    return True


async def back_on_act(session: AsyncSession, adventure: Adventure, user_id: int) -> None:
    """A player who left and acts again (the party being open, or they lead it) is back in:
    their seat is retaken where the action is recorded. Nothing to do for everyone else, and
    no write: the seat is read by its key (``check_may_act`` has usually read it already, so
    the session answers from memory)."""
    if adventure.server_id is None or adventure.id is None:
        return
    seat = await session.get(PartySeat, (adventure.id, user_id))
    if seat is not None and not seat.seated:
        await take_seat(session, adventure, user_id)


async def leave_seat(session: AsyncSession, adventure: Adventure, user_id: int) -> None:
    """``user_id`` watches from now on. Written in the caller's transaction."""
    assert adventure.id is not None
    seat = await session.get(PartySeat, (adventure.id, user_id))
    if seat is None:
        session.add(PartySeat(adventure_id=adventure.id, user_id=user_id, seated=False))
    else:
        seat.seated = False
        seat.updated_at = utcnow()
    await session.flush()
