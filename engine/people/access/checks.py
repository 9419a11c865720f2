"""The checks of ``engine.people.access``: each right asked where a command needs it, raising the
refusal the player reads (``check_may_…``), reading what the rule needs from the database."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotAllowed, NotFound, StoryMovedOn
from engine.people.access.rules import (
    Actor,
    _leads,
    may_act,
    may_bring_scripts,
    may_change_scenario,
    may_close_round,
    may_correct_story,
    may_end,
    may_host,
    may_import,
    may_join,
    may_press,
    may_read_chapters,
    may_read_scenario_scripts,
    may_replace,
    may_resume,
    may_retry_request,
    may_rewrite,
    may_script,
    may_set_character,
    may_shape_story,
    may_start_with_scripts,
    may_steer,
    may_take_card_proposal,
)
from engine.people.party import in_party
from engine.platform.coordination.request_status import DONE, RETRIED
from engine.storage.coordination_models import RequestRecord
from engine.storage.models import Adventure, RewriteRight, Role, Scenario, Server, StoryNode, User
from engine.storage.party_models import MutedPlayer

# --- the checks (raise the refusal a player reads) ---------------------------------------------


async def _host_name(session: AsyncSession, adventure: Adventure) -> str:
    if adventure.host_id is None:
        return ""
    return (
        await session.scalar(select(col(User.name)).where(col(User.id) == adventure.host_id)) or ""
    )


async def check_may_steer(session: AsyncSession, adventure: Adventure, actor: Actor) -> None:
    if may_steer(adventure, actor):
        return
    if adventure.server_id is None:
        raise NotAllowed("Only this adventure's player can change it.")
    if adventure.host_id is None:
        raise NotAllowed(
            "Only members with the Manage Server permission can change this adventure "
            "(its host has left)."
        )
    host = await _host_name(session, adventure)
    if host:
        raise NotAllowed(
            f"Only {host} (this adventure's host) and members with the Manage Server "
            "permission can change this adventure."
        )
    raise NotAllowed(
        "Only this adventure's host and members with the Manage Server permission can change it."
    )


def check_may_take_card_proposal(
    adventure: Adventure, actor: Actor, proposed_to: int | None
) -> None:
    if not may_take_card_proposal(adventure, actor, proposed_to):
        raise NotAllowed(
            "This card was proposed to the adventure's host; only they can add or discard it, "
            "and only while they host it. Nothing was changed."
        )


async def turn_author(session: AsyncSession, node: StoryNode) -> int | None:
    """Who wrote the action a narrator turn answers (or asked it to go on)."""
    if node.author_id is not None or node.parent_id is None:
        return node.author_id
    parent = await session.get(StoryNode, node.parent_id)
    if parent is not None and parent.role == Role.PLAYER:
        return parent.author_id
    return None


async def muting_of(
    session: AsyncSession, adventure: Adventure, user_id: int
) -> MutedPlayer | None:
    """The host's mute (or kick) of ``user_id`` in ``adventure``, if any."""
    if adventure.id is None or adventure.server_id is None:
        return None
    return await session.get(MutedPlayer, (adventure.id, user_id))


async def _held_back(
    session: AsyncSession, adventure: Adventure, muting: MutedPlayer | None, what: str
) -> NotAllowed | None:
    """The refusal of a host control that binds the actor (``what``: "act", "retry, undo or
    edit turns"), naming the host; None when none does."""
    host = await _host_name(session, adventure)
    who = f"{host} (the host)" if host else "the host"
    if muting is not None and muting.kicked:
        return NotAllowed(
            f"You were removed from this adventure: you cannot {what} here unless {who} lets "
            "you back in. Nothing was changed."
        )
    if muting is not None:
        return NotAllowed(
            f"You were muted in this adventure: you cannot {what} here until {who} unmutes "
            "you. Nothing was changed."
        )
    if adventure.locked:
        return NotAllowed(
            f"🔒 This adventure is locked: only {who} and members who can manage the server or "
            f"its messages can {what} now. Nothing was changed."
        )
    return None


