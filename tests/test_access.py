"""Who may do what (engine.people.access): the pure rules over every kind of person, in a server and
in a DM, and one check through Discord that the permissions actor_of reads are the ones the
rules mean."""

from __future__ import annotations

import pytest

from bot.standin.permissions import P_ADMINISTRATOR, P_MANAGE_MESSAGES
from bot.standin.records import RoleRecord
from engine.errors import NotAllowed, NotFound, StoryMovedOn
from engine.people.access.checks import check_may_retry_request, check_may_set_server
from engine.people.access.rules import (
    Actor,
    may_act,
    may_bring_scripts,
    may_close_round,
    may_end,
    may_host,
    may_import,
    may_press,
    may_read_scenario_scripts,
    may_read_scripts,
    may_replace,
    may_resume,
    may_retry_request,
    may_rewrite,
    may_script,
    may_shape_story,
    may_start_with_scripts,
    may_steer,
)
from engine.storage.coordination_models import RequestRecord
from engine.storage.models import Adventure, RewriteRight, Scenario
from tests.discord_env import DiscordEnv, answered

SERVER, OTHER_SERVER = 900, 901
HOST, AUTHOR, MEMBER, PLAYER, STRANGER = 1, 2, 3, 4, 5
IMPORTERS = 77

SERVER_ADVENTURE = Adventure(id=10, title="t", server_id=SERVER, owner_id=None, host_id=HOST)
ORPHANED_ADVENTURE = Adventure(title="t", server_id=SERVER, owner_id=None, host_id=None)
DM_ADVENTURE = Adventure(title="t", server_id=None, owner_id=PLAYER, host_id=PLAYER)


def member(user_id: int = MEMBER, **permissions: bool) -> Actor:
    return Actor(user_id, f"user{user_id}", SERVER, "The Hearth", **permissions)


#: Everyone who may act on a server adventure, by what they are there.
HOST_ACTOR = member(HOST)
AUTHOR_ACTOR = member(AUTHOR)
PLAIN = member()
SERVER_MANAGER = member(manages_server=True)
MESSAGE_MANAGER = member(manages_messages=True)
#: Administrator implies every other permission; actor_of sets both flags.
ADMINISTRATOR = member(manages_server=True, manages_messages=True)


# --- the actor's own notions -------------------------------------------------------------------


def test_server_permissions_mean_nothing_in_a_dm():
    dm = Actor(STRANGER, manages_server=True, manages_messages=True)
    assert not dm.is_server_manager and not dm.is_story_manager
    assert SERVER_MANAGER.is_server_manager and SERVER_MANAGER.is_story_manager
    assert MESSAGE_MANAGER.is_story_manager and not MESSAGE_MANAGER.is_server_manager
    assert not PLAIN.is_server_manager and not PLAIN.is_story_manager


# --- in a server -------------------------------------------------------------------------------

# Each row: the actor, then whether they may steer, rewrite AUTHOR's turn, shape the story,
# and script.
SERVER_RIGHTS = [
    pytest.param(HOST_ACTOR, True, True, True, False, id="host"),
    pytest.param(AUTHOR_ACTOR, False, True, False, False, id="turn author"),
    pytest.param(PLAIN, False, False, False, False, id="plain member"),
    pytest.param(SERVER_MANAGER, True, True, True, True, id="manage server"),
    pytest.param(MESSAGE_MANAGER, False, True, True, False, id="manage messages"),
    pytest.param(ADMINISTRATOR, True, True, True, True, id="administrator"),
]


@pytest.mark.parametrize(("actor", "steer", "rewrite", "shape", "script"), SERVER_RIGHTS)
def test_rights_on_a_server_adventure(actor, steer, rewrite, shape, script):
    assert may_steer(SERVER_ADVENTURE, actor) is steer
    assert may_rewrite(SERVER_ADVENTURE, actor, AUTHOR) is rewrite
    assert may_shape_story(SERVER_ADVENTURE, actor) is shape
    assert may_script(SERVER_ADVENTURE, actor) is script


def test_a_turn_with_no_known_author_is_rewritten_by_the_host_and_managers_only():
    assert may_rewrite(SERVER_ADVENTURE, HOST_ACTOR, None)
    assert may_rewrite(SERVER_ADVENTURE, MESSAGE_MANAGER, None)
    assert not may_rewrite(SERVER_ADVENTURE, AUTHOR_ACTOR, None)


def test_once_the_host_has_left_only_managers_steer():
    assert not may_steer(ORPHANED_ADVENTURE, HOST_ACTOR)
    assert not may_steer(ORPHANED_ADVENTURE, MESSAGE_MANAGER)
    assert may_steer(ORPHANED_ADVENTURE, SERVER_MANAGER)
    assert may_shape_story(ORPHANED_ADVENTURE, MESSAGE_MANAGER)


