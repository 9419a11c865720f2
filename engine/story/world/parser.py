"""Finding the model's state block in its reply, tolerantly; never raises.

What counts as the block (the last one wins when there are several):

* a fence labelled ``state`` (```` ```state ````), anywhere in the reply: it is always removed
  from the prose, even when its content is broken (the delta is then ``{}``); every ``state``
  fence is removed, the last one is read;
* otherwise a fence labelled ``json`` or unlabelled, at the very end of the reply (only
  whitespace after it), whose content parses into something that looks like a delta;
* otherwise a bare JSON object at the very end of the reply, starting on a line of its own,
  that parses into something that looks like a delta (so prose ending in ``}`` is never eaten,
  and neither is JSON in the middle of prose). A bare ``{}`` on its own last line is removed too.

A fence cut off by the end of the reply (no closing backticks) counts as closed there.

Fences are found from their labels and from the end of the reply, never by pairing backticks
from the start: a stray run of backticks in the prose (```` ``` ```` typed into a story, a code
fence the model never closed) must not hide the block after it, or the raw block would be shown
to the players and stored as prose. So a ``state`` fence is wherever a run of three or more
backticks is labelled ``state``, and closes at the next run; a ``json`` or unlabelled fence is
the last two runs when the reply ends with one (or the last run, cut off, when it does not).

Tolerated inside the block: trailing commas, ``+5``, unquoted keys (``{hp: -5}``), single-line
fences (```` ```state {"hp": -5}``` ````), Python's True/False/None.

"Looks like a delta": a JSON object whose keys are ids or dotted paths (letters, digits, ``_``
and ``.``) and whose values are numbers, text, booleans, ``{"set": value}`` or nested objects of
the same; a bare object must have at least one value.

The delta is flattened to dotted paths: ``{"player": {"hp": -15}}`` and ``{"player.hp": -15}``
both give ``{"player.hp": -15}``. Values are kept as written (``"+5"``, ``"=40"``, ``-15``, text,
booleans); ``{"set": 40}`` (or ``{"=": 40}``) is kept as the leaf ``{"set": 40}``. What values
mean is the referee's business: for numbers and counters a number or ``"+5"``/``"-5"`` is a
change, ``"=40"`` or ``{"set": 40}`` sets the value outright.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

#: Only this much of the end of a reply is searched for a bare object.
BARE_WINDOW = 8000
#: At most this many candidate ``{`` are tried for a bare object.
BARE_TRIES = 40
#: Deeper nesting than this is not a delta.
MAX_DEPTH = 6

#: A run of backticks that may open or close a fence (Markdown's are three or more long).
_RUN = re.compile(r"`{3,}")
#: What follows a run that opens a fence: its label, on the same line.
_LABEL = re.compile(r"[ \t]*(?P<label>[A-Za-z]*)[ \t]*")
_PATH_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_SET_KEYS = ("set", "=")
#: Top-level keys of the block whose values are lists for other parts of the engine, not state
#: paths: handed out apart from the delta (``Extraction.lists``). "events": a chapter's events
#: (engine.story.chapters); "story": typed narrative events (engine.story.narrative); "suggestions":
#: suggested actions (engine.story.suggestions).
RESERVED_LISTS = ("events", "story", "suggestions")


@dataclass(frozen=True, slots=True)
class Extraction:
    prose: str
    delta: dict[str, Any]
    #: The block as the model wrote it (fence included), "" if none was found.
    block: str
    #: The block's ``RESERVED_LISTS`` keys that hold lists, by key.
    lists: dict[str, list] = field(default_factory=dict)

    @property
    def story(self) -> tuple[Any, ...]:
        """The block's ``"story"`` list (typed narrative events, ``engine.story.narrative``)."""
        return tuple(self.lists.get("story", ()))


def extract_delta(text: str) -> tuple[str, dict]:
    """(prose without the block, trailing whitespace trimmed; the flat delta, ``{}`` if none)."""
    found = extract_state(text)
    return found.prose, found.delta


def extract_state(text: str) -> Extraction:
    """Like ``extract_delta``, with the raw block too; never raises."""
    try:
        return _extract(text)
    except Exception:  # noqa: BLE001 - a bad block must never break a turn
        return Extraction(text.rstrip() if isinstance(text, str) else "", {}, "")


