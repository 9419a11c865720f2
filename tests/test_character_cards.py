"""Character cards as scenarios on the real database: V1, V2 and V3, JSON or PNG, read as the
specs write them (github.com/malfoyslastname/character-card-spec-v2, spec_v2.md;
github.com/kwaroran/character-card-spec-v3, SPEC_V3.md), their greetings the openings /start
offers, their books' entries firing, ``{{char}}`` and ``{{user}}`` replaced, and a scenario
exported as a card and read back the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select
from sqlmodel import col

from engine.errors import InvalidInput
from engine.library.formats import character_card
from engine.library.formats.detect import read_scenario
from engine.library.formats.draft import MAX_OPTIONS, ImportLimits
from engine.library.formats.macros import fill_user
from engine.library.reading.errors import ImportRejected
from engine.library.scenarios.library import ScenarioLibrary, load_draft
from engine.library.scenarios.start import (
    openings_offered,
    scenario_questions_of,
    start_adventure,
)
from engine.people.access.rules import Actor
from engine.prompt.card_scan import match_cards
from engine.prompt.cards import load_context_cards
from engine.storage.models import Scenario
from engine.storage.party_models import Character
from engine.storage.play_models import ScenarioOpening
from tests.card_files import card_png, card_text, image, itxt_chunk, text_chunk, ztxt_chunk

CARDS = Path(__file__).parent / "data" / "cards"
ALICE_HERE = Actor(
    user_id=11, user_name="alice", server_id=500, server_name="Hearth", manages_server=True
)


def card(name: str) -> dict:
    return json.loads((CARDS / name).read_text())


def read(data: bytes, name: str = "card.json", limits: ImportLimits | None = None):
    return read_scenario(data, name, limits or ImportLimits())


@pytest.fixture
def library(db) -> ScenarioLibrary:
    return ScenarioLibrary(db, ImportLimits())


async def saved_scenario(library, actor, data: bytes, name: str) -> int:
    imported = await library.preview(actor, data, name)
    return (await library.save(actor, imported)).scenario_id


# --- reading each version ---------------------------------------------------------------------


def test_a_v1_card_names_its_character_and_keeps_the_user_for_start():
    imported = read((CARDS / "wren-v1.json").read_bytes())
    draft = imported.draft
    assert imported.format == character_card.V1
    assert draft.title == "Wren Ashdown"
    # <BOT> and {{char}} are the character; <USER> is stored as {{user}}.
    assert draft.cards[0].entry.startswith("Wren Ashdown is a ferryman")
    assert draft.cards[0].entry.endswith(
        "Wren Ashdown's personality: Patient, wry, superstitious about the water."
    )
    assert draft.cards[0].always_on and draft.cards[0].type == "character"
    assert draft.plot_essentials.startswith("{{user}} needs to cross the Grey Mere")
    assert draft.prompt.endswith('"{{user}}\'s fare is a story, not a coin."')
    assert any("example dialogue" in w for w in imported.warnings)


def test_a_v2_card_maps_every_field():
    imported = read((CARDS / "sola-v2.json").read_bytes())
    draft = imported.draft
    assert imported.format == character_card.V2
    assert draft.title == "Orsolya Venn"
    assert draft.description == "A quiet gaslamp mystery. Best played slowly."
    assert draft.tags == ["mystery", "gaslamp", "slow burn"]
    assert draft.authors_note == "Keep the gaslight and the fog in every scene."
    assert draft.prompt.startswith("*Orsolya Venn lowers her pole")
    assert [o.text[:20] for o in draft.openings] == ["*Rain on the cobbles", "*The ledger lies ope"]
    assert [(c.title, c.keys, c.always_on) for c in draft.cards] == [
        ("Orsolya Venn", "Orsolya Venn", True),
        ("The ledger", "ledger", False),
        ("Lamp house", "lamp house,lamphouse", False),
        ("Fog", "fog", True),
    ]
    assert draft.cards[1].entry.startswith("Orsolya Venn's ledger")
    left_out = next(w for w in imported.warnings if w.startswith("Left out"))
    assert "system prompt" in left_out and "post-history instructions" in left_out
    assert "1 disabled entry was left out." in imported.warnings
    assert any(w.startswith("{{user}} is the player") for w in imported.warnings)


def test_a_v3_card_uses_its_nickname_english_notes_and_group_greetings():
    imported = read((CARDS / "sola-v3.json").read_bytes())
    draft = imported.draft
    assert imported.format == character_card.V3
    assert draft.title == "Orsolya Venn"
    assert draft.prompt == '"Third lamp tonight," says Sola.'
    assert draft.description == "A quiet gaslamp mystery."
    assert draft.cards[0].keys == "Orsolya Venn,Sola"
    assert (
        draft.cards[1].entry
        == "Sola's ledger lists everyone who walked under a lamp after midnight."
    )
    assert [(o.text, o.group_only) for o in draft.openings] == [
        ("*Sola hands {{user}} a lit taper.*", False),
        ("*Three strangers wait under the fourth lamp; Sola counts them twice.*", True),
    ]


def test_a_long_description_becomes_several_always_on_cards():
    raw = card("sola-v2.json")
    raw["data"]["description"] = "\n\n".join(f"Paragraph {n}. " + "word " * 150 for n in range(12))
    draft = read(json.dumps(raw).encode()).draft
    own = [c for c in draft.cards if c.type == "character"]
    assert [c.title for c in own] == ["Orsolya Venn", "Orsolya Venn (2)", "Orsolya Venn (3)"]
    assert all(c.always_on and len(c.entry) <= 4000 for c in own)
    assert own[1].entry.startswith("Paragraph")


def test_more_greetings_than_a_menu_holds_keep_the_first():
    raw = card("sola-v2.json")
    raw["data"]["alternate_greetings"] = [f"Greeting {n}." for n in range(40)]
    imported = read(json.dumps(raw).encode())
    assert len(imported.draft.openings) == MAX_OPTIONS - 1
    assert imported.draft.openings[-1].text == f"Greeting {MAX_OPTIONS - 2}."
    assert any("41 openings" in w and "16 are left out" in w for w in imported.warnings)


# --- PNG containers ---------------------------------------------------------------------------


def test_a_png_card_is_read_from_its_chara_chunk():
    imported = read(card_png(card("sola-v2.json")), "sola.png")
    assert imported.format == character_card.V2
    assert imported.draft.title == "Orsolya Venn"
    assert len(imported.draft.openings) == 2


def test_a_png_with_both_chunks_is_read_from_ccv3():
    v2, v3 = card("wren-v1.json"), card("sola-v3.json")
    data = image(text_chunk(b"chara", card_text(v2)), text_chunk(b"ccv3", card_text(v3)))
    imported = read(data, "both.png")
    assert imported.format == character_card.V3 and imported.draft.prompt.endswith("says Sola.")


def test_only_the_first_card_chunk_is_read():
    first = text_chunk(b"chara", card_text(card("sola-v2.json")))
    # Later chunks of the same keyword are stepped over, even ones that would be refused.
    later = [ztxt_chunk(b"chara", b"A" * (20 * 1024 * 1024))] * 50
    imported = read(image(first, *later), "many.png", ImportLimits(max_bytes=64 * 1024))
    assert imported.draft.title == "Orsolya Venn"


@pytest.mark.parametrize(
    "make",
    [
        lambda text: ztxt_chunk(b"chara", text),
        lambda text: itxt_chunk(b"chara", text, compressed=True),
        lambda text: itxt_chunk(b"chara", text, compressed=False),
    ],
    ids=["zTXt", "iTXt compressed", "iTXt"],
)
def test_compressed_and_international_text_chunks_are_read(make):
    imported = read(image(make(card_text(card("sola-v2.json")))), "z.png")
    assert imported.draft.title == "Orsolya Venn"


def _refusal(data: bytes, limits: ImportLimits | None = None) -> str:
    with pytest.raises(ImportRejected) as caught:
        read(data, "hostile.png", limits)
    return str(caught.value)


def test_hostile_pngs_are_refused_clearly():
    small = ImportLimits(max_bytes=64 * 1024)
    # A text chunk far past what a card may hold.
    huge = image(text_chunk(b"chara", b"A" * (200 * 1024)))
    assert "a card may have at most 64 KiB" in _refusal(huge, small)
    # A zTXt bomb: 20 KiB of zlib, within the cap, that would inflate to 20 MiB.
    bomb = image(ztxt_chunk(b"chara", b"A" * (20 * 1024 * 1024)))
    assert len(bomb) < 32 * 1024
    assert "inflates to more than" in _refusal(bomb, small)
    # Cut short inside the card's chunk, and with no end.
    whole = card_png(card("sola-v2.json"))
    assert "cut short" in _refusal(whole[: len(whole) // 2])
    assert "cut short" in _refusal(
        image(text_chunk(b"chara", card_text(card("sola-v2.json"))), end=False)
    )
    # A damaged checksum, text that is not base64, JSON that is not a card, no card at all.
    damaged = bytearray(whole)
    damaged[-20] ^= 0xFF
    assert "checksum" in _refusal(bytes(damaged))
    assert "not base64" in _refusal(image(text_chunk(b"chara", b"not base64 at all!")))
    assert "not a character card" in _refusal(image(text_chunk(b"chara", card_text({"a": 1}))))
    assert "holds no character card" in _refusal(image(text_chunk(b"Comment", b"hello")))
    # More chunks than any image, and a file over the image cap.
    many = image(*[text_chunk(b"Comment", b"x")] * 5000)
    assert "more than 4,096 chunks" in _refusal(many)
    assert "largest accepted" in _refusal(whole, ImportLimits(max_image_bytes=1024))


@settings(max_examples=200, deadline=None)
@given(
    cut=st.integers(min_value=0, max_value=2000), flips=st.lists(st.integers(0, 2000), max_size=4)
)
def test_a_damaged_card_png_is_read_or_refused_never_crashes(cut, flips):
    data = bytearray(card_png(card("wren-v1.json")))
    for at in flips:
        data[at % len(data)] ^= 0x5A
    damaged = bytes(data[: len(data) - cut % len(data)])
    try:
        imported = read(damaged, "damaged.png")
    except ImportRejected as refused:
        assert str(refused)
    else:
        assert imported.draft.title


# --- stored, started, exported ----------------------------------------------------------------


async def test_openings_are_stored_and_offered_by_place(db, library):
    scenario_id = await saved_scenario(
        library, ALICE_HERE, (CARDS / "sola-v3.json").read_bytes(), "sola.json"
    )
    async with db.session() as session:
        scenario = await session.get(Scenario, scenario_id)
        assert scenario is not None
        alone = await openings_offered(session, scenario, group=False)
        together = await openings_offered(session, scenario, group=True)
        assert [p for p, _ in alone] == [0, 1]
        assert [p for p, _ in together] == [0, 1, 2]
        # A button's label: the first words, without the roleplay's emphasis marks.
        assert together[1][1] == "Sola hands you a lit taper."
        assert await scenario_questions_of(session, scenario, group=False) == []
        assert await scenario_questions_of(session, scenario, group=True) == ["character.name"]


async def test_start_with_an_opening_fills_the_user_by_place(db, library):
    scenario_id = await saved_scenario(
        library, ALICE_HERE, (CARDS / "sola-v2.json").read_bytes(), "sola.json"
    )
    async with db.transaction() as session:
        in_dm = await start_adventure(session, scenario_id, host_id=11, opening=1)
        assert in_dm.prompt.endswith('"Hold this, you."')
        assert in_dm.plot_essentials.startswith(
            "The lamps of Harrow Street are going out one by one, and you are the only one"
        )
        in_server = await start_adventure(
            session,
            scenario_id,
            server_id=500,
            host_id=11,
            opening=2,
            answers={"character.name": "Ada"},
        )
        assert in_server.prompt.startswith("*The ledger lies open")
        assert "Ada is written on tonight's page" in in_server.prompt
        # The host plays the card's {{user}}: their character has the name they gave.
        host = await session.scalar(
            select(Character).where(col(Character.adventure_id) == in_server.id)
        )
        assert host is not None and (host.user_id, host.name) == (11, "Ada")
        first = await start_adventure(session, scenario_id, host_id=11)
        assert first.prompt.startswith("*Orsolya Venn lowers her pole")
        with pytest.raises(InvalidInput):
            await start_adventure(session, scenario_id, host_id=11, opening=9)


async def test_a_group_only_opening_is_refused_in_a_dm(db, library):
    scenario_id = await saved_scenario(
        library, ALICE_HERE, (CARDS / "sola-v3.json").read_bytes(), "sola.json"
    )
    async with db.transaction() as session:
        with pytest.raises(InvalidInput):
            await start_adventure(session, scenario_id, host_id=11, opening=2)
        started = await start_adventure(session, scenario_id, server_id=500, host_id=11, opening=2)
        assert started.prompt.startswith("*Three strangers")


async def test_the_book_entries_fire_as_their_keys_say(db, library):
    scenario_id = await saved_scenario(
        library, ALICE_HERE, (CARDS / "sola-v2.json").read_bytes(), "sola.json"
    )
    async with db.transaction() as session:
        adventure = await start_adventure(session, scenario_id, server_id=500, host_id=11)
        assert adventure.id is not None
        cards = await load_context_cards(session, adventure.id)
    fired = {m.card.title: m.reason for m in match_cards(cards, "> Ada opens the ledger.")}
    assert fired == {
        "Orsolya Venn": "always on",
        "The ledger": "trigger: ledger",
        "Fog": "always on",
    }
    assert "Lamp house" in {m.card.title for m in match_cards(cards, "They walk to the lamphouse.")}


@pytest.mark.parametrize("version", [character_card.V2, character_card.V3])
async def test_export_as_a_card_reads_back_the_same(db, library, version):
    name = "sola-v3.json" if version == character_card.V3 else "sola-v2.json"
    scenario_id = await saved_scenario(library, ALICE_HERE, (CARDS / name).read_bytes(), name)
    exported = await library.export(ALICE_HERE, str(scenario_id), version)
    [file] = exported.files
    raw = json.loads(file.content)
    assert raw["spec"] == ("chara_card_v3" if version == character_card.V3 else "chara_card_v2")
    again = read(file.content, file.filename).draft
    async with db.session() as session:
        scenario = await session.get(Scenario, scenario_id)
        assert scenario is not None
        first = await load_draft(session, scenario)
    assert again.prompt == first.prompt and again.plot_essentials == first.plot_essentials
    assert again.description == first.description and again.tags == first.tags
    assert [(c.title, c.keys, c.entry, c.always_on, c.type) for c in again.cards] == [
        (c.title, c.keys, c.entry, c.always_on, c.type) for c in first.cards
    ]
    assert [(o.text, o.group_only) for o in again.openings] == [
        (o.text, o.group_only) for o in first.openings
    ]
    assert again.authors_note == first.authors_note


async def test_the_campfire_bundle_keeps_the_openings(db, library):
    scenario_id = await saved_scenario(
        library, ALICE_HERE, (CARDS / "sola-v3.json").read_bytes(), "sola.json"
    )
    exported = await library.export(ALICE_HERE, str(scenario_id))
    bundle = json.loads(exported.files[0].content)
    assert bundle["openings"][1] == {
        "text": "*Three strangers wait under the fourth lamp; Sola counts them twice.*",
        "group_only": True,
    }
    again = await saved_scenario(library, ALICE_HERE, exported.files[0].content, "b.json")
    async with db.session() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(ScenarioOpening)
            .where(col(ScenarioOpening.scenario_id) == again)
        )
    assert count == 2


# --- {{user}} as "you" ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{user}} is late.", "You are late."),
        ("She smiles at {{user}}.", "She smiles at you."),
        ("It is {{user}}'s turn. {{user}} was here.", "It is your turn. You were here."),
        ('*Rain.* "{{user}} has it."', '*Rain.* "You have it."'),
    ],
)
def test_the_user_is_you_in_a_dm(text, expected):
    assert fill_user(text, None) == expected
