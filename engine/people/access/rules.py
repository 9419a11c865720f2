"""The rules of ``engine.people.access``: who acts (``Actor``), the adventure a command is about,
and each right as a pure function of the actor and the rows (``may_…``)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import NotFound, StoryMovedOn
from engine.platform.coordination.request_status import NEVER_PLAYED
from engine.storage.coordination_models import RequestRecord
from engine.storage.models import Adventure, RewriteRight, Scenario

#: The answer wherever a command needs an adventure and the channel has none.
NO_ADVENTURE = "There is no adventure running here. Start one with /start."


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is acting, and where, with what the front end knows of their rights there.

    The permission flags are the member's in the channel the interaction came from; a front end
    with no notion of them (a DM, the console) leaves them false.
    """

    user_id: int
    user_name: str = ""
    server_id: int | None = None
    server_name: str = ""
    #: Manage Server (or Administrator) in this channel.
    manages_server: bool = False
    #: Manage Messages (or Administrator) in this channel.
    manages_messages: bool = False
    role_ids: frozenset[int] = frozenset()
    #: Runs this bot: its Discord application's owner, or named in CAMPFIRE_OPERATOR_IDS.
    is_operator: bool = False
    #: Discord marks the place age-restricted (a thread: its parent); None where the front end
    #: does not know (a timer acting in a player's name), which changes nothing.
    age_restricted: bool | None = None

    @property
    def is_server_manager(self) -> bool:
        """Manages the server it acts in (never true in a DM)."""
        return self.server_id is not None and self.manages_server

    @property
    def is_story_manager(self) -> bool:
        """May rewrite anyone's turn and change the story's shape: manages the server or its
        messages (never true in a DM)."""
        return self.server_id is not None and (self.manages_server or self.manages_messages)


# --- the adventure here ------------------------------------------------------------------------


async def active_adventure(
    session: AsyncSession, channel_id: int, *, for_update: bool = False
) -> Adventure | None:
    """The adventure running in a channel, thread or DM, if any."""
    query = (
        select(Adventure)
        .where(col(Adventure.channel_id) == channel_id, col(Adventure.ended_at).is_(None))
        .order_by(col(Adventure.id).desc())
        .limit(1)
    )
    if for_update:
        # Changes to one adventure queue behind each other (PostgreSQL; SQLite has one writer
        # at a time anyway), so two cards cannot take one title.
        query = query.with_for_update()
    return await session.scalar(query)


async def adventure_here(
    session: AsyncSession,
    channel_id: int,
    *,
    for_update: bool = False,
    expect: int | None = None,
    missing: str = NO_ADVENTURE,
) -> Adventure:
    """The adventure running here, or the player-facing answer that there is none.

    ``expect`` is the adventure a form was opened for: if another one runs here now, or none,
    the change is refused rather than written into the wrong story."""
    adventure = await active_adventure(session, channel_id, for_update=for_update)
    if adventure is None:
        if expect is not None:
            raise StoryMovedOn(
                "The adventure here ended while the form was open; nothing was saved."
            )
        raise NotFound(missing)
    if expect is not None and adventure.id != expect:
        raise StoryMovedOn(
            "Another adventure started here while the form was open; nothing was saved."
        )
    return adventure


# --- the rules (pure) --------------------------------------------------------------------------


def _owns_dm_story(adventure: Adventure, actor: Actor) -> bool:
    return actor.user_id in {adventure.owner_id, adventure.host_id} - {None}


def may_steer(adventure: Adventure, actor: Actor) -> bool:
    """Steering text, cards, settings, memories, the summary, world-state corrections."""
    if adventure.server_id is None:
        return _owns_dm_story(adventure, actor)
    return actor.is_server_manager or (
        adventure.host_id is not None and actor.user_id == adventure.host_id
    )


def may_take_card_proposal(adventure: Adventure, actor: Actor, proposed_to: int | None) -> bool:
    """Add or discard a card the story proposed (``engine.story.steering.card_proposals``):
    only the one it was proposed to, and only while they still may steer the adventure (a
    host who passed it on may not)."""
    return proposed_to is not None and actor.user_id == proposed_to and may_steer(adventure, actor)


def _leads(adventure: Adventure, actor: Actor) -> bool:
    """The host of a server adventure, or a member who manages the server or its messages:
    those whom host controls never bind."""
    return actor.is_story_manager or (
        adventure.host_id is not None and actor.user_id == adventure.host_id
    )


def may_rewrite(
    adventure: Adventure, actor: Actor, author_id: int | None, *, muted: bool = False
) -> bool:
    """Retry, undo, edit or choose a take of a turn whose action ``author_id`` wrote;
    ``muted``: the host muted or kicked ``actor`` here."""
    if adventure.server_id is None:
        return actor.user_id in {adventure.owner_id, adventure.host_id, author_id} - {None}
    if _leads(adventure, actor):
        return True
    if adventure.locked or muted:
        return False
    if adventure.rewrite_right == RewriteRight.ANYONE:
        return True
    if adventure.rewrite_right == RewriteRight.HOST:
        return False
    return author_id is not None and actor.user_id == author_id


def may_shape_story(adventure: Adventure, actor: Actor) -> bool:
    """Branches and save points move everyone's story."""
    if adventure.server_id is None:
        return _owns_dm_story(adventure, actor)
    return _leads(adventure, actor)


def may_act(
    adventure: Adventure, actor: Actor, *, muted: bool = False, seated: bool = True
) -> bool:
    """Play in the adventure (do, say, story, continue, a Retry button's action); ``muted``:
    the host muted or kicked ``actor`` here; ``seated``: they are in its party
    (``engine.people.party``), which binds only while the host keeps the party closed. In a DM the
    player is alone."""
    if adventure.server_id is None or _leads(adventure, actor):
        return True
    return not adventure.locked and not muted and (seated or not adventure.party_closed)


