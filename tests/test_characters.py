"""Characters and the party in the engine: names and descriptions checked, only one's own set,
the party in the turn's context (in group adventures, within its budget) and in /party."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from sqlalchemy import select

from engine.errors import InvalidInput, NotAllowed
from engine.people.access.rules import Actor, may_set_character
from engine.people.accounts import touch_server
from engine.prompt.inputs import ContextInputs
from engine.prompt.narrator import narrator_rules
from engine.storage.database import Database
from engine.storage.models import Adventure
from engine.storage.party_models import Character
from engine.story.characters import (
    ABOUT_MAX,
    NAME_MAX,
    UNNAMED,
    CharacterService,
    acting_name,
    clean_about,
    clean_name,
    display_label,
)
from engine.turns.context import ContextEngine
from tests.helpers import add_users, new_adventure

SERVER = 77
ANN, BRAM = 1001, 1002


def ann(**kw) -> Actor:
    return Actor(user_id=ANN, user_name="ann_plays", server_id=SERVER, **kw)


def bram() -> Actor:
    return Actor(user_id=BRAM, user_name="bram_plays", server_id=SERVER)


async def group_adventure(db: Database, channel_id: int = 5) -> int:
    adventure_id = await new_adventure(db, channel_id=channel_id)
    async with db.transaction() as session:
        await touch_server(session, SERVER, "The Inn")
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None
        adventure.server_id = SERVER
        adventure.host_id = None
    return adventure_id


# --- names and descriptions --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("Ann", "Ann"),
        ("  Sir   Bram\tthe Bold ", "Sir Bram the Bold"),
        ("O'Neill-Ó Súilleabháin", "O'Neill-Ó Súilleabháin"),
        ("Zhāng Wěi", "Zhāng Wěi"),
        ("R2-D2", "R2-D2"),
        ("St. Clair", "St. Clair"),
        ("x" * NAME_MAX, "x" * NAME_MAX),
    ],
)
def test_a_good_name_is_kept_tidied(typed, stored):
    assert clean_name(typed) == stored


@pytest.mark.parametrize(
    ("typed", "reason"),
    [
        ("", "Give your character a name"),
        ("   \n ", "Give your character a name"),
        ("x" * (NAME_MAX + 1), f"at most {NAME_MAX}"),
        ("<@123456>", "letters, digits, spaces"),
        ("**Ann**", "letters, digits, spaces"),
        ("> Ann", "letters, digits, spaces"),
        ("@everyone", "letters, digits, spaces"),
        ("Ann 🗡", "letters, digits, spaces"),
        ("1234", "at least one letter"),
        ("you", "“You” is how the story writes a solo player"),
        ("YOU", "“You” is how the story writes a solo player"),
    ],
)
def test_a_bad_name_is_refused_with_the_reason(typed, reason):
    with pytest.raises(InvalidInput, match=reason):
        clean_name(typed)


def test_a_description_is_one_line_and_bounded():
    assert clean_about("A ranger\nfrom the  north.\x00") == "A ranger from the north."
    assert clean_about("x" * ABOUT_MAX) == "x" * ABOUT_MAX
    with pytest.raises(InvalidInput, match=f"the limit is {ABOUT_MAX}"):
        clean_about("x" * (ABOUT_MAX + 1))


def test_a_display_name_stands_in_tidied():
    assert display_label("  bob  the\nbaker ") == "bob the baker"
    assert display_label("") == UNNAMED
    assert display_label("y" * 60) == "y" * NAME_MAX
    # A member displayed as "You" must not be written as the solo player.
    assert display_label("You") == "You (player)"


def test_only_the_player_sets_their_character():
    adventure = Adventure(title="t", server_id=SERVER, host_id=ANN)
    assert may_set_character(adventure, ann(), ANN)
    # Not even the host, nor a server manager, sets another player's.
    assert not may_set_character(adventure, ann(manages_server=True), BRAM)
    assert may_set_character(adventure, bram(), BRAM)


# --- the service -------------------------------------------------------------------------------


async def test_set_show_and_the_rules_of_the_service(db: Database):
    await group_adventure(db)
    service = CharacterService(db)
    sheet = await service.set(ann(), 5, "  Ann ", "A ranger\nfrom the north.")
    assert (sheet.name, sheet.about) == ("Ann", "A ranger from the north.")
    # Renamed, the description left out: it stays.
    await service.set(ann(), 5, "Annika")
    shown = await service.show(5, ANN)
    assert shown is not None and (shown.name, shown.about) == ("Annika", "A ranger from the north.")
    assert shown.player_name == "ann_plays"
    assert await service.show(5, BRAM) is None

    with pytest.raises(NotAllowed, match="only they can set it"):
        await service.set(ann(manages_server=True), 5, "Puppet", player_id=BRAM)
    with pytest.raises(InvalidInput, match="already called Annika"):
        await service.set(bram(), 5, "annika")
    with pytest.raises(InvalidInput, match="letters, digits"):
        await service.set(bram(), 5, "<@1001>")
    async with db.session() as session:
        rows = (await session.scalars(select(Character))).all()
    assert [(row.user_id, row.name) for row in rows] == [(ANN, "Annika")]

    with pytest.raises(Exception, match="no adventure running here"):
        await service.set(bram(), 999, "Bram")


async def test_two_players_taking_one_name_at_once_get_one_character(db: Database):
    """Both pass the name check before either writes (PostgreSQL runs them side by side;
    SQLite's writes take turns): the database keeps one, and the other is told why."""
    await group_adventure(db)
    service = CharacterService(db)
    results = await asyncio.gather(
        service.set(ann(), 5, "Wren"), service.set(bram(), 5, "WREN"), return_exceptions=True
    )
    kept = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(kept) == 1 and len(refused) == 1, results
    assert isinstance(refused[0], InvalidInput) and "already called" in str(refused[0])
    async with db.session() as session:
        rows = (await session.scalars(select(Character))).all()
    assert [row.name_key for row in rows] == ["wren"]


async def test_who_an_action_is_written_as(db: Database):
    adventure_id = await group_adventure(db)
    solo_id = await new_adventure(db, channel_id=6)
    await CharacterService(db).set(ann(), 5, "Ann")
    async with db.session() as session:
        group = await session.get(Adventure, adventure_id)
        solo = await session.get(Adventure, solo_id)
        assert group is not None and solo is not None
        assert await acting_name(session, group, ann()) == "Ann"
        assert await acting_name(session, group, bram()) == "bram_plays"
        assert await acting_name(session, solo, ann()) == "You"


async def test_the_party_lists_who_plays(db: Database):
    await group_adventure(db)
    await add_users(db, ANN, BRAM)
    service = CharacterService(db)
    await service.set(bram(), 5, "Bram", "A smith.")
    party = await service.party(5)
    assert party.group
    assert [(m.user_id, m.character.name if m.character else None) for m in party.members] == [
        (BRAM, "Bram")
    ]
    assert not party.members[0].acted and not party.members[0].acted_last


# --- the context -------------------------------------------------------------------------------


def test_the_party_goes_in_the_system_message_within_its_budget():
    engine = ContextEngine()
    party = (("Ann", "A ranger from the north."), ("Bram", ""), ("Cleo", "A bard. " * 37))
    rules = narrator_rules(group=True).text
    inputs = ContextInputs(
        narrator_prompt=rules, group=True, party=party, action_text="> Ann draws."
    )
    # The default budget (10% of what is available) holds all three.
    assert "Cleo: A bard." in engine.build(inputs).messages[0].content
    built = engine.build(replace(inputs, party_budget=40))
    system = built.messages[0].content
    assert system.startswith(rules)
    assert "Party:\nAnn: A ranger from the north.\nBram" in system
    assert "Cleo" not in system  # over the party's own budget
    assert "Party:" not in built.messages[-1].content
    (section,) = [s for s in built.report.sections if s.key == "party"]
    assert [(i.label, i.included) for i in section.items] == [
        ("Ann", True),
        ("Bram", True),
        ("Cleo", False),
    ]
    assert "2 of 3 characters" in section.reason and "budget of 40" in section.reason
    assert section.tokens <= 40
    # The group's rules are the narrator's own: one section, no second voice.
    assert [s.key for s in built.report.sections][:2] == ["narrator", "party"]


def test_a_solo_story_has_no_party_sections():
    built = ContextEngine().build(ContextInputs(action_text="> You wait."))
    keys = {s.key for s in built.report.sections}
    assert "party" not in keys
    assert "Party:\n" not in built.messages[0].content


async def test_gather_reads_the_party_in_group_play_only(db: Database):
    adventure_id = await group_adventure(db)
    solo_id = await new_adventure(db, channel_id=6)
    await CharacterService(db).set(ann(), 5, "Ann", "A ranger.")
    engine = ContextEngine()
    async with db.session() as session:
        group = await session.get(Adventure, adventure_id)
        solo = await session.get(Adventure, solo_id)
        assert group is not None and solo is not None
        grouped = await engine.gather(session, group, "> Ann waits.")
        alone = await engine.gather(session, solo, "> You wait.")
    assert grouped.group and tuple(grouped.party) == (("Ann", "A ranger."),)
    assert grouped.narrator_prompt == narrator_rules(group=True).text  # whatever it asks
    assert not alone.group and tuple(alone.party) == ()
    rules = narrator_rules(group=False, instructions=solo.ai_instructions)
    assert alone.narrator_prompt == rules.text