async def check_may_act(session: AsyncSession, adventure: Adventure, actor: Actor) -> None:
    """Play in the adventure: refused while it is locked, to a muted or kicked player, and to
    a spectator while the party is closed."""
    if adventure.server_id is None or _leads(adventure, actor):
        return  # no host control binds them: nothing to look up
    muting = await muting_of(session, adventure, actor.user_id)
    # Whether they are in the party matters only while it is closed: no reads otherwise.
    seated = not adventure.party_closed or await in_party(session, adventure, actor.user_id)
    if may_act(adventure, actor, muted=muting is not None, seated=seated):
        return
    refusal = await _held_back(session, adventure, muting, "act")
    if refusal is None:
        refusal = await _party_closed(session, adventure, "act")
    raise refusal


async def check_not_muted(session: AsyncSession, adventure: Adventure, user_id: int) -> None:
    """The host's mute or kick of ``user_id``, asked again where an action of theirs that
    waited is about to play (``engine.turns.plan``)."""
    muting = await muting_of(session, adventure, user_id)
    if muting is not None:
        refusal = await _held_back(session, adventure, muting, "act")
        assert refusal is not None
        raise refusal


async def _party_closed(session: AsyncSession, adventure: Adventure, what: str) -> NotAllowed:
    host = await _host_name(session, adventure)
    who = f"{host} (the host)" if host else "the host"
    return NotAllowed(
        f"🚪 The party is closed: only its players {what} now, and you are watching. Ask {who} "
        "to open it (`/host party open`). Nothing was changed."
    )


async def check_may_join(session: AsyncSession, adventure: Adventure, actor: Actor) -> None:
    """``/join``: in a server adventure whose party is open, or for those who lead it."""
    if adventure.server_id is None:
        raise InvalidInput(
            "In a DM you are the story's only player: there is no party to join. Play with "
            "others in a server channel."
        )
    muting = await muting_of(session, adventure, actor.user_id)
    kicked = muting is not None and muting.kicked
    if may_join(adventure, actor, kicked=kicked):
        return
    if kicked:
        refusal = await _held_back(session, adventure, muting, "join")
        assert refusal is not None
        raise refusal
    raise await _party_closed(session, adventure, "play")


def check_may_leave(adventure: Adventure, actor: Actor) -> None:
    """``/leave``: anyone in a server adventure's party but its host, who hands it on first."""
    if adventure.server_id is None:
        raise InvalidInput(
            "In a DM you are the story's only player: there is no party to leave. `/start` "
            "begins another story."
        )
    if adventure.host_id == actor.user_id:
        raise InvalidInput(
            "You host this adventure: pass it on with `/host transfer` before you leave the "
            "party. Nothing was changed."
        )


async def check_may_make_character(
    session: AsyncSession, adventure: Adventure, actor: Actor
) -> None:
    """A character is the player's voice in the prompt: a muted or kicked player makes and
    changes none (what they would write goes into every turn's prompt); and a character puts
    its player in the party, so while the party is closed a spectator makes none (the host
    opens it, or they watch)."""
    if adventure.server_id is None or _leads(adventure, actor):
        return
    muting = await muting_of(session, adventure, actor.user_id)
    if muting is not None:
        refusal = await _held_back(session, adventure, muting, "make or change a character")
        assert refusal is not None
        raise refusal
    if not adventure.party_closed or await in_party(session, adventure, actor.user_id):
        return
    raise await _party_closed(session, adventure, "make characters")


async def check_may_rewrite(
    session: AsyncSession, adventure: Adventure, node: StoryNode, actor: Actor
) -> None:
    await check_may_rewrite_for(session, adventure, await turn_author(session, node), actor)


async def check_may_rewrite_for(
    session: AsyncSession, adventure: Adventure, author: int | None, actor: Actor
) -> None:
    """Rewrite what ``author`` asked for: a turn of theirs, or (a Retry button) an action of
    theirs that never played, which then plays as theirs again."""
    muting = await muting_of(session, adventure, actor.user_id)
    if may_rewrite(adventure, actor, author, muted=muting is not None):
        return
    if adventure.server_id is None:
        raise NotAllowed("Only this adventure's player can change its turns.")
    refusal = await _held_back(session, adventure, muting, "retry, undo or edit turns")
    if refusal is not None:
        raise refusal
    host = await _host_name(session, adventure)
    who = f"{host} (the host)" if host else "the adventure's host"
    if adventure.rewrite_right == RewriteRight.HOST:
        raise NotAllowed(
            f"In this adventure only {who} and members who can manage the server or its "
            "messages can retry, undo or edit turns."
        )
    raise NotAllowed(
        f"Only the player who wrote that turn, {who} and members who can manage the server or "
        "its messages can retry, undo or edit it."
    )