# --- host controls -----------------------------------------------------------------------------


def hosted(*, locked: bool = False, right: RewriteRight = RewriteRight.AUTHOR) -> Adventure:
    return Adventure(
        id=10,
        title="t",
        server_id=SERVER,
        host_id=HOST,
        locked=locked,
        rewrite_right=right,
    )


# Each row: the actor, then whether they may use host controls, and act and rewrite AUTHOR's
# turn while the adventure is locked.
HOST_CONTROL_RIGHTS = [
    pytest.param(HOST_ACTOR, True, True, id="host"),
    pytest.param(AUTHOR_ACTOR, False, False, id="turn author"),
    pytest.param(PLAIN, False, False, id="plain member"),
    pytest.param(SERVER_MANAGER, True, True, id="manage server"),
    pytest.param(MESSAGE_MANAGER, True, True, id="manage messages"),
]


@pytest.mark.parametrize(("actor", "host", "while_locked"), HOST_CONTROL_RIGHTS)
def test_host_controls_are_for_the_host_and_managers_and_never_bind_them(actor, host, while_locked):
    assert may_host(hosted(), actor) is host
    # Closing a round by hand is a host control too (the round's own rules close it for all).
    assert may_close_round(hosted(), actor) is host
    assert may_act(hosted(), actor)
    assert may_act(hosted(locked=True), actor) is while_locked
    assert may_rewrite(hosted(locked=True), actor, AUTHOR) is while_locked
    # A mute binds only those the controls bind.
    assert may_act(hosted(), actor, muted=True) is while_locked
    assert may_rewrite(hosted(), actor, AUTHOR, muted=True) is while_locked


@pytest.mark.parametrize(
    ("right", "author", "plain"),
    [
        pytest.param(RewriteRight.AUTHOR, True, False, id="author"),
        pytest.param(RewriteRight.HOST, False, False, id="host"),
        pytest.param(RewriteRight.ANYONE, True, True, id="anyone"),
    ],
)
def test_who_rewrites_turns_is_the_hosts_choice(right, author, plain):
    adventure = hosted(right=right)
    assert may_rewrite(adventure, AUTHOR_ACTOR, AUTHOR) is author
    assert may_rewrite(adventure, PLAIN, AUTHOR) is plain
    for leader in (HOST_ACTOR, SERVER_MANAGER, MESSAGE_MANAGER):
        assert may_rewrite(adventure, leader, AUTHOR)
    # The story's shape stays the host's and managers' whatever the choice.
    assert not may_shape_story(adventure, PLAIN)


def test_host_controls_mean_nothing_in_a_dm():
    player = Actor(PLAYER, "wren")
    assert not may_host(DM_ADVENTURE, player)
    assert not may_close_round(DM_ADVENTURE, player)
    assert may_act(DM_ADVENTURE, player, muted=True)


# --- in a DM -----------------------------------------------------------------------------------


def test_in_a_dm_its_player_may_do_everything_and_no_one_else_anything():
    player = Actor(PLAYER, "wren")
    for rule in (may_steer, may_shape_story, may_script):
        assert rule(DM_ADVENTURE, player)
    assert may_rewrite(DM_ADVENTURE, player, None)
    # Permissions from a server count for nothing in someone else's DM story.
    for stranger in (Actor(STRANGER), Actor(STRANGER, manages_server=True, manages_messages=True)):
        for rule in (may_steer, may_shape_story, may_script):
            assert not rule(DM_ADVENTURE, stranger)
        assert not may_rewrite(DM_ADVENTURE, stranger, None)


# --- importing scenarios -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("actor", "without_role", "with_role"),
    [
        pytest.param(PLAIN, False, False, id="plain member"),
        pytest.param(
            Actor(MEMBER, server_id=SERVER, role_ids=frozenset({IMPORTERS})),
            False,
            True,
            id="importer role",
        ),
        pytest.param(SERVER_MANAGER, True, True, id="manage server"),
        pytest.param(MESSAGE_MANAGER, False, False, id="manage messages"),
        pytest.param(ADMINISTRATOR, True, True, id="administrator"),
        pytest.param(Actor(PLAYER), True, True, id="in a DM"),
    ],
)
def test_who_may_import(actor, without_role, with_role):
    assert may_import(actor, None) is without_role
    assert may_import(actor, IMPORTERS) is with_role


def test_only_server_managers_set_the_servers_settings():
    check_may_set_server(SERVER_MANAGER)
    for actor in (
        PLAIN,
        MESSAGE_MANAGER,
        Actor(MEMBER, server_id=SERVER, role_ids=frozenset({IMPORTERS})),
    ):
        with pytest.raises(NotAllowed):
            check_may_set_server(actor)
    with pytest.raises(NotAllowed, match="in a DM there is no server to set"):
        check_may_set_server(Actor(PLAYER))


