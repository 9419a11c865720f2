"""Story-card keys as other tools write them, turned into Campfire's keys where possible.

Campfire's keys (``engine.prompt.cards``) are comma-separated words matched whole-word and
case-insensitively; they are never read as patterns. Imported files use three syntaxes:

- **Plain comma lists** (AI Dungeon's own world info and story cards): kept as written.
- **``/regex/flags`` keys**: a key wrapped in slashes is a JavaScript regular expression in
  SillyTavern world info and NovelAI lorebooks, and in EWIJSON below.
- **EWIJSON keys**, written for Zynj's "Extended World Info JSON" AI Dungeon script
  (github.com/Zynj-git/AIDungeon, ``AID-Script-Examples/EWIJSON/release/shared.js`` and
  ``docs/EWI - Documentation.txt``, commit df4e20b26c788247a25ba662a3c4296d33111b75): each
  line of the keys is a condition of its own; within a line, commas not escaped as ``\\,``
  separate regular expressions that must *all* match; each is matched anywhere in the text,
  ignoring case (flags ``gi``). ``#[…]`` closing a line holds attributes, letters with optional
  ``=n``: ``t=n`` inserts the entry n lines behind the word that fired it, ``l=n`` searches only
  the last n actions, ``f=n`` limits how many attributed entries act at once, ``S=n`` keeps the
  entry in for n turns after it fired (0: for good); also ``p a m d w r s i x``. So
  ``Name|(|the )emp(ress|eror)#[t=5l=5f=2S=2]`` fires on "Name", "empress", "the emperor"….

A regular expression becomes plain keys when it only spells out alternatives: literal text,
groups, ``|``, an optional ``?`` part, small character sets such as ``[Ss]``, ``\\b`` and
``\\s``, and at most ``MAX_SPELLED`` spellings. Anything else (``.``, ``*``, ``+``, ``\\w``,
ranges, look-arounds) cannot be written as words; such a key is kept as a regular-expression
key (the card's ``lore``, run on RE2 by ``engine.prompt.regex_keys``) when RE2 runs it, else
dropped; the preview says which. What Campfire does not do is said too: EWIJSON's attributes
are not applied (a card goes in while a key is in the recent story), a line whose expressions
must all match fires on any of them, and keys match whole words (the scripts matched inside
words too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.library.formats.draft import ImportedCard
from engine.prompt.regex_keys import MAX_REGEX_KEYS, compile_regex
from engine.story.steering.cards import CARD_KEYS_MAX

#: The most plain keys one regular expression is spelled out into.
MAX_SPELLED = 32
#: The most characters of one set (``[Ss]``) spelled out.
MAX_SET = 8
#: The longest expression read, and the deepest nesting of its groups: a card's keys hold
#: ``CARD_KEYS_MAX`` characters, so a longer expression could not be kept as keys anyway, and
#: reading one is bounded before it starts (a 150 KB key of ``[ab]`` sets took 20 s to spell out;
#: 400 nested groups exhausted the recursion).
MAX_PATTERN_CHARS = CARD_KEYS_MAX
MAX_DEPTH = 16
#: The longest EWIJSON attribute suffix (``#[t=5l=5f=2S=2]`` is 15 characters).
MAX_SUFFIX_CHARS = 200

#: EWIJSON's attribute suffix closing a line of keys (its ``Expressions.EWI``).
EWI_SUFFIX = re.compile(r"#\[[^\]]*\]\s*$")
#: A ``/pattern/flags`` key.
SLASHED = re.compile(r"^/(.+)/([a-z]*)$", re.DOTALL)
#: Commas that separate EWIJSON's expressions (``\,`` is a comma inside one).
UNESCAPED_COMMA = re.compile(r"(?<!\\),")


class _NotWords(Exception):
    """The expression matches something that is not a short list of words."""


@dataclass
class KeyReport:
    """What converting a file's keys did, summed over its cards, for the preview."""

    spelled: int = 0
    example: tuple[str, str] | None = None
    attributes: set[str] = field(default_factory=set)
    attributed: int = 0
    all_of: int = 0
    dropped: int = 0
    dropped_example: str = ""
    #: Cards left with no key: by EWIJSON lines with only attributes, or by regular
    #: expressions (SillyTavern's, NovelAI's) that could not be written as words.
    keyless: int = 0
    keyless_ewi: int = 0
    #: Cards that keep regular-expression keys (run on RE2), and whether the card being
    #: converted has kept one yet.
    regex_cards: int = 0
    regex_example: str = ""
    regex_cards_pending: bool = False

    def warnings(self) -> list[str]:
        out = []
        if self.spelled:
            shown = ""
            if self.example:
                shown = f" (“{self.example[0][:60]}” → {self.example[1][:80]})"
            out.append(
                f"Keys written as regular expressions on {self.spelled:,} story card(s) were "
                f"spelled out as plain words{shown}; they match whole words."
            )
        if self.attributed:
            letters = ", ".join(sorted(self.attributes))
            out.append(
                f"{self.attributed:,} story card(s) carry EWIJSON attributes (#[…]: {letters}) "
                "that Campfire does not apply: a card goes in while one of its keys is in the "
                "recent story."
            )
        if self.all_of:
            out.append(
                f"{self.all_of:,} story card(s) needed several expressions at once (EWIJSON "
                "commas); they fire on any one of them."
            )
        if self.regex_cards:
            out.append(
                f"{self.regex_cards:,} story card(s) keep keys as regular expressions (e.g. "
                f"“{self.regex_example[:60]}”), run on RE2: look-arounds and back-references "
                "are not."
            )
        if self.dropped:
            out.append(
                f"{self.dropped:,} key(s) could not be written as words and were left out "
                f"(e.g. “{self.dropped_example[:60]}”)."
            )
        if self.keyless_ewi:
            out.append(
                f"{self.keyless_ewi:,} story card(s) have no key Campfire can use (EWIJSON "
                "entries with only #[…] went into every turn at a set line) and fire only if made "
                "always-on (/card edit)."
            )
        if self.keyless:
            out.append(
                f"{self.keyless:,} story card(s) had only regular-expression keys that could not "
                "be written as words, so they have no key and fire only if made always-on "
                "(/card edit)."
            )
        return out


