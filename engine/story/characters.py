"""Players' characters and the party of an adventure (issue 17: group play).

Each player of an adventure may give themselves a character: a name (at most 40 characters)
and a line about them (at most 300). In a group adventure (one in a server) a player's actions
are written with their character's name ("> Ann draws her sword."), or with their display name
when they have none; in a DM the player is "You", as in AI Dungeon. The characters go into the
turn's context as the party (``engine.turns.context``), and ``/party`` lists who plays.

Names are checked here, once, because they are written into the story and the prompt: letters
(any script), digits, spaces and ``' ’ - .`` only, with a letter among them, so a name can carry
no Discord markup or mention and cannot pass for the story's own "> " lines.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Integer, Select, bindparam, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput
from engine.people.access.checks import (
    check_may_join,
    check_may_leave,
    check_may_make_character,
    check_may_set_character,
)
from engine.people.access.rules import Actor, active_adventure, adventure_here
from engine.people.accounts import touch_actor
from engine.people.party import (
    in_party,
    leave_seat,
    party_order,
    players_who_acted,
    spectators,
    take_seat,
)
from engine.platform.sanitise import sanitise
from engine.storage.database import Database
from engine.storage.models import Adventure, Role, User, utcnow
from engine.storage.party_models import Character, MutedPlayer, RoundAction
from engine.story.line.read import line_tail
from engine.story.pronouns import kept_pronouns

NAME_MAX = 40
ABOUT_MAX = 300
#: Who acts in solo play; no character may take the name (``format_action`` writes it in the
#: second person).
SOLO_ACTOR = "You"
#: A player whose display name is unknown or unusable.
UNNAMED = "A player"
#: The most players ``/party`` lists.
PARTY_MAX = 25
#: How far back along the story line ``/party`` looks for who acted last.
LAST_ACTOR_SCAN = 12

_NAME_MARKS = frozenset(" '’-.")


def _one_line(text: str) -> str:
    return " ".join(sanitise(text).split())


def clean_name(typed: str) -> str:
    """A character's name as it is stored, or ``InvalidInput`` saying what is wrong."""
    name = _one_line(typed)
    if not name:
        raise InvalidInput("Give your character a name.")
    if len(name) > NAME_MAX:
        raise InvalidInput(
            f"That name is {len(name)} characters long; a character's name may have at most "
            f"{NAME_MAX}."
        )
    odd = sorted({c for c in name if not (_is_name_letter(c) or c in _NAME_MARKS)})
    if odd:
        shown = " ".join(f"`{c}`" if c != "`" else "backtick" for c in odd[:5])
        raise InvalidInput(
            f"A character's name may hold letters, digits, spaces and ' - . only, not {shown}: "
            "it is written into the story as it is."
        )
    if not any(unicodedata.category(c).startswith("L") for c in name):
        raise InvalidInput("A character's name needs at least one letter.")
    if name.casefold() == SOLO_ACTOR.casefold():
        raise InvalidInput(
            "“You” is how the story writes a solo player; give your character a name of its own."
        )
    return name


def name_key(name: str) -> str:
    """What makes two names the same name: the narrator could not tell them apart."""
    return name.casefold()


def _name_taken(name: str) -> InvalidInput:
    return InvalidInput(
        f"Another player's character here is already called {name}; the narrator could not "
        "tell you apart. Choose another name."
    )


def _is_name_letter(c: str) -> bool:
    # Letters and digits of any script, and the combining marks some scripts write with.
    return unicodedata.category(c)[0] in "LMN"


def clean_about(typed: str) -> str:
    """A character's description as it is stored (one line), or ``InvalidInput``."""
    about = _one_line(typed)
    if len(about) > ABOUT_MAX:
        raise InvalidInput(
            f"That description is {len(about)} characters long; the limit is {ABOUT_MAX}."
        )
    return about


def display_label(display_name: str) -> str:
    """A player without a character, as their actions name them: their display name, on one
    line and within a character name's length; "A player" when it has nothing to show."""
    name = _one_line(display_name)[:NAME_MAX].strip()
    if not name or name.casefold() == SOLO_ACTOR.casefold():
        # A member displayed as "You" would be written as the solo player.
        return UNNAMED if not name else f"{name} (player)"
    return name


@dataclass(frozen=True, slots=True)
class CharacterSheet:
    user_id: int
    name: str
    about: str
    #: The player's name as Discord last showed it.
    player_name: str = ""
    #: As kept (``engine.story.pronouns``): "" is "they".
    pronouns: str = ""


@dataclass(frozen=True, slots=True)
class PartyMember:
    user_id: int
    player_name: str
    #: None: no character (their actions carry their display name).
    character: CharacterSheet | None
    host: bool
    acted_last: bool
    acted: bool
    #: The host muted them: in the party, but they may not act.
    muted: bool = False
    #: Their action waits in the open round (rounds and host mode): not in the story yet.
    in_round: bool = False


