"""What a script's run gives back, read and checked before the engine keeps any of it.

The prelude's ``control("finish", …)`` hands over one JSON text: a flat envelope of
``text``, ``stop`` and three JSON texts of their own (``state``, ``storyCards``, ``logs``).
The prelude builds it with the builtins as they were before the script ran, but the values in
it are the script's, and the engine trusts none of them: ``read_result`` checks every type and
length here, in Python, and a result that fails is a script error (shown in Insights; the turn
goes on without the script's changes), never an exception that fails the turn.

Strings pass the engine's one sanitiser (``engine.platform.sanitise``) on the way in, as a player's
text
does: a lone surrogate (JavaScript strings may hold one, Python cannot encode it) becomes U+FFFD
and NUL (PostgreSQL text cannot hold it) is dropped, so nothing a script writes can break
storing or sending the turn. Text that players read (the hook's text, cards, logs) loses the
other control characters too; ``state`` is the script's own data and keeps them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.platform.sanitise import sanitise, sanitise_code
from engine.prompt.card_cap import CardCap

#: The story-card fields a script's card carries, all strings, and ``origin``: the id the card
#: had when the run began, "" for a card object the script made
#: (``engine.library.scripting.cards``).
CARD_FIELDS = ("id", "keys", "entry", "type", "title", "description", "origin")
#: A script's card field may be longer than a hand-made card's (scripts keep notes in them),
#: but not without bound.
CARD_FIELD_MAX_CHARS = 20_000
#: Scripts keep data in their ids (MagicCards' are JSON texts): room for that, within bounds.
CARD_ID_MAX_CHARS = 2_000
#: What the prelude keeps of a run's logs (it cuts them the same way).
LOG_LINES = 200
LOG_LINE_MAX_CHARS = 2001
#: Nesting of ``state``: enough for any script's data, far below what Python's JSON (and the
#: database drivers after it) can recurse through.
STATE_MAX_DEPTH = 100


@dataclass(frozen=True, slots=True)
class Caps:
    """How much of a run's result the engine keeps."""

    #: The hook's text.
    text_chars: int
    #: ``state`` as JSON: per adventure (every script shares it).
    state_chars: int
    #: Story cards the adventure may have.
    cards: int


@dataclass(slots=True)
class RunResult:
    """What one run gave back. ``error`` set means the run failed and nothing else counts
    (except ``logs``, which are kept for Insights)."""

    text: str = ""
    stop: bool = False
    state: dict[str, Any] = field(default_factory=dict)
    cards: list[dict[str, Any]] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    error: str | None = None
    #: Wall-clock time of the run, as the engine waited for it.
    ms: int = 0
    #: CPU time of the run in its worker (what the time limit bounds).
    cpu_ms: int = 0
    #: How long the run waited for a worker (others' runs held them all: ``fair_share``).
    queued_ms: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


class BadResult(Exception):
    """Why a run's result cannot be kept, in words for the script's author."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def read_result(raw: object, caps: Caps) -> RunResult:
    """The run's result from the prelude's envelope, checked against ``caps``; a result that
    cannot be kept comes back with ``error`` set (and the logs, when they could be read)."""
    logs: list[str] = []
    try:
        envelope = _envelope(raw)
        logs = read_logs(envelope["logs"])
        text = _text(envelope["text"], caps)
        state = _state(envelope["state"], caps)
        cards = _cards(envelope["storyCards"], caps)
    except BadResult as problem:
        return RunResult(error=problem.message, logs=logs)
    return RunResult(text=text, stop=envelope["stop"] is True, state=state, cards=cards, logs=logs)


def read_logs(raw: object) -> list[str]:
    """A run's log lines from their JSON text (an envelope's, or the prelude's after a failed
    run): strings only, as many and as long as the prelude keeps."""
    if not isinstance(raw, str):
        raise BadResult("The script's logs could not be read.")
    lines = _json(raw, "logs")
    if not isinstance(lines, list):
        raise BadResult("The script's logs could not be read.")
    return [sanitise(str(line))[:LOG_LINE_MAX_CHARS] for line in lines[:LOG_LINES]]


def _envelope(raw: object) -> dict[str, Any]:
    if not isinstance(raw, str):
        raise BadResult("The script's result could not be read.")
    envelope = _json(raw, "result")
    if (
        not isinstance(envelope, dict)
        or not isinstance(envelope.get("text"), str)
        or not isinstance(envelope.get("stop"), bool)
        or not all(isinstance(envelope.get(part), str) for part in ("state", "storyCards", "logs"))
    ):
        raise BadResult("The script's result could not be read.")
    return envelope


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise BadResult(f"The script's {what} is nested too deeply to be read.") from None
    except ValueError:
        raise BadResult(f"The script's {what} could not be read.") from None


def _text(text: str, caps: Caps) -> str:
    if len(text) > caps.text_chars:
        raise BadResult(
            f"The script's text is {len(text):,} characters long; a hook may give back at most "
            f"{caps.text_chars:,}. Its changes were not kept."
        )
    return sanitise(text)


def _state(raw: str, caps: Caps) -> dict[str, Any]:
    if len(raw) > caps.state_chars:
        raise BadResult(
            f"The script's state is {len(raw):,} characters as JSON; an adventure's scripts may "
            f"keep at most {caps.state_chars:,} (a limit the bot's operator sets). Its changes "
            "from this run were not kept: store less in `state`, or keep it in story cards."
        )
    state = _json(raw, "state")
    if not isinstance(state, dict):
        raise BadResult(
            "The script's state is not an object (a toJSON or a replaced `state` made it "
            f"{type(state).__name__}). Its changes were not kept."
        )
    return _clean_value(state, 0)


def _clean_value(value: Any, depth: int) -> Any:
    if depth > STATE_MAX_DEPTH:
        raise BadResult(
            f"The script's state is nested more than {STATE_MAX_DEPTH} levels deep. "
            "Its changes were not kept."
        )
    if isinstance(value, str):
        return sanitise_code(value)
    if isinstance(value, dict):
        return {sanitise_code(key): _clean_value(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_clean_value(item, depth + 1) for item in value]
    return value


def _cards(raw: str, caps: Caps) -> list[dict[str, Any]]:
    cards = _json(raw, "story cards")
    if not isinstance(cards, list):
        raise BadResult("The script's story cards could not be read.")
    refusal = CardCap(caps.cards).too_many(len(cards), "The script left")
    if refusal is not None:
        raise BadResult(f"{refusal} Its changes were not kept.")
    return [_card(card, number) for number, card in enumerate(cards, start=1)]


def _card(card: object, number: int) -> dict[str, str]:
    if isinstance(card, dict) and "origin" not in card:
        card = {**card, "origin": ""}  # a card object the script made
    if not isinstance(card, dict) or set(card) != set(CARD_FIELDS):
        raise BadResult(f"Story card {number} the script left could not be read.")
    for name in CARD_FIELDS:
        value = card[name]
        if not isinstance(value, str):
            raise BadResult(
                f"Story card {number}'s {name} is {type(value).__name__}, not text. "
                "The script's changes were not kept."
            )
        limit = CARD_ID_MAX_CHARS if name in ("id", "origin") else CARD_FIELD_MAX_CHARS
        if len(value) > limit:
            raise BadResult(
                f"Story card {number}'s {name} is {len(value):,} characters long; a script's "
                f"card may have at most {limit:,} in each field. Its changes were not kept."
            )
    return {name: sanitise(card[name]) for name in CARD_FIELDS}
