"""The scenario library on the real database: import in one transaction, export gives back an
equal scenario, visibility per server and user, who may import and delete, and starting an
imported scenario (options, placeholders)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select
from sqlmodel import col

from engine.errors import InvalidInput, NotAllowed, NotFound
from engine.library.formats.bundle import write_bundle
from engine.library.formats.detect import read_scenario
from engine.library.formats.draft import ImportLimits
from engine.library.reading.errors import ImportRejected
from engine.library.scenarios.library import ScenarioLibrary
from engine.library.scenarios.lookup import resolve_scenario
from engine.library.scenarios.shipped import BUILTIN_SCENARIOS, seed_builtin_scenarios
from engine.library.scenarios.start import start_adventure
from engine.people.access.rules import Actor
from engine.people.servers import ServerSettings
from engine.storage.models import AdventureCard, Scenario, ScenarioCard, StoryNode
from tests.fuzz_inputs import FIXTURES, json_values

DATA = Path(__file__).parent / "data"
# Alice manages the Hearth; Bob is a member there.
ALICE_HERE = Actor(
    user_id=11, user_name="alice", server_id=500, server_name="Hearth", manages_server=True
)
BOB_HERE = Actor(user_id=12, user_name="bob", server_id=500, server_name="Hearth")
ALICE_ELSEWHERE = Actor(user_id=11, user_name="alice", server_id=600, server_name="Other")
ALICE_DM = Actor(user_id=11, user_name="alice")


@pytest.fixture
def library(db) -> ScenarioLibrary:
    return ScenarioLibrary(db, ImportLimits())


async def import_file(library, actor, name):
    data = (DATA / name).read_bytes()
    imported = await library.preview(actor, data, name)
    return await library.save(actor, imported)


async def scenario_count(db) -> int:
    async with db.session() as session:
        return await session.scalar(select(func.count()).select_from(Scenario))


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.json")))
async def test_each_fixture_imports_and_exports_equal(db, library, name):
    saved = await import_file(library, ALICE_HERE, name)
    exported = await library.export(ALICE_HERE, str(saved.scenario_id))
    bundle = json.loads(exported.files[0].content)
    expected = write_bundle(read_scenario((DATA / name).read_bytes(), name, ImportLimits()).draft)
    assert bundle == expected
    # And the exported bundle imports again to the same scenario.
    again = await library.save(
        ALICE_HERE, await library.preview(ALICE_HERE, exported.files[0].content, "again.json")
    )
    second = json.loads((await library.export(ALICE_HERE, str(again.scenario_id))).files[0].content)
    # The same library already holds that title, so the second copy is numbered.
    assert second == expected | {"title": f"{expected['title']} (2)"}


async def test_export_also_gives_an_ai_dungeon_story_card_file(library):
    saved = await import_file(library, ALICE_HERE, "aid-story-cards.json")
    exported = await library.export(ALICE_HERE, str(saved.scenario_id))
    names = [f.filename for f in exported.files]
    assert names == ["aid-story-cards.campfire.json", "aid-story-cards.story-cards.json"]
    cards = json.loads(exported.files[1].content)
    assert cards[0] == {
        "keys": "Elena, princess",
        "value": "Elena is the crown princess of Valtara.",
        "type": "character",
        "title": "Elena",
        "description": "",
        "useForCharacterCreation": False,
    }
    # AI Dungeon's own story-card file reads back as the same cards.
    again = read_scenario(exported.files[1].content, "cards.json", ImportLimits())
    assert [(c.title, c.entry) for c in again.draft.cards] == [
        ("Elena", "Elena is the crown princess of Valtara."),
        ("Valtara", "A kingdom of canals."),
        ("Elena (2)", "Her sword is named Dawn."),
    ]


async def test_the_shipped_scenario_exports_as_its_own_file(library):
    exported = await library.export(ALICE_DM, "The Lantern Road")
    bundle = json.loads(exported.files[0].content)
    shipped = json.loads((BUILTIN_SCENARIOS / "lantern-road.json").read_text())
    for name in ("title", "icon", "prompt", "plot_essentials", "authors_note", "ai_instructions"):
        assert bundle[name] == shipped[name]
    assert [c["title"] for c in bundle["story_cards"]] == [
        c["title"] for c in shipped["story_cards"]
    ]


async def test_options_are_children_not_listed_on_their_own(db, library):
    saved = await import_file(library, ALICE_HERE, "aid-new-scenario.json")
    listing = await library.listing(ALICE_HERE)
    titles = [e.title for e in listing.server]
    assert titles == ["The Clockwork City"]
    assert listing.server[0].options == 2 and listing.server[0].cards == 2
    with pytest.raises(NotFound):
        async with db.session() as session:
            await resolve_scenario(session, "Tinkerer", server_id=500, user_id=11)
    details = await library.show(ALICE_HERE, str(saved.scenario_id))
    assert details.options == ["Tinkerer", "Guard"]


async def test_scenarios_of_one_server_are_not_visible_in_another(library):
    await import_file(library, ALICE_HERE, "aid-old-scenario.json")
    await import_file(library, ALICE_DM, "aid-world-info.json")
    here = await library.listing(ALICE_HERE)
    elsewhere = await library.listing(ALICE_ELSEWHERE)
    assert [e.title for e in here.server] == ["Lost in the Mines"]
    assert elsewhere.server == []
    # The user's own library goes with them.
    assert [e.title for e in here.own] == [e.title for e in elsewhere.own] == ["aid-world-info"]
    assert {e.title for e in here.shipped} >= {"The Lantern Road"}
    with pytest.raises(NotFound):
        await library.show(ALICE_ELSEWHERE, "Lost in the Mines")
    # Bob sees the server's scenario, not Alice's own.
    bob = await library.listing(BOB_HERE)
    assert [e.title for e in bob.server] == ["Lost in the Mines"] and bob.own == []


async def test_who_may_import(db, library):
    data = (DATA / "aid-world-info.json").read_bytes()
    with pytest.raises(NotAllowed) as refused:
        await library.preview(BOB_HERE, data, "wi.json")
    assert "Manage Server" in refused.value.message
    # In a DM anyone imports into their own library.
    await library.preview(Actor(user_id=12, user_name="bob"), data, "wi.json")
    # A role named by a manager opens the door.
    await ServerSettings(db).set_importer_role(ALICE_HERE, 777)
    with pytest.raises(NotAllowed) as refused:
        await library.preview(replace(BOB_HERE, role_ids=frozenset({1})), data, "wi.json")
    assert "<@&777>" in refused.value.message
    storyteller = replace(BOB_HERE, role_ids=frozenset({777}))
    saved = await library.save(storyteller, await library.preview(storyteller, data, "wi.json"))
    assert saved.where == "this server's library"
    with pytest.raises(NotAllowed):
        await ServerSettings(db).set_importer_role(BOB_HERE, 1)


async def test_delete_rules(db, library):
    saved = await import_file(library, ALICE_HERE, "aid-new-scenario.json")
    async with db.session() as session, session.begin():
        adventure = await start_adventure(session, saved.scenario_id, server_id=None, host_id=None)
        adventure_id = adventure.id
    with pytest.raises(NotAllowed):
        await library.delete(BOB_HERE, "The Clockwork City")
    with pytest.raises(NotAllowed) as shipped:
        await library.delete(ALICE_HERE, "The Lantern Road")
    assert "ships with Campfire" in shipped.value.message
    before = await scenario_count(db)
    assert await library.delete(ALICE_HERE, "The Clockwork City") == "The Clockwork City"
    assert await scenario_count(db) == before - 3  # with its two options
    async with db.session() as session:
        assert (
            await session.scalar(
                select(func.count())
                .select_from(ScenarioCard)
                .where(ScenarioCard.scenario_id == saved.scenario_id)
            )
            == 0
        )
        # The adventure keeps its own copy.
        cards = await session.scalar(
            select(func.count())
            .select_from(AdventureCard)
            .where(AdventureCard.adventure_id == adventure_id)
        )
        assert cards == 2
    # A user deletes their own scenario anywhere, without managing anything.
    own = await import_file(library, ALICE_DM, "aid-world-info.json")
    alice_member = replace(ALICE_HERE, manages_server=False)
    assert await library.delete(alice_member, str(own.scenario_id)) == "aid-world-info"


async def test_a_repeated_import_gets_a_numbered_title(library):
    first = await import_file(library, ALICE_HERE, "aid-old-scenario.json")
    second = await import_file(library, ALICE_HERE, "aid-old-scenario.json")
    assert (first.title, second.title) == ("Lost in the Mines", "Lost in the Mines (2)")


async def test_a_rejected_file_writes_nothing(db, library):
    before = await scenario_count(db)
    raw = json.loads((DATA / "aid-new-scenario.json").read_text())
    raw["options"][1]["storyCards"] = [{"keys": "k", "value": "x" * 5000, "title": "Huge"}]
    with pytest.raises(ImportRejected) as rejected:
        await library.preview(ALICE_HERE, json.dumps(raw).encode(), "x.json")
    assert "Option “Guard”: story card 1 (“Huge”): its entry" in rejected.value.message
    assert await scenario_count(db) == before


async def test_a_save_that_fails_midway_leaves_nothing(db, library):
    imported = await library.preview(
        ALICE_HERE, (DATA / "aid-new-scenario.json").read_bytes(), "x.json"
    )
    # A value the database refuses in the last option (written after the scenario, its cards
    # and the first option): the whole import rolls back.
    imported.draft.options[-1].title = None  # type: ignore[assignment]
    before = await scenario_count(db)
    with pytest.raises(Exception):  # noqa: B017 - any database error
        await library.save(ALICE_HERE, imported)
    assert await scenario_count(db) == before


async def test_start_fills_placeholders_everywhere(db, library):
    saved = await import_file(library, ALICE_HERE, "aid-new-scenario.json")
    async with db.session() as session:
        tinkerer = await session.scalar(
            select(Scenario).where(
                Scenario.parent_id == saved.scenario_id, Scenario.title == "Tinkerer"
            )
        )
    async with db.session() as session, session.begin():
        adventure = await start_adventure(
            session,
            tinkerer.id,
            answers={"character.name": "Ada", "Who is your oldest friend?": "Bo"},
        )
        opening = await session.get(StoryNode, adventure.head_node_id)
    assert adventure.prompt.startswith("You are Ada, a tinkerer.")
    assert "Your friend Bo knocks." in opening.text


async def test_preview_refuses_bad_input_as_invalid_input(library):
    with pytest.raises(InvalidInput):
        await library.preview(ALICE_HERE, b"not json", "x.json")
    with pytest.raises(InvalidInput):
        library.check_size(10 * 1024 * 1024)


async def test_mutated_files_that_pass_the_checks_also_save_and_export(db, library):
    """No database or export error hides behind a file the checks accepted."""
    accepted = []

    @settings(max_examples=80, deadline=None, database=None)
    @given(st.sampled_from(FIXTURES), json_values, st.data())
    def collect(fixture, value, data):
        raw = json.loads(fixture)
        target = raw
        if isinstance(target, list):
            target = target[data.draw(st.integers(0, len(target) - 1))]
        key = data.draw(st.sampled_from(sorted(target)))
        if isinstance(target[key], list) and target[key] and isinstance(target[key][0], dict):
            target = target[key][0]
            key = data.draw(st.sampled_from(sorted(target)))
        target[key] = value
        try:
            accepted.append(read_scenario(json.dumps(raw).encode(), "m.json", ImportLimits()))
        except ImportRejected:
            pass

    collect()
    assert accepted
    for imported in accepted[:30]:
        saved = await library.save(ALICE_HERE, imported)
        exported = await library.export(ALICE_HERE, str(saved.scenario_id))
        read_scenario(exported.files[0].content, "again.json", ImportLimits())


async def test_start_up_rewrites_a_shipped_scenario_only_when_its_file_changed(db, tmp_path):
    """Every process start seeds the shipped scenarios: one already seeded from the same file
    is left as it is (its cards keep their rows), a changed file is seeded again."""
    shipped = json.loads((BUILTIN_SCENARIOS / "lantern-road.json").read_text())
    folder = tmp_path / "shipped"
    folder.mkdir()
    (folder / "lantern-road.json").write_text(json.dumps(shipped))

    async def seeded() -> tuple[Scenario, list[int]]:
        async with db.transaction() as session:
            await seed_builtin_scenarios(session, folder)
        async with db.session() as session:
            scenario = await session.scalar(
                select(Scenario).where(
                    col(Scenario.builtin_key) == shipped.get("key", "lantern-road")
                )
            )
            assert scenario is not None
            cards = list(
                await session.scalars(
                    select(col(ScenarioCard.id)).where(col(ScenarioCard.scenario_id) == scenario.id)
                )
            )
            return scenario, cards

    first, cards = await seeded()  # the template seeded it from the same file: untouched
    again, cards_again = await seeded()
    assert again.updated_at == first.updated_at and cards_again == cards and cards

    shipped["description"] = "A changed description."
    (folder / "lantern-road.json").write_text(json.dumps(shipped))
    changed, cards_changed = await seeded()
    assert changed.description == "A changed description."
    assert changed.id == first.id and changed.updated_at > first.updated_at
    assert set(cards_changed).isdisjoint(cards)  # its parts written afresh