async def check_may_retry(
    session: AsyncSession, adventure: Adventure, head: StoryNode, actor: Actor
) -> None:
    """Whether ``actor`` may write ``head``, the newest turn, again: a narrator turn (not the
    opening), theirs to rewrite."""
    if head.parent_id is None or head.role != Role.NARRATOR:
        raise InvalidInput("There is no narrator turn to retry yet: the story is at its opening.")
    await check_may_rewrite(session, adventure, head, actor)


async def check_may_shape_story(session: AsyncSession, adventure: Adventure, actor: Actor) -> None:
    if may_shape_story(adventure, actor):
        return
    if adventure.server_id is None:
        raise NotAllowed("Only this adventure's player can change its branches and save points.")
    host = await _host_name(session, adventure)
    who = f"{host} (the host)" if host else "the adventure's host"
    raise NotAllowed(
        f"Only {who} and members who can manage the server or its messages can change "
        "branches and save points."
    )


def check_may_script(adventure: Adventure, actor: Actor) -> None:
    if may_script(adventure, actor):
        return
    if adventure.server_id is None:
        raise NotAllowed("Only this adventure's player can change its scripts.")
    raise NotAllowed(
        "Scripts run code in every turn, so only members with the Manage Server permission "
        "can change or test them."
    )


def _script_list(names: list[str]) -> str:
    shown = ", ".join(f"“{name}”" for name in names[:5])
    if len(names) > 5:
        shown += f" and {len(names) - 5} more"
    return f"script{'s' if len(names) != 1 else ''} ({shown})"


def check_may_set_character(adventure: Adventure, actor: Actor, player_id: int) -> None:
    if may_set_character(adventure, actor, player_id):
        return
    raise NotAllowed(
        "A character belongs to its player: only they can set it. Nothing was changed."
    )


def check_may_import_scripts(actor: Actor, names: list[str]) -> None:
    """An adventure file carrying the scripts ``names``."""
    if not names or may_bring_scripts(actor):
        return
    raise NotAllowed(
        f"This adventure carries {_script_list(names)}: code that runs every turn. In a server "
        "only members with the Manage Server permission can bring scripts in. Ask one of them "
        "to import it, or import it in a DM with me; nothing was imported."
    )


def check_may_start_with_scripts(scenario: Scenario, actor: Actor, names: list[str]) -> None:
    """``names``: the scenario's scripts."""
    if not names or may_start_with_scripts(scenario, actor):
        return
    raise NotAllowed(
        f"“{scenario.title}” is your own scenario and carries {_script_list(names)}: code that "
        "runs every turn. In a server only members with the Manage Server permission can bring "
        "scripts in. Start it in a DM with me, or ask a manager to import it into this server's "
        "library."
    )


async def check_may_replace(session: AsyncSession, running: Adventure, actor: Actor) -> None:
    if may_replace(running, actor):
        return
    if running.server_id is None:
        raise NotAllowed("Only this adventure's player can start another one here.")
    host = await _host_name(session, running)
    who = f"{host} (its host)" if host else "its host"
    raise NotAllowed(
        f"“{running.title}” is running here. Only {who} and members who can manage the server "
        "or its messages can start or import another adventure in its place; nothing was "
        "changed. Use /start in a text channel to open a thread of your own."
    )


async def check_may_end(session: AsyncSession, adventure: Adventure, actor: Actor) -> None:
    if not may_end(adventure, actor):
        raise await _only_those_who_lead(session, adventure, "end it", "end “{title}”")


async def check_may_resume(session: AsyncSession, adventure: Adventure, actor: Actor) -> None:
    if not may_resume(adventure, actor):
        raise await _only_those_who_lead(
            session, adventure, "bring it back", "bring “{title}” back"
        )


async def _only_those_who_lead(
    session: AsyncSession, adventure: Adventure, alone: str, together: str
) -> NotAllowed:
    """The refusal of a change to a whole adventure: its player's alone in a DM (``alone``),
    its host's and managers' in a server (``together``, with the adventure's ``{title}``)."""
    if adventure.server_id is None:
        return NotAllowed(f"Only this adventure's player can {alone}.")
    host = await _host_name(session, adventure)
    who = f"{host} (its host)" if host else "its host"
    what = together.format(title=adventure.title)
    return NotAllowed(
        f"Only {who} and members who can manage the server or its messages can {what}; "
        "nothing was changed."
    )


