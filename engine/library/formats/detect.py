"""Which format a file is, from its content (never its name), and reading it as a scenario."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from engine.library.formats import aidungeon, bundle, character_card, kobold, lorebooks
from engine.library.formats.character_card_png import card_json_from_png, is_png
from engine.library.formats.draft import ImportedScenario, ImportLimits, ScenarioDraft, finish
from engine.library.formats.key_syntax import convert_card_keys
from engine.library.formats.strict_json import JsonCaps, load_json
from engine.library.reading.errors import ImportRejected

AID_NEW = "AI Dungeon scenario"
AID_OLD = "AI Dungeon scenario (2020–21 format)"
AID_OLD_LIST = "AI Dungeon scenarios (2020–21 export of several)"
AID_CARDS = "AI Dungeon story cards"
AID_WORLD_INFO = "AI Dungeon world info"
AIDND = "AI-DnD scenario"
BUNDLE = "Campfire scenario bundle"
SILLYTAVERN = "SillyTavern world info"
NOVELAI = "NovelAI lorebook"
CHARACTER_BOOK = "character book (Character Card V2 lorebook)"
KOBOLD_STORY = "KoboldAI story"
KOBOLD_WORLD_INFO = "KoboldAI Lite world info"

SUPPORTED = (
    "AI Dungeon scenarios and story-card exports, AI-DnD scenarios, SillyTavern world info, "
    "NovelAI lorebooks, KoboldAI stories and world info, character cards (V1, V2 and V3, JSON "
    "or PNG) and Campfire scenario bundles"
)


def title_from(filename: str) -> str:
    stem = PurePath(filename or "").stem.replace("_", " ").strip()
    return stem[:100] or "Imported scenario"


#: The formats that hold story cards and nothing else a scenario has (``/card import``); a
#: character card is a character and its lorebook: cards (its greetings and scenario text are
#: a scenario's, left out).
CARD_FORMATS = frozenset(
    {
        AID_CARDS,
        AID_WORLD_INFO,
        SILLYTAVERN,
        NOVELAI,
        KOBOLD_WORLD_INFO,
        *character_card.VERSIONS,
        CHARACTER_BOOK,
    }
)


def read_scenario(data: bytes, filename: str, limits: ImportLimits) -> ImportedScenario:
    """Parse, detect and check an uploaded scenario; raises ``ImportRejected`` for any problem."""
    return _finished(_detected(_loaded(data, limits), filename), limits)


def read_cards(data: bytes, filename: str, limits: ImportLimits) -> ImportedScenario:
    """Parse, detect and check an uploaded story-card file (``CARD_FORMATS``): a scenario of
    cards only. A whole adventure or scenario is refused with the command that reads it."""
    raw = _loaded(data, limits)
    if isinstance(raw, dict) and raw.get(bundle.MARKER) == "adventure":
        raise ImportRejected(
            "This file is a whole adventure, not story cards: `/adventure import` restores it "
            "as an adventure of its own."
        )
    imported = _detected(raw, filename)
    if imported.format not in CARD_FORMATS:
        raise ImportRejected(
            f"This file is a whole scenario ({imported.format}), not story cards: "
            "`/scenario import` brings it into the library, and `/start` plays it. "
            f"`/card import` reads story cards: {CARD_SUPPORTED}."
        )
    return _finished(imported, limits, where="The file")


CARD_SUPPORTED = (
    "AI Dungeon story-card and world-info exports, SillyTavern world info, NovelAI lorebooks, "
    "KoboldAI Lite world info and character cards (V1, V2 and V3, JSON or PNG)"
)


def _loaded(data: bytes, limits: ImportLimits) -> Any:
    """The file's JSON: the file itself, or a card PNG's text chunk, within the same caps."""
    if not is_png(data):
        return load_json(data, JsonCaps(max_bytes=limits.max_bytes))
    if len(data) > limits.max_image_bytes:
        raise ImportRejected(
            f"The image is {len(data) / 1024:,.0f} KiB; the largest accepted is "
            f"{limits.max_image_bytes / 1024:,.0f} KiB."
        )
    data = card_json_from_png(data, max_json_bytes=limits.max_bytes)
    raw = load_json(data, JsonCaps(max_bytes=limits.max_bytes))
    if not isinstance(raw, dict) or character_card.card_version(raw) is None:
        raise ImportRejected("The PNG's card chunk holds JSON that is not a character card.")
    return raw


def _detected(raw: Any, filename: str) -> ImportedScenario:
    name = title_from(filename)
    warnings: list[str] = []
    if isinstance(raw, list) and raw and aidungeon.is_scenario_list(raw):
        first, *more = aidungeon.read_scenario_list(raw, title=name)
        return ImportedScenario(AID_OLD_LIST, first, warnings, more)
    kind, draft = _read(raw, name, warnings)
    return ImportedScenario(kind, draft, warnings)


def _finished(
    imported: ImportedScenario, limits: ImportLimits, *, where: str = "The scenario"
) -> ImportedScenario:
    if imported.format != BUNDLE:
        # Campfire's own bundles hold Campfire's keys; every other format's keys are read in
        # the syntax of the tool that wrote them.
        for draft in imported.walk():
            convert_card_keys(draft.cards, imported.warnings)
    return finish(imported, limits, where=where)


def _read(raw: Any, name: str, warnings: list[str]) -> tuple[str, ScenarioDraft]:
    if isinstance(raw, list):
        if not raw:
            raise ImportRejected("The file is an empty list: there is nothing to import.")
        if aidungeon.is_card_list(raw):
            kind = AID_CARDS if aidungeon.is_story_cards(raw) else AID_WORLD_INFO
            return kind, aidungeon.read_card_list(raw, title=name)
        if kobold.is_world_info(raw):
            return KOBOLD_WORLD_INFO, kobold.read_world_info(raw, title=name, warnings=warnings)
        raise ImportRejected(
            "The file is a list, but not of story cards (each needs keys and a value or an "
            f"entry) nor of scenarios (each with a prompt). Campfire reads {SUPPORTED}."
        )
    assert isinstance(raw, dict)
    if bundle.is_bundle(raw):
        version = raw.get("version", 1)
        if not isinstance(version, int) or version > bundle.VERSION:
            raise ImportRejected(
                f"This Campfire bundle is version {version}; this Campfire reads version "
                f"{bundle.VERSION}. Update Campfire to import it."
            )
        return BUNDLE, bundle.read_bundle(raw, fallback_title=name)
    if raw.get(bundle.MARKER) == "adventure":
        raise ImportRejected("This is an adventure export: use /adventure import for it.")
    version = character_card.card_version(raw)
    if version is not None:
        return version, character_card.read_card(raw, version, title=name, warnings=warnings)
    if lorebooks.is_novelai(raw):
        return NOVELAI, lorebooks.read_novelai(raw, title=name, warnings=warnings)
    if lorebooks.is_sillytavern(raw):
        return SILLYTAVERN, lorebooks.read_sillytavern(raw, title=name, warnings=warnings)
    if lorebooks.is_character_book(raw):
        return CHARACTER_BOOK, lorebooks.read_character_book(raw, title=name, warnings=warnings)
    if kobold.is_story(raw):
        # Before AI Dungeon's: a story's prompt and memory would read as a 2020-21 scenario.
        return KOBOLD_STORY, kobold.read_story(raw, title=name, warnings=warnings)
    inner, path = aidungeon.unwrap(raw)
    if isinstance(inner, dict):
        if aidungeon.looks_new(inner):
            return AID_NEW, aidungeon.read_scenario(inner, path, fallback_title=name)
        if bundle.looks_flat(inner):
            return AIDND, bundle.read_bundle(inner, path, fallback_title=name)
        if aidungeon.looks_old(inner):
            return AID_OLD, aidungeon.read_scenario(inner, path, fallback_title=name)
        if "prompt" in inner and ("title" in inner or "options" in inner):
            return AID_OLD, aidungeon.read_scenario(inner, path, fallback_title=name)
    raise ImportRejected(f"Campfire does not recognise this file's format. It reads {SUPPORTED}.")
