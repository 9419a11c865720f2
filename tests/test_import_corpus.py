"""The compatibility corpus (``tests/data/corpus/``, sources in its ``SOURCES.md``): real
published files, each imported and checked to do what it is for: its cards fire on a story
naming them, in an adventure started from it."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from sqlmodel import col

from engine.access import Actor
from engine.cards import Card, match_cards
from engine.formats import detect
from engine.formats.draft import ImportLimits
from engine.scenarios.library import ScenarioLibrary
from engine.scenarios.start import start_adventure
from engine.storage.models import AdventureCard

CORPUS = Path(__file__).parent / "data" / "corpus"
ALICE = Actor(
    user_id=11, user_name="alice", server_id=500, server_name="Hearth", manages_server=True
)


async def _adventure_cards(db, name: str) -> tuple[str, list[Card], list[str]]:
    """The file imported into the library, an adventure started from it, and its cards."""
    library = ScenarioLibrary(db, ImportLimits())
    imported = await library.preview(ALICE, (CORPUS / name).read_bytes(), Path(name).name)
    saved = await library.save(ALICE, imported)
    async with db.session() as session, session.begin():
        adventure = await start_adventure(session, saved.scenario_id, channel_id=9)
        rows = await session.scalars(
            select(AdventureCard)
            .where(col(AdventureCard.adventure_id) == adventure.id)
            .order_by(col(AdventureCard.position))
        )
        cards = [Card.of(r.title, r.entry, r.keys, always_on=r.always_on) for r in rows]
    return imported.format, cards, imported.warnings


async def test_sillytavern_eldoria_world_info_fires_on_a_story_naming_it(db):
    kind, cards, warnings = await _adventure_cards(db, "lorebooks/sillytavern-eldoria.json")
    assert kind == detect.SILLYTAVERN and warnings == []
    assert [c.title for c in cards] == ["eldoria", "shadowfang", "glade", "power"]
    story = "A shadowfang beast circled the glade at the edge of the magical forest."
    fired = {m.card.title: m.reason for m in match_cards(cards, story)}
    assert fired == {
        "eldoria": "trigger: magical forest",
        "shadowfang": "trigger: shadowfang",
        "glade": "trigger: glade",
    }
    assert [m.card.title for m in match_cards(cards, "Her magic healed you.")] == ["power"]
    assert match_cards(cards, "The road north was quiet.") == []