@dataclass(frozen=True, slots=True)
class Member:
    """Someone a host control names, as the front end knows them in the adventure's place."""

    user_id: int
    name: str
    #: A member of the server who can see the adventure's place.
    in_place: bool = True
    #: Manages the server or its messages there: host controls never bind them.
    leads: bool = False
    is_bot: bool = False


async def check_may_host(session: AsyncSession, adventure: Adventure, actor: Actor) -> None:
    if may_host(adventure, actor):
        return
    if adventure.server_id is None:
        raise NotAllowed(
            "Host controls are for adventures played together in a server; in a DM the story "
            "is yours alone."
        )
    host = await _host_name(session, adventure)
    who = f"{host} (the host)" if host else "the adventure's host"
    raise NotAllowed(
        f"Only {who} and members who can manage the server or its messages can use host "
        "controls here; nothing was changed. `/host show` says what they set."
    )


def check_may_read_chapters(adventure: Adventure, actor: Actor) -> None:
    if not may_read_chapters(adventure, actor):
        raise NotAllowed("Only this adventure's player can read its chapters.")


async def check_may_correct_story(
    session: AsyncSession, adventure: Adventure, actor: Actor
) -> None:
    if may_correct_story(adventure, actor):
        return
    host = await _host_name(session, adventure)
    who = f"{host} (the host)" if host else "the adventure's host"
    raise NotAllowed(
        f"Only {who} can correct the story's state or turn its tracking on or off; nothing "
        "was changed. `/narrative state` shows it to anyone."
    )


async def check_may_close_round(session: AsyncSession, adventure: Adventure, actor: Actor) -> None:
    if may_close_round(adventure, actor):
        return
    host = await _host_name(session, adventure)
    who = f"{host} (the host)" if host else "the adventure's host"
    raise NotAllowed(
        f"Only {who} and members who can manage the server or its messages can close a "
        "round; nothing was closed. Your own action is in when you have submitted it."
    )


def check_may_mute(adventure: Adventure, target: Member) -> None:
    """Mute or kick ``target``: never the host, a bot, or someone host controls cannot bind."""
    if target.is_bot:
        raise InvalidInput(f"{target.name} is a bot: bots do not play; nothing was changed.")
    if target.user_id == adventure.host_id:
        raise InvalidInput(
            f"{target.name} is the host: pass the adventure on with `/host transfer` first; "
            "nothing was changed."
        )
    if target.leads:
        raise InvalidInput(
            f"{target.name} can manage the server or its messages here, so host controls do "
            "not bind them; nothing was changed."
        )


async def check_may_transfer(session: AsyncSession, adventure: Adventure, target: Member) -> None:
    """Make ``target`` the host: a member of the place who has used Campfire (a user row is
    made only when its person does something: ``engine.people.accounts``), not a bot."""
    if target.is_bot:
        raise InvalidInput(f"{target.name} is a bot and cannot host; nothing was changed.")
    if not target.in_place:
        raise InvalidInput(
            f"{target.name} is not a member who can see this adventure's channel; the host must "
            "be someone who can play here. Nothing was changed."
        )
    if target.user_id == adventure.host_id:
        raise InvalidInput(f"{target.name} is already the host; nothing was changed.")
    if await session.get(User, target.user_id) is None:
        raise InvalidInput(
            f"{target.name} has not used Campfire yet: once they have (any command), the "
            "adventure can pass to them. Nothing was changed."
        )


#: The answer to a story button pressed where another adventure runs than it was drawn for.
OTHER_ADVENTURE = (
    "That button belongs to another adventure than the one running here; nothing was changed."
)


def check_may_press(adventure: Adventure, drawn_for: int | None) -> None:
    if not may_press(adventure, drawn_for):
        raise StoryMovedOn(OTHER_ADVENTURE)


#: The answer to a second press of one Retry button.
PLAYED_AGAIN = "That action was played again already; nothing more was played."


def check_may_retry_request(adventure: Adventure, request: RequestRecord | None) -> None:
    if may_retry_request(adventure, request):
        return
    if request is None:
        raise NotFound("That action is no longer available to retry.")
    if request.adventure_id != adventure.id:
        raise NotAllowed(
            "That Retry button belongs to another adventure than the one running here; "
            "nothing was played."
        )
    if request.status == DONE:
        raise StoryMovedOn("That action was played already; nothing was played again.")
    if request.status == RETRIED:
        raise StoryMovedOn(PLAYED_AGAIN)
    raise StoryMovedOn("That action is being played right now; wait for it to arrive.")