def _extract(text: str) -> Extraction:
    if not isinstance(text, str):
        return Extraction("", {}, "")
    runs = list(_RUN.finditer(text)) if "```" in text else []
    state_fences = _state_fences(text, runs)
    if state_fences:
        read = [(f, _as_delta(f.body, bare=False)) for f in state_fences]
        well_formed = [(f, d) for f, d in read if d is not None]
        fence, delta = well_formed[-1] if well_formed else read[-1]
        pieces, at = [], 0
        for f in state_fences:
            pieces.append(text[at : f.start])
            at = f.end
        pieces.append(text[at:])
        lists = _lists(fence.body)
        return Extraction(_join(pieces), delta or {}, fence.raw.strip(), lists)
    tail = _tail_fence(text, runs)
    if tail is not None:
        fence, delta = tail
        return Extraction(
            text[: fence.start].rstrip(), delta, fence.raw.strip(), _lists(fence.body)
        )
    stripped = text.rstrip()
    if stripped.endswith("}"):
        found = _bare_tail(stripped)
        if found is not None:
            start, delta = found
            body = stripped[start:]
            return Extraction(stripped[:start].rstrip(), delta, body, _lists(body))
    return Extraction(stripped, {}, "")


@dataclass(frozen=True, slots=True)
class _Fence:
    start: int
    end: int
    label: str
    body: str
    raw: str


def _fence(text: str, runs: list[re.Match[str]], i: int) -> _Fence:
    """The fence opened by ``runs[i]``: closed by the next run, or cut off by the end."""
    opener = runs[i]
    label = _LABEL.match(text, opener.end())
    assert label is not None  # the pattern matches the empty string
    closer = runs[i + 1] if i + 1 < len(runs) else None
    body_end = closer.start() if closer else len(text)
    end = closer.end() if closer else len(text)
    body = text[label.end() : body_end]
    return _Fence(
        opener.start(), end, label.group("label").casefold(), body, text[opener.start() : end]
    )


def _state_fences(text: str, runs: list[re.Match[str]]) -> list[_Fence]:
    """Every fence labelled ``state``, in order. A run labelled so opens one wherever it is,
    and the run after it closes it (it opens nothing itself)."""
    fences, i = [], 0
    while i < len(runs):
        fence = _fence(text, runs, i)
        if fence.label == "state" and _label_ends(text, runs[i]):
            fences.append(fence)
            i += 2
        else:
            i += 1
    return fences


def _label_ends(text: str, run: re.Match[str]) -> bool:
    """Whether the word after the run is a whole label (``state``, not ``statement``)."""
    label = _LABEL.match(text, run.end())
    assert label is not None
    after = run.end() + len(label.group(0).rstrip(" \t"))
    return after >= len(text) or text[after] in " \t\r\n{"


def _tail_fence(text: str, runs: list[re.Match[str]]) -> tuple[_Fence, dict] | None:
    """A ``json`` or unlabelled fence ending the reply, whose content is a delta."""
    if not runs:
        return None
    last = runs[-1]
    if last.end() == len(text.rstrip()):
        if len(runs) < 2:
            return None
        candidate = _fence(text, runs, len(runs) - 2)  # closed by the reply's last run
    else:
        candidate = _fence(text, runs, len(runs) - 1)  # cut off by the end of the reply
        if len(runs) >= 2 and _delta_fence(_fence(text, runs, len(runs) - 2)) is not None:
            # The last run closes a block before it, and what follows is prose (or a bare
            # object, which the bare rule reads): it opens nothing.
            return None
    delta = _delta_fence(candidate)
    return (candidate, delta) if delta is not None else None


def _delta_fence(fence: _Fence) -> dict | None:
    if fence.label not in ("json", ""):
        return None
    return _as_delta(fence.body, bare=False)


def _join(pieces: list[str]) -> str:
    """Glue the prose around removed blocks back together."""
    out = pieces[0].rstrip()
    for piece in pieces[1:]:
        piece = piece.strip()
        if piece.strip():
            out = f"{out}\n\n{piece}" if out else piece
    return out


def _bare_tail(stripped: str) -> tuple[int, dict] | None:
    """The start and delta of a bare object ending ``stripped``, on lines of its own."""
    window_start = max(0, len(stripped) - BARE_WINDOW)
    starts = [
        i
        for i in range(window_start, len(stripped))
        if stripped[i] == "{" and _at_line_start(stripped, i)
    ]
    for i in starts[:BARE_TRIES] if len(starts) <= BARE_TRIES else starts[-BARE_TRIES:]:
        candidate = stripped[i:]
        if candidate.replace(" ", "") == "{}":
            return i, {}
        delta = _as_delta(candidate, bare=True)
        if delta is not None:
            return i, delta
    return None