def convert_card_keys(cards: Iterable[ImportedCard], warnings: list[str]) -> None:
    """Rewrite each card's keys as Campfire keys; what could not be kept goes in ``warnings``."""
    report = KeyReport()
    for card in cards:
        regex: list[str] = []
        card.keys = _convert(card.keys, report, always_on=card.always_on, regex=regex)
        if regex:
            lore = card.lore if isinstance(card.lore, dict) else {}
            lore["regex"] = [*(lore.get("regex") or []), *regex]
            card.lore = lore
        secondary = card.lore.get("secondary") if isinstance(card.lore, dict) else None
        if isinstance(secondary, list) and secondary:
            # Secondary keys are written as primary ones are: spelled out where they can be,
            # named where they cannot. Their card keeps its primary keys either way.
            text = ",".join(k for k in secondary if isinstance(k, str))
            card.lore["secondary"] = _convert(text, report, always_on=True).split(",")
    warnings.extend(report.warnings())


def _convert(
    keys: str, report: KeyReport, *, always_on: bool = False, regex: list[str] | None = None
) -> str:
    """``keys`` as Campfire's keys; an expression that is no list of words goes to ``regex``
    (as ``/pattern/flags``) when RE2 runs it and ``regex`` is given, else it is dropped."""
    lines = [line for line in keys.splitlines() if line.strip()]
    ewi = any(_suffix(line) for line in lines)
    out: list[str] = []
    spelled = dropped = all_of = False
    for line in lines:
        if ewi:
            suffix = _suffix(line)
            if suffix is not None:
                report.attributes.update(_attribute_letters(suffix.group(0)))
                line = line[: suffix.start()]
            expressions = [e for e in UNESCAPED_COMMA.split(line) if e.strip()]
            all_of = all_of or len(expressions) > 1
            for expression in expressions:
                words = _words(_unslash(expression.replace("\\,", ",")))
                if words is None:
                    # EWIJSON matched its expressions ignoring case (flags "gi").
                    slashed = expression.strip()
                    if not SLASHED.match(slashed):
                        slashed = f"/{slashed.replace(chr(92) + ',', ',')}/i"
                    if _kept_as_regex(slashed, report, regex):
                        continue
                    dropped = True
                    _dropped(report, expression)
                else:
                    spelled = True
                    out += words
            continue
        for key in line.split(","):
            if not key.strip():
                continue
            pattern = _unslash(key.strip()) if SLASHED.match(key.strip()) else None
            if pattern is None and "|" not in key:
                out.append(key)
                continue
            words = _words(pattern if pattern is not None else key.strip())
            if words is None:
                if pattern is not None and _kept_as_regex(key.strip(), report, regex):
                    continue
                dropped = True
                _dropped(report, key.strip())
            else:
                spelled = True
                out += words
    if not (ewi or spelled or dropped) and not (regex and report.regex_cards_pending):
        return keys  # plain keys, as written
    kept = _fit(_unique(out))
    if spelled:
        report.spelled += 1
        if report.example is None:
            report.example = (keys.strip(), ", ".join(kept))
    if ewi:
        report.attributed += 1
    if all_of:
        report.all_of += 1
    has_regex = bool(regex) and report.regex_cards_pending
    if has_regex:
        report.regex_cards += 1
    report.regex_cards_pending = False
    if not kept and not always_on and not has_regex:
        # Dropped keys, or an EWIJSON line with no expression before its attributes: the
        # script's empty pattern matched every text, to place the entry at a set line, which
        # no Campfire card does.
        if ewi:
            report.keyless_ewi += 1
        else:
            report.keyless += 1
    return ",".join(kept)


