"""The narrator's rules, composed in one place for solo and group play: who the narrator is, whom
it answers, and the story's voice (the person it is told in).

A solo story is told as its AI instructions ask, as "you" when they do not say (the rules then
say nothing of it: an imported story may be told in the first person, and a line asking for
"you" would contradict it); a group story (one in a server) names each player's character, as
AI Dungeon's multiplayer writes its players' actions ("> Ann opens the door."). A scenario
written for one player often asks for the second person ("Write in second person, present
tense…"): in a group story that would contradict the rule to name each character, so the
instructions are sent with "third person" in its place, and Insights says so. The voice is
decided from the adventure's standing texts only, never from the story, so the system message
is the same every turn (``engine.turns.context``: the cached prefix).

The tidying of the narration (``engine.story.narration_hygiene``) reads the same voice: a slip
into "I" is a seam in a story told as "you", not in one the scenario asks to be told as "I".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Voice(StrEnum):
    """The person a story is told in."""

    FIRST = "first"
    SECOND = "second"
    THIRD = "third"


#: "second person", "first-person", "Third Person": what AI instructions say of the voice.
_ASKED = re.compile(r"\b(first|second|third)[- ]person\b", re.IGNORECASE)

_INTRO = "You are the narrator of an interactive text adventure."
_ONLY_STORY = "Write only the story: no headings, no commentary, no choices as a list"

SOLO_RULES = (
    f"{_INTRO} Continue the story from where it stops, reacting to the player's last action. "
    f"{_ONLY_STORY}, and never act or speak for the player."
)
GROUP_RULES = (
    f"{_INTRO} Several players share this story, each playing their own character (listed "
    'under "Party:"; a player without one goes by their name). Their actions are written with '
    'that name: "> Ann opens the door." Continue the story from where it stops, answering every '
    f"action of the turn. {_ONLY_STORY}, and never act or speak for any of the players."
)
#: A group story's voice, whatever its instructions ask.
GROUP_VOICE_LINE = 'Tell it in the third person: name each player\'s character, never "you".'


@dataclass(frozen=True, slots=True)
class NarratorRules:
    """What the system message opens with, and the AI instructions as they are sent."""

    #: The narrator's rules (the "narrator" section).
    text: str
    #: The scenario's AI instructions, their voice made the group's where it contradicted it.
    instructions: str
    #: The voice the story is told in.
    voice: Voice
    #: Why the instructions differ from the scenario's, for Insights; "" when they do not.
    note: str = ""


def asked_voice(instructions: str) -> Voice | None:
    """The voice AI instructions ask for ("Write in second person" → SECOND), or None."""
    found = _ASKED.search(instructions)
    return Voice(found[1].lower()) if found else None


def narrator_rules(*, group: bool, instructions: str = "") -> NarratorRules:
    """The narrator's rules for a solo or a group story with these AI instructions."""
    asked = asked_voice(instructions)
    if not group:
        return NarratorRules(SOLO_RULES, instructions, asked or Voice.SECOND)
    text = f"{GROUP_RULES} {GROUP_VOICE_LINE}"
    if asked is not Voice.SECOND:
        # A first-person narrator (a storyteller who says "I") still names the characters.
        return NarratorRules(text, instructions, Voice.FIRST if asked else Voice.THIRD)
    sent = _ASKED.sub(lambda m: _same_case(m[0], "third person"), instructions)
    note = 'its "second person" sent as "third person": several players share this story'
    return NarratorRules(text, sent, Voice.THIRD, note)


def _same_case(found: str, replacement: str) -> str:
    """``replacement`` with the first letter's case and the hyphen of ``found``."""
    if "-" in found:
        replacement = replacement.replace(" ", "-")
    return replacement[0].upper() + replacement[1:] if found[0].isupper() else replacement