def may_join(adventure: Adventure, actor: Actor, *, kicked: bool = False) -> bool:
    """Take a seat in the party: while it is open, anyone here but a kicked player; while it
    is closed, only those whom host controls never bind."""
    if _leads(adventure, actor):
        return True
    return not kicked and not adventure.party_closed


def may_host(adventure: Adventure, actor: Actor) -> bool:
    """Lock, mute, kick, pass the adventure on, choose who may rewrite turns."""
    return adventure.server_id is not None and _leads(adventure, actor)


def may_correct_story(adventure: Adventure, actor: Actor) -> bool:
    """Correct the narrative state, or turn its tracking on or off: the host's word outranks
    the narration's and Canon's, so the host's alone (in a DM, its player's)."""
    if adventure.server_id is None:
        return _owns_dm_story(adventure, actor)
    return adventure.host_id is not None and actor.user_id == adventure.host_id


def may_close_round(adventure: Adventure, actor: Actor) -> bool:
    """Close a round by hand (its Close button), whatever the mode: whoever may host."""
    return may_host(adventure, actor)


def may_script(adventure: Adventure, actor: Actor) -> bool:
    """Upload, switch, remove or test the adventure's scripts."""
    if adventure.server_id is None:
        return _owns_dm_story(adventure, actor)
    return actor.is_server_manager


def may_read_scripts(adventure: Adventure, actor: Actor) -> bool:
    """See the scripts' code, or export it: those who may change the scripts."""
    return may_script(adventure, actor)


def may_read_scenario_scripts(
    scenario: Scenario, actor: Actor, importer_role_id: int | None
) -> bool:
    """See or export the code of a scenario's scripts: a shipped scenario's is Campfire's own;
    a player's own, its owner's; a server library's, for those who may import and delete
    there (they bring scripts in)."""
    if scenario.builtin_key is not None:
        return True
    if scenario.owner_id is not None:
        return scenario.owner_id == actor.user_id
    return scenario.server_id == actor.server_id and may_import(actor, importer_role_id)


def may_change_scenario(scenario: Scenario, actor: Actor, importer_role_id: int | None) -> bool:
    """Change a library scenario's contents (``/card import scenario:``): whoever may delete
    it, as ``/scenario delete`` allows: a player's own, its owner; a server library's, those
    who may import there. A shipped scenario is Campfire's own, changed by no one."""
    if scenario.builtin_key is not None:
        return False
    if scenario.owner_id is not None:
        return scenario.owner_id == actor.user_id
    return scenario.server_id == actor.server_id and may_import(actor, importer_role_id)


def may_bring_scripts(actor: Actor) -> bool:
    """Bring scripts in with an adventure the actor starts or imports here (and will host): the
    script right over that adventure (server managers; in a DM, its player)."""
    return actor.server_id is None or actor.is_server_manager


def may_start_with_scripts(scenario: Scenario, actor: Actor) -> bool:
    """Start ``scenario``, which carries scripts. A shipped scenario's or the server library's
    scripts were vetted as they came in (shipped, or imported by someone the server lets
    import); a player's own scenario's scripts come in only with the script right here."""
    return scenario.owner_id is None or may_bring_scripts(actor)


def may_replace(running: Adventure, actor: Actor) -> bool:
    """Start or import an adventure where ``running`` runs, which ends it."""
    return may_shape_story(running, actor)


def may_end(adventure: Adventure, actor: Actor) -> bool:
    """End ``adventure`` on purpose (``/adventure end``): whoever may start anew over it."""
    return may_replace(adventure, actor)


def may_resume(adventure: Adventure, actor: Actor) -> bool:
    """Bring ``adventure``, ended, back where it ran (``/adventure resume``): whoever may start
    or end an adventure there, by the adventure's own host (in a DM, its player)."""
    return may_replace(adventure, actor)


def may_press(adventure: Adventure, drawn_for: int | None) -> bool:
    """A story button acts only on the adventure it was drawn for (``drawn_for``, from its
    ``custom_id``): one that ended here, or another place's, is not this one."""
    return drawn_for is None or drawn_for == adventure.id


def may_retry_request(adventure: Adventure, request: RequestRecord | None) -> bool:
    """Play again the action of ``request``: only one of this adventure, never played."""
    return (
        request is not None
        and request.adventure_id == adventure.id
        and request.status in NEVER_PLAYED
    )


def may_set_character(adventure: Adventure, actor: Actor, player_id: int) -> bool:
    """Give ``player_id`` a character in ``adventure`` (or change theirs): their own only. A
    character speaks for its player, so not even the host may name someone else's."""
    return actor.user_id == player_id


def may_read_chapters(adventure: Adventure, actor: Actor) -> bool:
    """Read an adventure's chapters and their recaps (``/chapters``): anyone in a server
    adventure's place, as they read the story the recaps sum up; in a DM, its player."""
    return adventure.server_id is not None or _owns_dm_story(adventure, actor)


def may_import(actor: Actor, importer_role_id: int | None) -> bool:
    """Import or delete scenarios in the library of the place the actor is in."""
    if actor.server_id is None or actor.is_server_manager:
        return True
    return importer_role_id is not None and importer_role_id in actor.role_ids


def may_read_knowledge(narrator_only: bool) -> bool:
    """See an imported setting file's text (``/knowledge show``, the prompt Insights attaches):
    anyone in its place, but never a narrator-only file's, which only the narrator reads."""
    return not narrator_only
