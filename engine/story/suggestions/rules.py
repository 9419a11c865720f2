"""Suggested actions, what counts as one: 3–4 short things a player might do next, offered as
buttons under the newest turn (issue 22, Deliver 3).

The model lists them in its held-back block, under the reserved key ``"suggestions"``
(``engine.story.world.parser.RESERVED_LISTS``); they never reach the state. The engine keeps
only those that fit a button and read as an action in the story: at most ``MAX_SUGGESTIONS``,
each at most ``MAX_LABEL`` characters (a Discord button label holds 80, discord-api-docs,
Message Components, Button), distinct, with nothing out of the world (talk about the game, the
model, buttons, commands, markup). They are stored with the turn's take
(``TurnSuggestions``), so a restart still shows them and a press after it still plays them.

A scenario switches them off with its bundle option ``"suggestions": false``; a server with
``/server suggestions``. Off, the model is not asked for them and none are shown.
"""

from __future__ import annotations

import re
from typing import Any

from engine.platform.sanitise import sanitise
from engine.prompt.held_block import BlockPart

#: The block's key that lists them.
KEY = "suggestions"
#: How many are kept from one narration (the model is asked for 3 or 4).
MAX_SUGGESTIONS = 4
#: A Discord button label's limit (discord-api-docs, Message Components, Button: 80).
MAX_LABEL = 80
#: Shorter than this is no action ("Go" is one, "?" is not).
MIN_LABEL = 2

#: What the held-back block carries for suggested actions (``engine.prompt.held_block``), when
#: they are on for the adventure and the model writes them (``engine.story.suggestions.fit``).
SUGGESTIONS_PART = BlockPart(
    key=KEY,
    title="Suggested actions",
    rule=(
        f'"{KEY}": 3 or 4 short actions the players might take next, each under 60 '
        "characters, in the imperative and in the story's world; the engine shows them as "
        "buttons."
    ),
    example={KEY: ["Open the iron door", "Ask the keeper about the light", "Search the beach"]},
)

#: Words that are about the game, not in it: a suggestion carrying one is left out.
_META = re.compile(
    r"\b(?:ai|a\.i\.|language model|llm|narrator|game ?master|gm|player|players|"
    r"suggestions?|click|undo|retry|redo|json|ooc|out of character|roleplay|role-play|"
    r"chatgpt|assistant|discord|campfire|story ?cards?|world ?state)\b",
    re.IGNORECASE,
)
#: Characters no action typed as a button needs (markup, code, links, a slash command).
_MARKUP = re.compile(r"[`{}\[\]<>|*_~#\\]|https?://|(?:^|\s)/\w")
#: The labels of the story's own buttons: a suggestion reading as one would be taken for it.
_STORY_LABELS = frozenset({"continue", "retry", "undo", "redo", "insights", "do", "say", "story"})
#: A list marker or quote the model may put before an item.
_LEAD = re.compile(r"^\s*(?:[-•*]+|\d+[.)]|>)\s*")


def clean(raw: Any) -> str | None:
    """One suggestion as a button shows it, or None when it is not one."""
    if not isinstance(raw, str):
        return None
    text = " ".join(sanitise(raw).split())
    text = _LEAD.sub("", text).strip().strip("\"'“”‘’").strip()
    if not MIN_LABEL <= len(text) <= MAX_LABEL:
        return None
    if _MARKUP.search(text) or _META.search(text):
        return None
    if not any(c.isalpha() for c in text) or text.casefold().rstrip(".!") in _STORY_LABELS:
        return None
    return text


def validate(raw: Any) -> tuple[str, ...]:
    """The suggestions kept from the block's list: clean, distinct (case and punctuation
    aside), in the model's order, at most ``MAX_SUGGESTIONS``."""
    if not isinstance(raw, list):
        return ()
    kept: list[str] = []
    seen: set[str] = set()
    for item in raw:
        text = clean(item)
        if text is None:
            continue
        key = re.sub(r"[^\w]+", " ", text.casefold()).strip()
        if key in seen:
            continue
        seen.add(key)
        kept.append(text)
        if len(kept) == MAX_SUGGESTIONS:
            break
    return tuple(kept)


def from_lists(lists: dict[str, list[Any]]) -> tuple[str, ...]:
    """The suggestions in a block's reserved lists (``Extraction.lists``)."""
    return validate(lists.get(KEY))