@dataclass(frozen=True, slots=True)
class Party:
    title: str
    #: A group adventure names its players' characters; a DM's player is "You".
    group: bool
    members: list[PartyMember]
    #: More players than ``PARTY_MAX`` were found: the list is cut.
    more: bool = False
    #: The host closed the party: only its members act, nobody joins.
    closed: bool = False
    #: Players who left the party and watch, by name (at most ``PARTY_MAX``).
    watching: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PartyChange:
    """A player joined or left, for the party's announcement: who, as the story names them."""

    title: str
    name: str


# --- reads -------------------------------------------------------------------------------------


@cache
def _party_query() -> Select[Any]:
    """``party_sheets``' statement, built once (every turn reads it; only the adventure is
    bound): the columns a sheet needs, never whole rows."""
    adventure_id = bindparam("adventure_id", type_=Integer)
    kicked = (
        select(col(MutedPlayer.user_id))
        .where(col(MutedPlayer.adventure_id) == adventure_id, col(MutedPlayer.kicked))
        .scalar_subquery()
    )
    return (
        select(
            col(Character.user_id),
            col(Character.name),
            col(Character.about),
            col(User.name).label("player"),
            col(Character.pronouns),
        )
        .join(User, col(User.id) == col(Character.user_id))
        .where(
            col(Character.adventure_id) == adventure_id,
            col(Character.user_id).not_in(kicked),
        )
        .order_by(col(Character.id))
    )


async def party_sheets(session: AsyncSession, adventure_id: int) -> list[CharacterSheet]:
    """The adventure's characters, in the order they were made (stable across turns, so the
    party section keeps the prompt's prefix); not a kicked player's, who is out of the story."""
    rows = await session.execute(_party_query(), {"adventure_id": adventure_id})
    return [
        CharacterSheet(row.user_id, row.name, row.about, row.player or "", row.pronouns)
        for row in rows
    ]


async def acting_name(session: AsyncSession, adventure: Adventure, actor: Actor) -> str:
    """Who ``actor``'s actions are written as in ``adventure``: "You" in a DM; in a group
    adventure their character's name, or their display name when they have none."""
    return (await acting_as(session, adventure, actor))[0]


async def acting_as(session: AsyncSession, adventure: Adventure, actor: Actor) -> tuple[str, str]:
    """``acting_name`` and the character's pronouns as kept ("" for "they", and in a DM)."""
    if adventure.server_id is None:
        return SOLO_ACTOR, ""
    row = (
        await session.execute(
            select(col(Character.name), col(Character.pronouns)).where(
                col(Character.adventure_id) == adventure.id,
                col(Character.user_id) == actor.user_id,
            )
        )
    ).first()
    if row is None:
        return display_label(actor.user_name), ""
    return row[0], row[1]


async def _sheet(session: AsyncSession, adventure_id: int, user_id: int) -> Character | None:
    return await session.scalar(
        select(Character).where(
            col(Character.adventure_id) == adventure_id, col(Character.user_id) == user_id
        )
    )


# --- the service -------------------------------------------------------------------------------