# --- whole adventures: starting over one, scripts coming in, code going out --------------------


@pytest.mark.parametrize(
    ("actor", "replace", "bring_scripts"),
    [
        pytest.param(HOST_ACTOR, True, False, id="host"),
        pytest.param(AUTHOR_ACTOR, False, False, id="turn author"),
        pytest.param(PLAIN, False, False, id="plain member"),
        pytest.param(SERVER_MANAGER, True, True, id="manage server"),
        pytest.param(MESSAGE_MANAGER, True, False, id="manage messages"),
        pytest.param(ADMINISTRATOR, True, True, id="administrator"),
    ],
)
def test_who_may_start_over_an_adventure_and_bring_scripts_in_a_server(
    actor, replace, bring_scripts
):
    assert may_replace(SERVER_ADVENTURE, actor) is replace
    # Ending one on purpose, or bringing an ended one back, is the same right.
    assert may_end(SERVER_ADVENTURE, actor) is replace
    assert may_resume(SERVER_ADVENTURE, actor) is replace
    assert may_bring_scripts(actor) is bring_scripts
    # Reading the code is the right to change it.
    assert may_read_scripts(SERVER_ADVENTURE, actor) is may_script(SERVER_ADVENTURE, actor)


def test_in_a_dm_its_player_starts_over_and_brings_scripts_and_no_one_else():
    player = Actor(PLAYER, "wren")
    assert may_replace(DM_ADVENTURE, player) and may_bring_scripts(player)
    assert may_end(DM_ADVENTURE, player) and may_resume(DM_ADVENTURE, player)
    assert may_read_scripts(DM_ADVENTURE, player)
    stranger = Actor(STRANGER, manages_server=True, manages_messages=True)
    assert not may_replace(DM_ADVENTURE, stranger)
    assert not may_end(DM_ADVENTURE, stranger) and not may_resume(DM_ADVENTURE, stranger)
    assert not may_read_scripts(DM_ADVENTURE, stranger)
    # Once its host has left, a server adventure is started over by managers alone.
    assert not may_replace(ORPHANED_ADVENTURE, HOST_ACTOR)
    assert may_replace(ORPHANED_ADVENTURE, MESSAGE_MANAGER)


def test_a_scenarios_scripts_come_in_freely_from_the_library_and_a_players_own_need_the_right():
    shipped = Scenario(title="s", builtin_key="lantern-road")
    library = Scenario(title="s", server_id=SERVER)
    own = Scenario(title="s", owner_id=MEMBER)
    for scenario in (shipped, library):
        assert may_start_with_scripts(scenario, PLAIN)
    assert not may_start_with_scripts(own, PLAIN)
    assert not may_start_with_scripts(own, MESSAGE_MANAGER)
    assert may_start_with_scripts(own, SERVER_MANAGER)
    assert may_start_with_scripts(own, Actor(MEMBER))  # in the player's DM


def test_a_scenarios_code_is_read_by_who_may_import_in_its_library():
    shipped = Scenario(title="s", builtin_key="lantern-road")
    library = Scenario(title="s", server_id=SERVER)
    own = Scenario(title="s", owner_id=MEMBER)
    importer = Actor(MEMBER, server_id=SERVER, role_ids=frozenset({IMPORTERS}))
    assert may_read_scenario_scripts(shipped, PLAIN, None)
    assert may_read_scenario_scripts(library, SERVER_MANAGER, None)
    assert may_read_scenario_scripts(library, importer, IMPORTERS)
    assert not may_read_scenario_scripts(library, PLAIN, IMPORTERS)
    assert not may_read_scenario_scripts(library, MESSAGE_MANAGER, None)
    # Another server's managers read nothing of this one's library.
    elsewhere = Actor(MEMBER, server_id=OTHER_SERVER, manages_server=True)
    assert not may_read_scenario_scripts(library, elsewhere, None)
    assert may_read_scenario_scripts(own, PLAIN, None)  # its owner, wherever they are
    assert not may_read_scenario_scripts(own, Actor(STRANGER, server_id=SERVER), None)


# --- buttons -----------------------------------------------------------------------------------


def test_a_button_acts_only_on_the_adventure_it_was_drawn_for():
    assert may_press(SERVER_ADVENTURE, SERVER_ADVENTURE.id)
    assert may_press(SERVER_ADVENTURE, None)  # typed, not pressed
    assert not may_press(SERVER_ADVENTURE, 11)


def request(status: str, adventure_id: int | None = 10) -> RequestRecord:
    return RequestRecord(
        interaction_id=1, adventure_id=adventure_id, payload_digest="", status=status
    )


