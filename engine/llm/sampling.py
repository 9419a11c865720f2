"""What an adventure may set of its model's sampling beyond temperature and length, and the
bounds every model holds it to.

Players coming from SillyTavern, KoboldAI and AI Dungeon tune the same few knobs: the
repetition, presence and frequency penalties, top-p and min-p, and stop strings (SillyTavern's
"custom stopping strings", a JSON list of strings:
https://docs.sillytavern.app/usage/prompts/advancedformatting/#custom-stopping-strings).
Each is bounded here, for every model alike, whether a player's own or the operator's: a
value outside its range is refused with the range named, so a player never learns the bounds
from a model server's error halfway through a turn. Which of them a model server accepts is
``engine.llm.providers.dialects``' business.

The ranges are the narrowest any accepting server documents, so one value is valid wherever
it is sent:

* ``top_p`` (0, 1] and ``min_p`` [0, 1]: OpenAI, llama.cpp, vLLM, OpenRouter;
* ``presence_penalty`` and ``frequency_penalty`` [-2, 2]: OpenAI's range
  (https://platform.openai.com/docs/api-reference/chat/create);
* ``repetition_penalty`` [1, 2]: OpenRouter takes (0, 2]
  (https://openrouter.ai/docs/api-reference/parameters); below 1 a penalty rewards
  repetition, which no player wants from it;
* stop strings: at most ``STOP_STRINGS_MAX``, each 1 to ``STOP_STRING_CHARS`` characters.
  OpenAI takes four stop sequences in all; a server that takes fewer than a turn has is sent
  the first ones, as SillyTavern sends it the first of its list (``getCustomStoppingStrings``
  with a limit, in its ``power-user.js``), and Insights says which were left out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from engine.errors import InvalidInput
from engine.platform.sanitise import QUOTE_MAX, echo, sanitise

TOP_P_RANGE = (0.01, 1.0)
MIN_P_RANGE = (0.0, 1.0)
REPETITION_PENALTY_RANGE = (1.0, 2.0)
PRESENCE_PENALTY_RANGE = (-2.0, 2.0)
FREQUENCY_PENALTY_RANGE = (-2.0, 2.0)
#: How many entries from the end of the story the author's note may be put (``authors_note_depth``).
NOTE_DEPTH_RANGE = (0, 100)

#: The most stop strings an adventure may set, and the longest one.
STOP_STRINGS_MAX = 8
STOP_STRING_CHARS = 40
#: The longest text a player may give as the list (a JSON list of the above, escapes and all).
STOP_TEXT_MAX = STOP_STRINGS_MAX * (STOP_STRING_CHARS * 6 + 4) + 2

#: Campfire's own stop: the narrator stops where it would start writing the player's next
#: action for them. A turn's stop strings begin with it, the adventure's after it.
STOP_AT_PLAYER_ACTION = ("\n>",)

#: How the list is written, as SillyTavern writes it: shown in a refusal.
STOP_EXAMPLE = '["\\nYou:", "THE END"]'


def turn_stops(
    adventure: Sequence[str], own: Sequence[str] = STOP_AT_PLAYER_ACTION
) -> tuple[str, ...]:
    """A turn's stop strings: Campfire's own first (a server that takes only a few is sent the
    first ones), then the adventure's, each once."""
    return tuple(dict.fromkeys((*own, *adventure)))


def check_range(name: str, value: float | None, bounds: tuple[float, float]) -> None:
    """Refuse ``value`` outside ``bounds``, naming the setting and its range."""
    if value is None:
        return
    low, high = bounds
    if not (math.isfinite(value) and low <= value <= high):
        raise InvalidInput(
            f"{name} must be between {number(low)} and {number(high)}; got {number(value)}."
        )


def parse_stop_strings(text: str) -> tuple[str, ...]:
    """The stop strings a player wrote as a JSON list of strings (``[]`` clears them), checked
    against the bounds; a refusal says what was wrong and how to write it."""
    if len(text) > STOP_TEXT_MAX:
        raise InvalidInput(
            f"stop is {len(text):,} characters long; a list of up to {STOP_STRINGS_MAX} stop "
            f"strings of {STOP_STRING_CHARS} characters each needs no more than "
            f"{STOP_TEXT_MAX:,}."
        )
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        value = None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidInput(
            "stop must be a JSON list of strings, as SillyTavern writes its custom stopping "
            f"strings: {STOP_EXAMPLE} (`\\n` is a new line; `[]` clears them)."
        )
    return check_stop_strings(value)


def check_stop_strings(strings: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``strings`` sanitised, duplicates dropped, within the bounds (or refused)."""
    kept = tuple(dict.fromkeys(sanitise(item) for item in strings))
    if len(kept) > STOP_STRINGS_MAX:
        raise InvalidInput(f"stop may hold at most {STOP_STRINGS_MAX} strings; got {len(kept)}.")
    for item in kept:
        if not item:
            raise InvalidInput("A stop string cannot be empty.")
        if len(item) > STOP_STRING_CHARS:
            raise InvalidInput(
                f"A stop string may have at most {STOP_STRING_CHARS} characters; "
                f"“{echo(shown_stop(item), QUOTE_MAX)}” has {len(item)}."
            )
    return kept


def shown_stop(text: str) -> str:
    """A stop string as a player reads it back: line breaks and tabs as their escapes."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


def number(value: float) -> str:
    """A bound or setting as players read it: ``0.05``, ``2``, ``1,000``."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:g}"
    return f"{int(value):,}"