class CharacterService:
    """``/character set|show``, ``/party``, ``/join`` and ``/leave``: one call each."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def set(
        self,
        actor: Actor,
        channel_id: int,
        name: str,
        about: str | None = None,
        *,
        player_id: int | None = None,
        pronouns: str | None = None,
    ) -> CharacterSheet:
        """Give ``player_id`` (the actor when None) a character in the adventure here, or
        change theirs; ``about`` and ``pronouns`` None keep what they were. Only their own
        (``check_may_set_character``)."""
        player = actor.user_id if player_id is None else player_id
        clean = clean_name(name)
        described = None if about is None else clean_about(about)
        kept = None if pronouns is None else kept_pronouns(pronouns)
        async with self.db.transaction() as session:
            await touch_actor(session, actor)
            adventure = await adventure_here(session, channel_id)
            assert adventure.id is not None
            check_may_set_character(adventure, actor, player)
            await check_may_make_character(session, adventure, actor)
            taken = await session.scalar(
                select(col(Character.name)).where(
                    col(Character.adventure_id) == adventure.id,
                    col(Character.user_id) != player,
                    col(Character.name_key) == name_key(clean),
                )
            )
            if taken is not None:
                raise _name_taken(taken)
            sheet = await _sheet(session, adventure.id, player)
            if sheet is None:
                sheet = Character(
                    adventure_id=adventure.id,
                    user_id=player,
                    name=clean,
                    name_key=name_key(clean),
                    about=described or "",
                    pronouns=kept or "",
                )
                session.add(sheet)
            else:
                sheet.name, sheet.name_key = clean, name_key(clean)
                if described is not None:
                    sheet.about = described
                if kept is not None:
                    sheet.pronouns = kept
                sheet.updated_at = utcnow()
            try:
                await session.flush()
            except IntegrityError:
                # Another player took the name (or this player set theirs) at the same moment,
                # past the check above: the database kept one; this one changes nothing.
                raise _name_taken(clean) from None
            return CharacterSheet(player, sheet.name, sheet.about, actor.user_name, sheet.pronouns)

    async def show(self, channel_id: int, player_id: int) -> CharacterSheet | None:
        """``player_id``'s character in the adventure here (anyone may read it), or None."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            assert adventure.id is not None
            sheet = await _sheet(session, adventure.id, player_id)
            if sheet is None:
                return None
            player = await session.scalar(select(col(User.name)).where(col(User.id) == player_id))
            return CharacterSheet(player_id, sheet.name, sheet.about, player or "", sheet.pronouns)

    async def name_here(self, actor: Actor, channel_id: int) -> str:
        """Who ``actor`` is in the adventure here, as its story names them (``acting_name``):
        "You" in a DM, for a front end's lines about the player's own moves; their display
        name where no adventure runs."""
        async with self.db.session() as session:
            adventure = await active_adventure(session, channel_id)
            if adventure is None:
                return display_label(actor.user_name)
            return await acting_name(session, adventure, actor)

    async def party(self, channel_id: int) -> Party:
        """Who plays in the adventure here (``engine.people.party``): the host first, then in the
        order they came; and who watches."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            assert adventure.id is not None
            sheets = {s.user_id: s for s in await party_sheets(session, adventure.id)}
            acted = set(await players_who_acted(session, adventure.id))
            order = await party_order(session, adventure)
            # Who acted in the open round plays, as the round itself counts them
            # (``engine.story.rounds``), before their action is in the story.
            in_round = list(
                await session.scalars(
                    select(col(RoundAction.user_id))
                    .where(col(RoundAction.adventure_id) == adventure.id)
                    .order_by(col(RoundAction.position))
                )
            )
            order = list(dict.fromkeys([*order, *in_round]))
            watching = (await spectators(session, adventure.id))[:PARTY_MAX]
            muted = set(
                await session.scalars(
                    select(col(MutedPlayer.user_id)).where(
                        col(MutedPlayer.adventure_id) == adventure.id,
                        col(MutedPlayer.kicked).is_(False),
                    )
                )
            )
            last = None
            if adventure.head_node_id is not None:
                recent = await line_tail(session, adventure.head_node_id, LAST_ACTOR_SCAN)
                last = next(
                    (
                        n.author_id
                        for n in reversed(recent)
                        if n.role == Role.PLAYER and n.author_id is not None
                    ),
                    None,
                )
            more = len(order) > PARTY_MAX
            order = order[:PARTY_MAX]
            rows = await session.execute(
                select(col(User.id), col(User.name)).where(col(User.id).in_(order + watching))
            )
            names = {user: name for user, name in rows}
        members = [
            PartyMember(
                user_id=user,
                player_name=names.get(user, ""),
                character=sheets.get(user),
                host=user == adventure.host_id,
                acted_last=user == last,
                acted=user in acted,
                muted=user in muted,
                in_round=user in in_round,
            )
            for user in order
        ]
        return Party(
            adventure.title,
            adventure.server_id is not None,
            members,
            more,
            closed=adventure.party_closed,
            watching=tuple(
                (sheets[u].name if u in sheets else names.get(u, "")) or UNNAMED for u in watching
            ),
        )

    async def join(self, actor: Actor, channel_id: int) -> PartyChange:
        """``/join``: the actor plays here from now on (``check_may_join``)."""
        async with self.db.transaction() as session:
            await touch_actor(session, actor)
            adventure = await adventure_here(session, channel_id, for_update=True)
            await check_may_join(session, adventure, actor)
            if await in_party(session, adventure, actor.user_id):
                raise InvalidInput("You are already in the party here; nothing was changed.")
            await take_seat(session, adventure, actor.user_id)
            return PartyChange(adventure.title, await acting_name(session, adventure, actor))

    async def leave(self, actor: Actor, channel_id: int) -> PartyChange:
        """``/leave``: the actor watches from now on; an action of theirs waiting for the
        round is taken back, so the round no longer waits for them. Their character stays,
        for when they join again."""
        async with self.db.transaction() as session:
            await touch_actor(session, actor)
            adventure = await adventure_here(session, channel_id, for_update=True)
            check_may_leave(adventure, actor)
            if not await in_party(session, adventure, actor.user_id):
                raise InvalidInput(
                    "You are not in the party here: you are already watching. `/join` takes you in."
                )
            await leave_seat(session, adventure, actor.user_id)
            await session.execute(
                delete(RoundAction).where(
                    col(RoundAction.adventure_id) == adventure.id,
                    col(RoundAction.user_id) == actor.user_id,
                )
            )
            return PartyChange(adventure.title, await acting_name(session, adventure, actor))