@pytest.mark.parametrize(
    ("status", "allowed", "refusal"),
    [
        ("failed", True, None),
        ("refused", True, None),
        ("interrupted", True, None),
        ("done", False, "played already"),
        ("retried", False, "played again already"),
        ("queued", False, "being played right now"),
        ("running", False, "being played right now"),
    ],
)
def test_retry_plays_again_only_what_was_never_played(status, allowed, refusal):
    assert may_retry_request(SERVER_ADVENTURE, request(status)) is allowed
    if refusal is not None:
        with pytest.raises(StoryMovedOn, match=refusal):
            check_may_retry_request(SERVER_ADVENTURE, request(status))


def test_retry_plays_again_only_a_request_of_this_adventure():
    for elsewhere in (request("failed", adventure_id=11), request("failed", adventure_id=None)):
        assert not may_retry_request(SERVER_ADVENTURE, elsewhere)
        with pytest.raises(NotAllowed, match="belongs to another adventure"):
            check_may_retry_request(SERVER_ADVENTURE, elsewhere)
    assert not may_retry_request(SERVER_ADVENTURE, None)
    with pytest.raises(NotFound):
        check_may_retry_request(SERVER_ADVENTURE, None)


# --- through Discord ---------------------------------------------------------------------------


def member_with_role(env: DiscordEnv, name: str, permissions: int) -> int:
    """A member of the test server holding one role with ``permissions``."""
    guild = env.fake.world.guilds[env.guild]
    role_id = env.fake.world.snowflake()
    guild.roles[role_id] = RoleRecord(role_id, f"{name}'s role", permissions, position=1)
    user_id = env.fake.add_user(name, member_of=[env.guild])
    guild.members[user_id] = [role_id]
    return user_id


async def test_manage_messages_does_not_steer_but_manage_server_and_administrator_do(env):
    await env.fake.slash(env.bob, env.channel, "start")  # bob hosts; alice manages the server
    await env.done()
    thread = env.fake.threads(env.channel)[-1]
    moderator = member_with_role(env, "carol", P_MANAGE_MESSAGES)
    administrator = member_with_role(env, "dave", P_ADMINISTRATOR)

    async def answer_to(record) -> str:
        # Deferred before the change is written, answered after.
        return (await answered(env, record)).content

    refused = await env.fake.slash(moderator, thread, "note", text="carol's note")
    assert await answer_to(refused) == (
        "⚠ Only bob (this adventure's host) and members with the Manage Server permission "
        "can change this adventure."
    )
    allowed = await env.fake.slash(env.alice, thread, "note", text="alice's note")
    assert (await answer_to(allowed)).startswith("Author's note updated")
    allowed = await env.fake.slash(administrator, thread, "note", text="dave's note")
    assert (await answer_to(allowed)).startswith("Author's note updated")
    adventure = await env.bot.services.play.adventure_in(thread)
    async with env.bot.services.db.session() as session:
        stored = await session.get(Adventure, adventure.adventure_id)
    assert stored.authors_note == "dave's note"


# --- models of one's own, the operator, blocks (issue 18) ---------------------------------------


def test_a_servers_model_is_chosen_by_its_managers_and_a_players_in_their_dm():
    from engine.people.access.checks import check_may_choose_model, may_choose_model

    assert may_choose_model(Actor(1, server_id=5, manages_server=True))
    assert not may_choose_model(Actor(2, server_id=5, manages_messages=True))
    assert not may_choose_model(Actor(3, server_id=5))
    assert may_choose_model(Actor(3))  # in a DM: the player's own
    with pytest.raises(NotAllowed, match="Manage Server"):
        check_may_choose_model(Actor(3, server_id=5))


def test_only_the_operator_operates_and_is_never_blocked():
    from engine.people.access.checks import (
        check_may_operate,
        check_not_blocked,
        may_operate,
        may_use,
    )

    operator = Actor(1, server_id=5, is_operator=True)
    admin = Actor(2, server_id=5, manages_server=True)
    assert may_operate(operator) and not may_operate(admin)
    with pytest.raises(NotAllowed, match="Only the operator"):
        check_may_operate(admin)
    assert may_use(admin, user_blocked=False, server_blocked=False)
    assert not may_use(admin, user_blocked=True, server_blocked=False)
    assert not may_use(admin, user_blocked=False, server_blocked=True)
    assert may_use(operator, user_blocked=True, server_blocked=True)
    with pytest.raises(NotAllowed, match="blocked your use"):
        check_not_blocked(admin, user_blocked=True, server_blocked=True)
    with pytest.raises(NotAllowed, match="blocked its use in this server"):
        check_not_blocked(admin, user_blocked=False, server_blocked=True)
