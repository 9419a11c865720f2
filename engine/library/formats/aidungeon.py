"""AI Dungeon's exports: scenarios old and new, story-card files, old world-info files.

- Old scenarios (2020–21): ``worldInfo`` entries ``{keys, entry, hidden}`` (sometimes the whole
  list as a JSON string, as the old API returned it), ``gameCode`` with ``sharedLibrary``,
  ``onInput``, ``onModelContext``, ``onOutput`` (or the 2020 names ``inputModifier``,
  ``contextModifier``, ``outputModifier``), ``memory``, ``authorsNote``, ``options``.
- New scenarios: ``storyCards`` with ``value`` as the entry, ``gameCodeSharedLibrary``,
  ``gameCodeOnInput``, ``gameCodeOnModelContext``, ``gameCodeOnOutput``,
  ``details.instructions``, ``memory``, ``authorsNote``, ``prompt``, ``options``.
- Story-card files: a list of ``{keys, value, type, title, description,
  useForCharacterCreation}``; old world-info files: a list of ``{keys, entry}``.

Scraped scenarios often come as the API's response, ``{"data": {"scenario": {…}}}``; the reader
looks inside.
"""

from __future__ import annotations

import json
from typing import Any

from engine.library.formats.draft import ImportedCard, ImportedScript, ScenarioDraft
from engine.library.formats.strict_json import loads
from engine.library.reading.errors import ImportRejected
from engine.library.reading.fields import Fields, kind_of

NEW_CODE_KEYS = (
    "gameCodeSharedLibrary",
    "gameCodeOnInput",
    "gameCodeOnModelContext",
    "gameCodeOnOutput",
)
NEW_KEYS = ("storyCards", *NEW_CODE_KEYS)
OLD_KEYS = ("worldInfo", "gameCode", "authorsNote", "quests")


def unwrap(raw: Any) -> tuple[Any, str]:
    """The scenario inside an API response (``data.scenario``), else the file itself."""
    if isinstance(raw, dict) and isinstance(raw.get("data"), dict):
        inner = raw["data"].get("scenario")
        if isinstance(inner, dict):
            return inner, "data.scenario"
    if isinstance(raw, dict) and isinstance(raw.get("scenario"), dict) and "title" not in raw:
        return raw["scenario"], "scenario"
    return raw, ""


def looks_new(raw: dict[str, Any]) -> bool:
    return any(key in raw for key in NEW_KEYS)


def looks_old(raw: dict[str, Any]) -> bool:
    return any(key in raw for key in OLD_KEYS) or (
        "prompt" in raw and "memory" in raw and "authors_note" not in raw
    )


def read_scenario(raw: Any, path: str, *, fallback_title: str) -> ScenarioDraft:
    """One scenario, old or new, with its options."""
    return _scenario(Fields(raw, path), fallback_title, depth=0)


def _scenario(f: Fields, fallback_title: str, depth: int) -> ScenarioDraft:
    draft = ScenarioDraft(
        title=f.text("title", "name", default=fallback_title),
        description=f.text("description"),
        tags=f.words("tags"),
        # Its rating when the export carries one; an "nsfw" flag reads as mature.
        content_rating=f.text("contentRating", "content_rating")
        or ("mature" if f.flag("nsfw") else ""),
        prompt=f.text("prompt"),
        plot_essentials=f.text("memory"),
        authors_note=f.text("authorsNote"),
        ai_instructions=_instructions(f),
    )
    # Some scrapers save the cards as ``cards`` beside an empty ``storyCards``.
    listed = f.items("storyCards") or f.items("cards")
    draft.cards = [card(Fields(item, p)) for p, item in listed]
    draft.cards += _world_info(f)
    draft.scripts = _scripts(f, draft.title)
    for p, item in f.items("options"):
        # Options are sub-scenarios; one only referenced by id (no body) cannot be imported.
        option = Fields(item, p)
        draft.options.append(_scenario(option, f"Option {len(draft.options) + 1}", depth + 1))
    return draft


