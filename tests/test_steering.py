"""Steering an adventure: author's note, plot essentials, AI instructions, story cards and
generation settings (engine.story.steering's three services), on every database backend."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from engine.errors import InvalidInput, NotAllowed, NotFound, StoryMovedOn
from engine.library.scenarios.start import start_adventure
from engine.people.access.checks import check_may_steer
from engine.people.access.rules import Actor, may_steer
from engine.people.accounts import touch_server, touch_user
from engine.storage.database import Database
from engine.storage.models import Adventure, AdventureCard, Scenario, ScenarioCard
from engine.story.steering.cards import CARD_ENTRY_MAX, CARD_KEYS_MAX, CardDraft, StoryCards
from engine.story.steering.settings import GenerationDefaults, GenerationSettings
from engine.story.steering.text import TEXT_MAX_CHARS, SteeringField, SteeringText

SERVER, HOST, OTHER, CHANNEL, DM_CHANNEL = 900, 11, 12, 100, 200
HOST_ACTOR = Actor(HOST, "alice", SERVER, "The Hearth")
OTHER_ACTOR = Actor(OTHER, "bob", SERVER, "The Hearth")
#: bob again, as a member who can manage the server.
MANAGER_ACTOR = Actor(OTHER, "bob", SERVER, "The Hearth", manages_server=True)
DEFAULTS = GenerationDefaults(context_tokens=4096, max_output_tokens=300, temperature=0.8)
MAX_CARDS = 500


def cards(db: Database, max_cards: int = MAX_CARDS) -> StoryCards:
    return StoryCards(db, max_cards=max_cards)


def settings_of(db: Database) -> GenerationSettings:
    return GenerationSettings(db, DEFAULTS)


async def refusal(db: Database, adventure: Adventure, actor: Actor) -> str:
    async with db.session() as session:
        with pytest.raises(NotAllowed) as error:
            await check_may_steer(session, adventure, actor)
    return error.value.message


async def server_adventure(db: Database, *, channel_id: int = CHANNEL) -> int:
    async with db.session() as session, session.begin():
        await touch_server(session, SERVER, "The Hearth")
        await touch_user(session, HOST, "alice")
        scenario_id = await session.scalar(
            select(Scenario.id).where(Scenario.builtin_key == "lantern-road")
        )
        adventure = await start_adventure(
            session, scenario_id, channel_id=channel_id, server_id=SERVER, host_id=HOST
        )
        return adventure.id


async def dm_adventure(db: Database, player: int = OTHER) -> int:
    async with db.session() as session, session.begin():
        await touch_user(session, player, "bob")
        scenario_id = await session.scalar(
            select(Scenario.id).where(Scenario.builtin_key == "lantern-road")
        )
        adventure = await start_adventure(
            session, scenario_id, channel_id=DM_CHANNEL, host_id=player
        )
        return adventure.id


async def load(db: Database, adventure_id: int) -> Adventure:
    async with db.session() as session:
        return await session.get(Adventure, adventure_id)


# --- who may steer -------------------------------------------------------------------------------


def test_in_a_server_the_host_and_managers_may_steer():
    adventure = Adventure(title="t", server_id=SERVER, host_id=HOST)
    assert may_steer(adventure, HOST_ACTOR)
    assert may_steer(adventure, MANAGER_ACTOR)
    assert not may_steer(adventure, OTHER_ACTOR)


async def test_a_server_adventure_whose_host_left_is_steered_by_managers_only(db):
    adventure = Adventure(title="t", server_id=SERVER, host_id=None)
    assert not may_steer(adventure, HOST_ACTOR)
    assert may_steer(adventure, Actor(HOST, "alice", SERVER, manages_server=True))
    assert "Manage Server" in await refusal(db, adventure, HOST_ACTOR)


async def test_in_a_dm_only_its_player_may_steer(db):
    adventure = Adventure(title="t", server_id=None, owner_id=OTHER, host_id=OTHER)
    assert may_steer(adventure, Actor(OTHER))
    # Server permissions mean nothing in someone else's DM adventure.
    assert not may_steer(adventure, Actor(HOST, manages_server=True))
    assert await refusal(db, adventure, Actor(HOST)) == (
        "Only this adventure's player can change it."
    )


async def test_the_refusal_names_the_host(db):
    async with db.session() as session, session.begin():
        await touch_user(session, HOST, "alice")
    adventure = Adventure(title="t", server_id=SERVER, host_id=HOST)
    assert await refusal(db, adventure, OTHER_ACTOR) == (
        "Only alice (this adventure's host) and members with the Manage Server permission "
        "can change this adventure."
    )


# --- steering text -------------------------------------------------------------------------------


async def test_the_host_sets_the_authors_note_and_only_the_adventure_changes(db):
    adventure_id = await server_adventure(db)
    before = await load(db, adventure_id)
    change = await SteeringText(db).set(
        CHANNEL, HOST_ACTOR, SteeringField.AUTHORS_NOTE, "  Keep it gothic.  \n"
    )
    assert change.text == "Keep it gothic."
    assert change.previous == before.authors_note
    assert change.message == "Author's note updated; it applies from the next turn."
    after = await load(db, adventure_id)
    assert after.authors_note == "Keep it gothic."
    assert after.version == before.version  # buttons under the newest turn stay valid
    assert after.plot_essentials == before.plot_essentials
    async with db.session() as session:
        scenario = await session.get(Scenario, after.scenario_id)
    assert scenario.authors_note == before.authors_note  # the scenario is never edited


@pytest.mark.parametrize("field", list(SteeringField))
async def test_each_field_is_read_and_written(db, field):
    adventure_id = await server_adventure(db)
    await SteeringText(db).set(CHANNEL, HOST_ACTOR, field.value, f"new {field.value}")
    current = await SteeringText(db).get(CHANNEL, HOST_ACTOR, field)
    assert (current.adventure_id, current.text) == (adventure_id, f"new {field.value}")
    assert current.label == field.label


async def test_blank_text_clears_and_says_so(db):
    adventure_id = await server_adventure(db)
    change = await SteeringText(db).set(CHANNEL, HOST_ACTOR, "plot_essentials", "   \n ")
    assert change.cleared
    assert change.message == "Plot essentials cleared; it applies from the next turn."
    assert (await load(db, adventure_id)).plot_essentials == ""
    again = await SteeringText(db).set(CHANNEL, HOST_ACTOR, "plot_essentials", "")
    assert again.message == "Plot essentials was already empty; nothing changed."


async def test_steering_text_over_the_cap_is_refused(db):
    await server_adventure(db)
    await SteeringText(db).set(CHANNEL, HOST_ACTOR, "ai_instructions", "x" * TEXT_MAX_CHARS)
    with pytest.raises(InvalidInput) as error:
        await SteeringText(db).set(CHANNEL, HOST_ACTOR, "ai_instructions", "x" * 4001)
    assert error.value.message == (
        "AI instructions can be at most 4,000 characters; this one has 4,001."
    )


async def test_someone_else_is_refused_and_told_who_can(db):
    adventure_id = await server_adventure(db)
    with pytest.raises(NotAllowed) as error:
        await SteeringText(db).set(CHANNEL, OTHER_ACTOR, "authors_note", "mine now")
    assert "Only alice (this adventure's host)" in error.value.message
    with pytest.raises(NotAllowed):
        await SteeringText(db).get(CHANNEL, OTHER_ACTOR, "authors_note")
    assert (await load(db, adventure_id)).authors_note != "mine now"
    # A member who can manage the server may.
    await SteeringText(db).set(CHANNEL, MANAGER_ACTOR, "authors_note", "by a mod")
    assert (await load(db, adventure_id)).authors_note == "by a mod"


async def test_a_dm_player_steers_their_own_adventure(db):
    await dm_adventure(db)
    player = Actor(OTHER, "bob")
    await SteeringText(db).set(DM_CHANNEL, player, "authors_note", "solo")
    with pytest.raises(NotAllowed):
        await SteeringText(db).set(
            DM_CHANNEL, Actor(HOST, manages_server=True), "authors_note", "x"
        )


async def test_nothing_running_here(db):
    with pytest.raises(NotFound) as error:
        await SteeringText(db).set(4242, HOST_ACTOR, "authors_note", "x")
    assert error.value.message == "There is no adventure running here. Start one with /start."


async def test_a_form_for_an_adventure_that_was_replaced_saves_nothing(db):
    first = await server_adventure(db)
    async with db.session() as session, session.begin():
        adventure = await session.get(Adventure, first)
        from engine.storage.models import utcnow

        adventure.ended_at = utcnow()
    second = await server_adventure(db)
    with pytest.raises(StoryMovedOn):
        await SteeringText(db).set(CHANNEL, HOST_ACTOR, "authors_note", "x", adventure_id=first)
    assert (await load(db, second)).authors_note != "x"


async def test_an_unknown_field_is_refused(db):
    await server_adventure(db)
    with pytest.raises(InvalidInput):
        await SteeringText(db).set(CHANNEL, HOST_ACTOR, "prompt", "x")


# --- story cards ---------------------------------------------------------------------------------


async def test_card_crud(db):
    adventure_id = await server_adventure(db)
    shipped = (await cards(db).page(CHANNEL)).total
    assert shipped == 3  # the Lantern Road's cards, copied at start

    card = await cards(db).add(
        CHANNEL,
        HOST_ACTOR,
        CardDraft(
            "  The   Ferryman ", "ferry, boatman,, river ", "Takes a coin.", "Character", True
        ),
    )
    assert (card.title, card.keys, card.type, card.always_on) == (
        "The Ferryman",
        "ferry, boatman, river",
        "character",
        True,
    )
    assert card.key_list == ["ferry", "boatman", "river"]
    assert card.position == 3 and card.adventure_id == adventure_id

    page = await cards(db).page(CHANNEL)
    assert [c.title for c in page.cards][-1] == "The Ferryman"
    assert page.total == 4

    edited = await cards(db).edit(
        CHANNEL, HOST_ACTOR, card.id, CardDraft("The Ferryman", "ferry", "Wants two coins.")
    )
    assert (edited.entry, edited.keys, edited.type, edited.always_on) == (
        "Wants two coins.",
        "ferry",
        "custom",
        False,
    )
    assert (await cards(db).get(CHANNEL, HOST_ACTOR, "the ferryman")).id == card.id
    assert (await cards(db).get(CHANNEL, HOST_ACTOR, str(card.id))).title == "The Ferryman"

    removed = await cards(db).remove(CHANNEL, HOST_ACTOR, str(card.id))
    assert removed.title == "The Ferryman"
    assert (await cards(db).page(CHANNEL)).total == 3
    removed = await cards(db).remove(CHANNEL, HOST_ACTOR, "old wenna")
    assert removed.title == "Old Wenna"
    with pytest.raises(NotFound) as error:
        await cards(db).remove(CHANNEL, HOST_ACTOR, "Old Wenna")
    assert "no story card called “Old Wenna”" in error.value.message

    async with db.session() as session:
        # The scenario keeps its cards.
        kept = await session.scalars(
            select(ScenarioCard.title)
            .join(Scenario, Scenario.id == ScenarioCard.scenario_id)
            .where(Scenario.builtin_key == "lantern-road")
        )
        assert "Old Wenna" in kept.all()
        assert (await load(db, adventure_id)).version == 0


async def test_duplicate_titles_are_refused_whatever_their_case(db):
    await server_adventure(db)
    with pytest.raises(InvalidInput) as error:
        await cards(db).add(CHANNEL, HOST_ACTOR, CardDraft("old  WENNA"))
    assert error.value.message == "This adventure already has a story card called “old WENNA”."
    mill = await cards(db).add(CHANNEL, HOST_ACTOR, CardDraft("The Mill"))
    # Keeping its own title is fine; taking another card's is not.
    await cards(db).edit(CHANNEL, HOST_ACTOR, mill.id, CardDraft("THE MILL", "mill"))
    with pytest.raises(InvalidInput):
        await cards(db).edit(CHANNEL, HOST_ACTOR, mill.id, CardDraft("Marsh-lights"))


async def test_the_same_title_in_another_adventure_is_fine(db):
    await server_adventure(db)
    await dm_adventure(db)
    await cards(db).add(DM_CHANNEL, Actor(OTHER), CardDraft("The Mill"))
    await cards(db).add(CHANNEL, HOST_ACTOR, CardDraft("The Mill"))


@pytest.mark.parametrize(
    ("draft", "message"),
    [
        (CardDraft("   "), "A story card needs a title."),
        (CardDraft("t" * 101), "A card's title can be at most 100 characters; this one has 101."),
        (
            CardDraft("Keys", keys="k" * (CARD_KEYS_MAX + 1)),
            "A card's keys can be at most 500 characters together; these have 501.",
        ),
        (
            CardDraft("Entry", entry="e" * (CARD_ENTRY_MAX + 1)),
            "A card's entry can be at most 4,000 characters; this one has 4,001.",
        ),
        (
            CardDraft("Type", type="t" * 40),
            "A card's type can be at most 32 characters, like character, location, faction "
            "or custom.",
        ),
    ],
)
async def test_card_validation_messages(db, draft, message):
    await server_adventure(db)
    with pytest.raises(InvalidInput) as error:
        await cards(db).add(CHANNEL, HOST_ACTOR, draft)
    assert error.value.message == message
    assert (await cards(db).page(CHANNEL)).total == 3


async def test_the_card_cap(db):
    await server_adventure(db)
    assert await cards(db, 4).check_room(CHANNEL, HOST_ACTOR)
    await cards(db, 4).add(CHANNEL, HOST_ACTOR, CardDraft("Fourth"))
    expected = (
        "This adventure already has 4 story cards, the most it can hold (4). Remove one first."
    )
    with pytest.raises(InvalidInput) as error:
        await cards(db, 4).check_room(CHANNEL, HOST_ACTOR)
    assert error.value.message == expected
    with pytest.raises(InvalidInput) as error:
        await cards(db, 4).add(CHANNEL, HOST_ACTOR, CardDraft("Fifth"))
    assert error.value.message == expected


async def test_cards_are_changed_by_the_host_and_managers_only(db):
    await server_adventure(db)
    with pytest.raises(NotAllowed):
        await cards(db).check_room(CHANNEL, OTHER_ACTOR)
    with pytest.raises(NotAllowed):
        await cards(db).add(CHANNEL, OTHER_ACTOR, CardDraft("Mine"))
    with pytest.raises(NotAllowed):
        await cards(db).get(CHANNEL, OTHER_ACTOR, "Old Wenna")
    with pytest.raises(NotAllowed):
        await cards(db).remove(CHANNEL, OTHER_ACTOR, "Old Wenna")
    wenna = await cards(db).get(CHANNEL, HOST_ACTOR, "Old Wenna")
    with pytest.raises(NotAllowed):
        await cards(db).edit(CHANNEL, OTHER_ACTOR, wenna.id, CardDraft("Young Wenna"))
    # Anyone may look.
    assert (await cards(db).page(CHANNEL)).total == 3
    await cards(db).remove(CHANNEL, MANAGER_ACTOR, "Old Wenna")


async def test_a_card_from_another_adventure_cannot_be_edited_here(db):
    await server_adventure(db)
    await dm_adventure(db)
    theirs = await cards(db).add(DM_CHANNEL, Actor(OTHER), CardDraft("Secret"))
    with pytest.raises(NotFound):
        await cards(db).edit(CHANNEL, HOST_ACTOR, theirs.id, CardDraft("Stolen"))
    with pytest.raises(NotFound):
        await cards(db).remove(CHANNEL, HOST_ACTOR, str(theirs.id))


async def test_the_card_list_is_paged(db):
    await server_adventure(db)
    for n in range(4):
        await cards(db).add(CHANNEL, HOST_ACTOR, CardDraft(f"Extra {n}"))
    first = await cards(db).page(CHANNEL, per_page=3)
    assert (first.page, first.pages, first.total, len(first.cards)) == (1, 3, 7, 3)
    last = await cards(db).page(CHANNEL, page=99, per_page=3)
    assert (last.page, [c.title for c in last.cards]) == (3, ["Extra 3"])


async def test_autocomplete_offers_matching_titles_first(db):
    await server_adventure(db)
    await cards(db).add(CHANNEL, HOST_ACTOR, CardDraft("Milestone keeper", "mill"))
    choices = await cards(db).choices(CHANNEL, "mile")
    assert [label for label, _ in choices] == ["Milestone keeper", "The Fallen Milestone"]
    by_key = await cards(db).choices(CHANNEL, "innkeeper")
    assert [label for label, _ in by_key] == ["Old Wenna"]
    everything = await cards(db).choices(CHANNEL, "")
    assert len(everything) == 4 and all(value.isdigit() for _, value in everything)
    assert await cards(db).choices(4242, "") == []


async def test_untitled_imported_cards_are_offered_by_their_keys(db):
    adventure_id = await server_adventure(db)
    async with db.session() as session, session.begin():
        session.add(AdventureCard(adventure_id=adventure_id, title="", keys="heron, reeds"))
    choices = await cards(db).choices(CHANNEL, "heron")
    (label, value) = choices[0]
    assert label == f"(untitled #{value}) heron, reeds"
    removed = await cards(db).remove(CHANNEL, HOST_ACTOR, value)
    assert removed.keys == "heron, reeds"


# --- generation settings -------------------------------------------------------------------------


async def test_settings_fall_back_to_the_defaults(db):
    await server_adventure(db)
    settings = await settings_of(db).get(CHANNEL)
    assert (settings.context_tokens, settings.max_output_tokens, settings.temperature) == (
        None,
        None,
        None,
    )
    assert settings.effective_context_tokens == 4096
    assert settings.effective_max_output_tokens == 300
    assert settings.effective_temperature == 0.8


async def test_settings_are_set_and_reset(db):
    adventure_id = await server_adventure(db)
    settings = await settings_of(db).set(CHANNEL, HOST_ACTOR, temperature=0.3)
    assert settings.temperature == 0.3 and settings.context_tokens is None
    settings = await settings_of(db).set(
        CHANNEL, HOST_ACTOR, context_tokens=8192, max_output_tokens=1000
    )
    assert (settings.context_tokens, settings.max_output_tokens, settings.temperature) == (
        8192,
        1000,
        0.3,
    )
    stored = await load(db, adventure_id)
    assert (stored.context_tokens, stored.max_output_tokens, stored.temperature) == (
        8192,
        1000,
        0.3,
    )
    assert stored.version == 0
    settings = await settings_of(db).set(CHANNEL, HOST_ACTOR, reset=True, temperature=1.0)
    assert (settings.context_tokens, settings.max_output_tokens, settings.temperature) == (
        None,
        None,
        1.0,
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"temperature": 5}, "temperature must be between 0 and 2; got 5."),
        ({"temperature": -0.5}, "temperature must be between 0 and 2; got -0.5."),
        ({"context_tokens": 100}, "context_tokens must be between 512 and 1,000,000; got 100."),
        (
            {"context_tokens": 2_000_000},
            "context_tokens must be between 512 and 1,000,000; got 2,000,000.",
        ),
        ({"max_output_tokens": 8}, "max_output_tokens must be between 16 and 32,768; got 8."),
        (
            {"max_output_tokens": 40_000},
            "max_output_tokens must be between 16 and 32,768; got 40,000.",
        ),
        (
            {"context_tokens": 1000, "max_output_tokens": 800},
            "context_tokens (1,000) must be at least max_output_tokens (800) + 256 = 1,056, so "
            "the story has room beside the reply. Raise context_tokens or lower "
            "max_output_tokens.",
        ),
        (
            {"max_output_tokens": 4000},
            "context_tokens (4,096 (the default)) must be at least max_output_tokens (4,000) "
            "+ 256 = 4,256, so the story has room beside the reply. Raise context_tokens or "
            "lower max_output_tokens.",
        ),
    ],
)
async def test_settings_are_validated(db, options, message):
    adventure_id = await server_adventure(db)
    with pytest.raises(InvalidInput) as error:
        await settings_of(db).set(CHANNEL, HOST_ACTOR, **options)
    assert error.value.message == message
    stored = await load(db, adventure_id)
    assert (stored.context_tokens, stored.max_output_tokens, stored.temperature) == (
        None,
        None,
        None,
    )


async def test_settings_are_changed_by_the_host_and_managers_only(db):
    await server_adventure(db)
    with pytest.raises(NotAllowed):
        await settings_of(db).set(CHANNEL, OTHER_ACTOR, temperature=0.5)
    # Anyone may look.
    assert (await settings_of(db).get(CHANNEL)).temperature is None
    settings = await settings_of(db).set(CHANNEL, MANAGER_ACTOR, temperature=0.5)
    assert settings.temperature == 0.5