async def reads_scenario_scripts(session: AsyncSession, scenario: Scenario, actor: Actor) -> bool:
    """``may_read_scenario_scripts``, with the server's importer role looked up."""
    role = None
    if scenario.server_id is not None:
        server = await session.get(Server, scenario.server_id)
        role = server.importer_role_id if server is not None else None
    return may_read_scenario_scripts(scenario, actor, role)


async def check_may_change_scenario(
    session: AsyncSession, scenario: Scenario, actor: Actor
) -> None:
    """``may_change_scenario``, with the server's importer role looked up."""
    role = None
    if scenario.server_id is not None:
        server = await session.get(Server, scenario.server_id)
        role = server.importer_role_id if server is not None else None
    if may_change_scenario(scenario, actor, role):
        return
    if scenario.builtin_key is not None:
        raise NotAllowed(
            f"“{scenario.title}” ships with Campfire and cannot be changed. Export it with "
            "`/scenario export`, import the file as a scenario of your own, and change that."
        )
    if scenario.owner_id is not None:
        raise NotAllowed(
            f"“{scenario.title}” is another player's own scenario: only they change it."
        )
    await check_may_import(session, actor, "change this server's scenarios")


async def check_may_import(session: AsyncSession, actor: Actor, what: str) -> None:
    """``what`` completes "Only … can ___ here", e.g. "import scenarios"."""
    role = None
    if actor.server_id is not None:
        server = await session.get(Server, actor.server_id)
        role = server.importer_role_id if server is not None else None
    if may_import(actor, role):
        return
    who = "members with the Manage Server permission"
    if role is not None:
        who += f" and the <@&{role}> role"
    raise NotAllowed(f"Only {who} can {what} here. In a DM with me you can import your own.")


async def check_may_manage_knowledge(session: AsyncSession, actor: Actor) -> None:
    """Import, remove or change setting files in the knowledge library here (the server's, the
    adventure's here, or in a DM the player's own): who may import scenarios."""
    await check_may_import(session, actor, "manage the knowledge library")


def check_may_set_server(actor: Actor) -> None:
    """A server's settings (``engine.people.servers``: the importer role, suggested actions):
    members who manage the server."""
    if actor.server_id is None:
        raise NotAllowed("This is a server's setting; in a DM there is no server to set.")
    if not actor.is_server_manager:
        raise NotAllowed("Only members with the Manage Server permission can choose this.")


# --- models of one's own, the operator, blocks -------------------------------------------------


def may_choose_model(actor: Actor) -> bool:
    """Set or clear the model used here: a server's managers, or the player in a DM."""
    return actor.server_id is None or actor.is_server_manager


def check_may_choose_model(actor: Actor) -> None:
    if may_choose_model(actor):
        return
    raise NotAllowed(
        "Only members with the Manage Server permission can choose this server's model; "
        "nothing was changed. In a DM with me you can choose a model for your own adventures."
    )


def may_operate(actor: Actor) -> bool:
    """The operator's commands: status, blocks."""
    return actor.is_operator


def check_may_operate(actor: Actor) -> None:
    if not may_operate(actor):
        raise NotAllowed("Only the operator who runs this bot can use /operator.")


def may_use(actor: Actor, *, user_blocked: bool, server_blocked: bool) -> bool:
    """Use Campfire at all: not a blocked user, nor in a blocked server; the operator always."""
    return actor.is_operator or not (user_blocked or server_blocked)


def check_not_blocked(actor: Actor, *, user_blocked: bool, server_blocked: bool) -> None:
    if not may_use(actor, user_blocked=user_blocked, server_blocked=server_blocked):
        raise blocked_refusal(user_blocked=user_blocked)


def blocked_refusal(*, user_blocked: bool) -> NotAllowed:
    if user_blocked:
        return NotAllowed(
            "Sorry: the operator of this bot has blocked your use of it, so I cannot do "
            "that. Nothing was changed."
        )
    return NotAllowed(
        "Sorry: the operator of this bot has blocked its use in this server, so I cannot do "
        "that here. Nothing was changed."
    )
