"""Player actions, written into the story the way AI Dungeon writes them.

``do``    "open the door"  →  "> You open the door."
``say``   "Hello"          →  '> You say "Hello."'
``story`` "A storm rolls in." is taken as written.
``continue`` adds nothing: the narrator just goes on.

The player's first person past the opening becomes the actor's: "I draw my sword" →
"> You draw your sword." (as AI Dungeon writes it). In group play the actor is a character's
name, every verb of the action agrees with it (``engine.story.agreement``: "raise my lantern
and climb the steps" → "raises … and climbs …") and the player's own words for themselves take
the singular "they": "draw my sword" by Ann → "> Ann draws their sword.", "Who goes there?" →
'> Ann says "…"'. Quoted words are speech and kept as typed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.errors import InvalidInput
from engine.platform.sanitise import sanitise
from engine.storage.models import ActionType
from engine.story.agreement import third_person
from engine.story.pronouns import forms_of

# ActionType is the front end's too (a cog names the kind of action it plays), and cogs do not
# import storage: it is re-exported here, with the actions it classifies.
__all__ = ["ActionType", "PlayerAction", "format_action"]

_FIRST_PERSON = re.compile(r"^(i|you)\b\s*", re.IGNORECASE)
# "I am" must become "You are", not "You am"; the common irregulars only.
_VERB_FIXES = {"am": "are", "was": "were", "'m": "'re"}
_TERMINAL = (".", "!", "?", "…", '"', "'", ")", "*")


@dataclass(frozen=True, slots=True)
class PlayerAction:
    type: ActionType
    text: str = ""
    author_id: int | None = None
    #: Who acts: "You" when solo; a character name in group play.
    actor: str = "You"
    #: The character's pronouns as kept (``engine.story.pronouns``); "" is "they".
    pronouns: str = ""

    def __post_init__(self) -> None:
        # Every action is made here, whichever front end or stored request it comes from: one
        # place where its text enters the engine.
        object.__setattr__(self, "text", sanitise(self.text))
        object.__setattr__(self, "actor", sanitise(self.actor))


def format_action(action: PlayerAction, *, max_chars: int = 2000) -> str:
    """The text the action adds to the story. Raises ``InvalidInput`` for an unusable action."""
    raw = " ".join(action.text.split()) if action.type != ActionType.STORY else action.text.strip()
    if action.type == ActionType.CONTINUE:
        return ""
    if not raw:
        verb = {ActionType.DO: "do", ActionType.SAY: "say", ActionType.STORY: "add"}.get(
            action.type, "write"
        )
        raise InvalidInput(f"Tell the story what to {verb}: the action was empty.")
    if len(raw) > max_chars:
        raise InvalidInput(f"That action is {len(raw)} characters long; the limit is {max_chars}.")
    if action.type == ActionType.DO:
        done = _second_person(raw, action.actor)
        if action.actor != "You":
            done = third_person(done)
        return f"> {action.actor} {_sentence(_pronouns(done, action.actor, action.pronouns))}"
    if action.type == ActionType.SAY:
        speech = raw.strip().strip('"“”').strip()
        verb = "say" if action.actor == "You" else "says"
        return f'> {action.actor} {verb} "{_sentence(_capitalise(speech))}"'
    if action.type == ActionType.STORY:
        return raw
    raise InvalidInput(f"Unknown action type '{action.type}'.")


def _second_person(text: str, actor: str) -> str:
    """Drop a leading "I"/"You" the player typed, since the actor is written in front."""
    match = _FIRST_PERSON.match(text)
    if not match:
        return _lower_first(text)
    rest = text[match.end() :]
    if actor == "You":
        first, _, tail = rest.partition(" ")
        fixed = _VERB_FIXES.get(first.lower())
        if fixed:
            rest = f"{fixed} {tail}".rstrip()
    return _lower_first(rest) if rest else rest


# The player's own words for themselves past the opening ("I draw my sword so I can fight"),
# as AI Dungeon writes them for "You" ("converts any first-person words (I, me, my, mine, etc.)
# outside of quotes into second-person", help.aidungeon.com/the-do-mode), and for a named
# character (AI Dungeon's third person uses the character's name) in the singular "they".
_PRONOUNS_YOU = {
    "i am": "you are",
    "i'm": "you're",
    "i was": "you were",
    "i": "you",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
}
_PRONOUNS_NAMED = {
    "i am": "{name} is",
    "i'm": "{name} is",
    "i was": "{name} was",
    "i": "{name}",
    "me": "{object}",
    "my": "{possessive}",
    "mine": "{possessive_pronoun}",
    "myself": "{reflexive}",
}
_FIRST_PERSON_WORD = re.compile(r"\b(i am|i'm|i was|i|me|my|mine|myself)\b", re.IGNORECASE)
_QUOTED = re.compile(r"(\"[^\"]*\"|“[^”]*”)")


def _pronouns(text: str, actor: str, pronouns: str = "") -> str:
    """The player's first person past the opening, in the actor's person: "you" for You, the
    character's name and their pronouns (``engine.story.pronouns``: "their" unless set) for a
    named one. Quoted words are the character's own speech and kept as typed."""
    table = _PRONOUNS_YOU if actor == "You" else _PRONOUNS_NAMED
    forms = forms_of(pronouns)

    def swap(match: re.Match[str]) -> str:
        return table[match[0].lower()].format(
            name=actor,
            object=forms.object,
            possessive=forms.possessive,
            possessive_pronoun=forms.possessive_pronoun,
            reflexive=forms.reflexive,
        )

    return "".join(
        piece if _QUOTED.fullmatch(piece) else _FIRST_PERSON_WORD.sub(swap, piece)
        for piece in _QUOTED.split(text)
    )


def _sentence(text: str) -> str:
    return text if text.endswith(_TERMINAL) else f"{text}."


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _lower_first(text: str) -> str:
    # Keep "I" and acronyms ("NASA") as typed; lower a plain capitalised first word.
    first = text.split(" ", 1)[0]
    if len(first) > 1 and first[1:].islower():
        return text[:1].lower() + text[1:]
    return text