def _suffix(line: str) -> re.Match[str] | None:
    """EWIJSON's attribute suffix closing ``line``, looked for in its last characters only: a
    search of the whole of a long line of ``#[`` would take time growing with its square."""
    return EWI_SUFFIX.search(line, max(0, len(line) - MAX_SUFFIX_CHARS))


def _attribute_letters(suffix: str) -> set[str]:
    # As the script reads them: a letter, then an optional "=n" (``getAttributes``).
    return {m.group(1) for m in re.finditer(r"([A-Za-z])(?:=+-*\d*)?", suffix[2:-1])}


def _unslash(expression: str) -> str:
    """The pattern of a ``/pattern/flags`` expression, or the expression itself."""
    match = SLASHED.match(expression.strip())
    return match.group(1) if match else expression.strip()


def _kept_as_regex(key: str, report: KeyReport, regex: list[str] | None) -> bool:
    """Keep ``key`` (``/pattern/flags``) as a regular-expression key if RE2 runs it."""
    if regex is None or compile_regex(key) is None or len(regex) >= MAX_REGEX_KEYS:
        return False
    if key not in regex:
        regex.append(key)
    report.regex_cards_pending = True
    report.regex_example = report.regex_example or key
    return True


def _dropped(report: KeyReport, key: str) -> None:
    report.dropped += 1
    report.dropped_example = report.dropped_example or key


def _unique(keys: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for key in keys:
        folded = " ".join(key.split()).casefold()
        if folded and folded not in seen:
            seen.add(folded)
            out.append(key)
    return out


def _fit(keys: list[str]) -> list[str]:
    """As many keys as fit a card's keys (``CARD_KEYS_MAX`` characters together)."""
    out: list[str] = []
    used = -1
    for key in keys:
        if used + 1 + len(key) > CARD_KEYS_MAX:
            break
        out.append(key)
        used += 1 + len(key)
    return out


def _words(pattern: str) -> list[str] | None:
    """The plain spellings a regular expression matches, or None if it is not a short list."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return None
    parser = _Spell(pattern)
    try:
        spellings = parser.alternatives()
        if parser.at < len(pattern):
            raise _NotWords
    except _NotWords:
        return None
    words = _unique([" ".join(s.split()) for s in spellings])
    return words or None


class _Spell:
    """A recursive-descent reader of the regular expressions that only list alternatives."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.at = 0
        self.depth = 0

    def _peek(self) -> str:
        return self.pattern[self.at] if self.at < len(self.pattern) else ""

    def _take(self) -> str:
        char = self._peek()
        if not char:
            raise _NotWords
        self.at += 1
        return char

    def alternatives(self) -> list[str]:
        out = self.sequence()
        while self._peek() == "|":
            self.at += 1
            out = _capped(out + self.sequence())
        return out

    def sequence(self) -> list[str]:
        out = [""]
        while self._peek() not in ("", "|", ")"):
            atom = self.atom()
            if self._peek() == "?":
                self.at += 1
                if self._peek() == "?":  # lazy: matches the same texts
                    self.at += 1
                atom = [*atom, ""]
            if self._peek() in ("*", "+", "{"):
                raise _NotWords
            out = _capped([a + b for a in out for b in atom])
        return out

    def atom(self) -> list[str]:
        char = self._take()
        if char == "(":
            if self._peek() == "?":
                if self.pattern.startswith("?:", self.at):
                    self.at += 2
                else:
                    raise _NotWords  # look-arounds and named groups
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _NotWords
            inner = self.alternatives()
            if self._take() != ")":
                raise _NotWords
            self.depth -= 1
            return inner
        if char == "[":
            return self._set()
        if char == "\\":
            return [self._escaped()]
        if char in ".*+?{}^$)]":
            raise _NotWords
        return [char]

    def _escaped(self) -> str:
        char = self._take()
        if char == "b":
            return ""  # a word boundary: Campfire's keys match whole words anyway
        if char in "sntr":
            return " "
        if char in "BdDwWSvfcxuk" or char.isdigit():
            # Classes, back-references, code points: not words.
            raise _NotWords
        # Any other escaped character is itself to JavaScript (``\y`` is "y"); EWI's
        # documentation prefixes keys with a backslash to hide them from the game's own matching.
        return char

    def _set(self) -> list[str]:
        chars: list[str] = []
        if self._peek() == "^":
            raise _NotWords
        while (char := self._take()) != "]":
            if char == "\\":
                char = self._escaped()
            elif char == "-" and chars and self._peek() != "]":
                raise _NotWords  # a range
            chars.append(char)
        if not chars or len(chars) > MAX_SET:
            raise _NotWords
        return list(dict.fromkeys(chars))


def _capped(spellings: list[str]) -> list[str]:
    if len(spellings) > MAX_SPELLED or any(len(s) > CARD_KEYS_MAX for s in spellings):
        raise _NotWords
    return spellings