def _instructions(f: Fields) -> str:
    """AI instructions: ``details.instructions`` as text, or an object of texts."""
    details = f.obj("details")
    if details is not None and details.has("instructions"):
        key, value = details.first("instructions")
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            texts = [v for v in value.values() if isinstance(v, str) and v.strip()]
            return "\n\n".join(texts)
        raise ImportRejected(
            f"{details.at(key)}: expected text or an object of texts, found {kind_of(value)}."
        )
    return f.text("instructions", "aiInstructions")


def card(f: Fields) -> ImportedCard:
    """A story card (``value`` is the entry) or an old world-info entry (``entry``)."""
    return ImportedCard(
        title=f.text("title", "name"),
        keys=",".join(f.words("keys")),
        entry=f.text("value", "entry"),
        type=f.text("type", default="custom"),
        description=f.text("description"),
    )


def _world_info(f: Fields) -> list[ImportedCard]:
    key, value = f.first("worldInfo")
    if value is None:
        return []
    path = f.at(key)
    if isinstance(value, str):
        # The old API returned world info as a JSON string inside the JSON.
        try:
            value = loads(value, what=path)
        except json.JSONDecodeError as error:
            raise ImportRejected(
                f"{path}: a text that should hold the world-info list is not valid JSON "
                f"({error.msg.lower()})."
            ) from None
    if not isinstance(value, list):
        raise ImportRejected(f"{path}: expected a list of entries, found {kind_of(value)}.")
    return [card(Fields(item, f"{path}[{i}]")) for i, item in enumerate(value)]


def _scripts(f: Fields, title: str) -> list[ImportedScript]:
    if f.has(*NEW_CODE_KEYS):
        script = ImportedScript(
            name=title,
            shared_library=f.text("gameCodeSharedLibrary"),
            on_input=f.text("gameCodeOnInput"),
            on_model_context=f.text("gameCodeOnModelContext"),
            on_output=f.text("gameCodeOnOutput"),
        )
        return [script]
    code = f.obj("gameCode", "scripts")
    if code is None:
        return []
    return [
        ImportedScript(
            name=title,
            shared_library=code.text("sharedLibrary"),
            on_input=code.text("onInput", "inputModifier"),
            on_model_context=code.text("onModelContext", "contextModifier"),
            on_output=code.text("onOutput", "outputModifier"),
        )
    ]


def is_scenario_list(items: list[Any]) -> bool:
    """A list of whole scenarios, as 2020–21 exporters saved a user's scenarios in one file."""
    inner = [unwrap(item)[0] for item in items]
    return all(isinstance(item, dict) for item in inner) and any(
        looks_new(item) or looks_old(item) or "prompt" in item for item in inner
    )


def read_scenario_list(items: list[Any], *, title: str) -> list[ScenarioDraft]:
    """Each scenario of the list, with its options (AI Dungeon's sub-scenarios chosen from a
    menu under the parent's prompt: help.aidungeon.com/faq/how-do-scenario-options-work)."""
    drafts = []
    for i, item in enumerate(items):
        inner, path = unwrap(item)
        where = f"[{i}].{path}" if path else f"[{i}]"
        drafts.append(read_scenario(inner, where, fallback_title=f"{title} {i + 1}"))
    return drafts


def read_card_list(items: list[Any], *, title: str) -> ScenarioDraft:
    """A story-card or world-info file: a scenario of cards only, named after the file."""
    return ScenarioDraft(
        title=title, cards=[card(Fields(item, f"[{i}]")) for i, item in enumerate(items)]
    )


def is_card_list(items: list[Any]) -> bool:
    """A list with story cards in it (objects with ``value`` or ``entry``); any other item in
    it is then refused by name, as a card that is not one."""
    return any(isinstance(item, dict) and ("value" in item or "entry" in item) for item in items)


def is_story_cards(items: list[Any]) -> bool:
    return any(isinstance(item, dict) and "value" in item for item in items)


# --- writing -------------------------------------------------------------------------------------


def story_card_file(cards: list[ImportedCard]) -> list[dict[str, Any]]:
    """Cards as AI Dungeon's story-card export, which its Import button reads back."""
    return [
        {
            "keys": c.keys,
            "value": c.entry,
            "type": c.type,
            "title": c.title,
            "description": c.description,
            "useForCharacterCreation": False,
        }
        for c in cards
    ]