def _at_line_start(text: str, i: int) -> bool:
    j = i - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    return j < 0 or text[j] == "\n"


def _as_delta(body: str, *, bare: bool) -> dict | None:
    """The flat delta in ``body``, or None if it is not one."""
    data = loads_tolerant(body)
    if not isinstance(data, dict):
        return None
    lists = [key for key in RESERVED_LISTS if isinstance(data.get(key), list)]
    data = {key: value for key, value in data.items() if key not in lists}
    flat: dict[str, Any] = {}
    if not _flatten(data, "", flat, 0):
        return None
    if bare and not flat and not lists:
        return None
    return flat


def _lists(body: str) -> dict[str, list]:
    """The reserved list keys of a block's body."""
    data = loads_tolerant(body)
    if not isinstance(data, dict):
        return {}
    return {key: data[key] for key in RESERVED_LISTS if isinstance(data.get(key), list)}


def _flatten(node: dict, prefix: str, out: dict[str, Any], depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    for key, value in node.items():
        if not isinstance(key, str) or not _PATH_KEY.match(key.strip()):
            return False
        path = f"{prefix}{key.strip()}"
        if isinstance(value, dict):
            set_key = next((k for k in _SET_KEYS if k in value), None)
            if set_key is not None and len(value) == 1:
                inner = value[set_key]
                if isinstance(inner, dict | list) or inner is None:
                    return False
                out[path] = {"set": inner}
            elif not _flatten(value, f"{path}.", out, depth + 1):
                return False
        elif isinstance(value, bool | int | float | str):
            out[path] = value
        else:  # lists, null
            return False
    return True


def flatten_delta(delta: Any) -> dict[str, Any]:
    """A delta (nested, flat or mixed) as flat dotted paths; entries that are not a delta's
    (lists, null, odd keys) are kept as they are, for the referee to reject."""
    if not isinstance(delta, dict):
        return {}
    out: dict[str, Any] = {}
    _flatten_loose(delta, "", out, 0)
    return out


def _flatten_loose(node: dict, prefix: str, out: dict[str, Any], depth: int) -> None:
    for key, value in node.items():
        path = f"{prefix}{str(key).strip()}"
        if isinstance(value, dict) and value and depth < MAX_DEPTH:
            set_key = next((k for k in _SET_KEYS if k in value), None)
            if set_key is not None and len(value) == 1:
                out[path] = {"set": value[set_key]}
            else:
                _flatten_loose(value, f"{path}.", out, depth + 1)
        else:
            out[path] = value


def loads_tolerant(body: str) -> Any:
    """JSON, forgiving trailing commas, ``+5``, unquoted keys and True/False/None; None if
    it still does not parse. An object cut off before its closing braces is closed."""
    body = body.strip().lstrip("\ufeff")
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        pass
    repaired = _repair(body)
    try:
        return json.loads(repaired)
    except (ValueError, RecursionError):
        pass
    missing = repaired.count("{") - repaired.count("}")
    if 0 < missing <= MAX_DEPTH:  # cut off before its closing braces
        try:
            return json.loads(repaired + "}" * missing)
        except (ValueError, RecursionError):
            pass
    return None


_BARE_WORDS = {"True": "true", "False": "false", "None": "null"}


def _repair(body: str) -> str:
    """Rewrite the tolerated non-JSON forms, outside strings."""
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == '"':
            j = i + 1
            while j < n and body[j] != '"':
                j += 2 if body[j] == "\\" else 1
            out.append(body[i : j + 1])
            i = j + 1
            continue
        if c == "'":  # a single-quoted string becomes a JSON string
            j = body.find("'", i + 1)
            if j < 0:
                out.append(body[i:])
                break
            out.append(json.dumps(body[i + 1 : j]))
            i = j + 1
            continue
        if c == ",":
            j = i + 1
            while j < n and body[j] in " \t\r\n":
                j += 1
            if j < n and body[j] in "}]":
                i += 1
                continue
        if c == "+" and i + 1 < n and (body[i + 1].isdigit() or body[i + 1] == "."):
            i += 1
            continue
        if c.isalpha() or c == "_":
            j = i
            while j < n and (body[j].isalnum() or body[j] in "_."):
                j += 1
            word = body[i:j]
            k = j
            while k < n and body[k] in " \t":
                k += 1
            if k < n and body[k] == ":":
                out.append(json.dumps(word))
            else:
                out.append(_BARE_WORDS.get(word, word))
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)
