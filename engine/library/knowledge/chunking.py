"""Cutting an imported file into passages: deterministic, heading-aware, no overlap.

A Markdown file is first cut at its ATX headings (``#`` to ``######``, not inside fenced code),
each section knowing the headings above it ("Setting › The Harbour"); a plain text file is one
section. A section that fits in ``MAX_TOKENS`` is one passage. A longer one is cut at its
paragraphs into parts of about equal size (a paragraph too long on its own at its sentences,
a sentence too long at a token count), so no part is a sliver. Then a passage under
``MIN_TOKENS`` (a heading with one line under it) is joined to the next one, or the last to the
one before, while the two fit in ``MAX_TOKENS``. Only a whole file under ``MIN_TOKENS`` makes a
shorter passage.

The same text always gives the same passages: no randomness, no dependence on anything but the
text (tokens counted with cl100k, ``engine.prompt.tokens``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from engine.prompt.tokens import count_tokens, encoding

MIN_TOKENS = 60
MAX_TOKENS = 800
#: Parts are packed to a little under the maximum: paragraphs are counted apart and joined,
#: and a join may cost a token the parts' counts did not include.
_PACK_LIMIT = MAX_TOKENS - 24
#: What a join between two paragraphs is counted as while packing.
_JOIN_TOKENS = 1

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+")

HEADING_SEPARATOR = " › "


@dataclass(frozen=True, slots=True)
class Chunk:
    #: The headings above the passage, outermost first, joined with " › " ("" for none).
    heading: str
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class _Section:
    heading: str
    text: str


def is_markdown(filename: str) -> bool:
    return filename.lower().endswith((".md", ".markdown"))


def chunk_text(text: str, *, markdown: bool) -> list[Chunk]:
    """The passages of ``text``, in order; none for a text of only white space."""
    sections = _markdown_sections(text) if markdown else [_Section("", text.strip())]
    parts: list[Chunk] = []
    for section in sections:
        if section.text:
            parts += _split(section)
    return _joined_small(parts)


def _markdown_sections(text: str) -> list[_Section]:
    """The file cut before each heading; each section keeps its heading line."""
    sections: list[_Section] = []
    path: list[tuple[int, str]] = []  # (level, title) of the headings above
    lines: list[str] = []
    fence: str | None = None

    def close() -> None:
        body = "\n".join(lines).strip()
        if body:
            sections.append(_Section(HEADING_SEPARATOR.join(t for _, t in path), body))
        lines.clear()

    for line in text.split("\n"):
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            lines.append(line)
            continue
        if match := _FENCE.match(line):
            fence = match.group(1)[:3]
            lines.append(line)
            continue
        if match := _HEADING.match(line):
            close()
            level = len(match.group(1))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, match.group(2).strip()))
        lines.append(line)
    close()
    return sections


def _split(section: _Section) -> list[Chunk]:
    """A section as one passage, or cut into parts of about equal size."""
    tokens = count_tokens(section.text)
    if tokens <= MAX_TOKENS:
        return [Chunk(section.heading, section.text, tokens)]
    units = [u for p in _PARAGRAPH_BREAK.split(section.text) for u in _units(p.strip()) if u]
    costs = [count_tokens(u) for u in units]
    total = sum(costs) + _JOIN_TOKENS * (len(units) - 1)
    target = total / math.ceil(total / _PACK_LIMIT)
    parts: list[list[str]] = [[]]
    size = 0
    for unit, cost in zip(units, costs, strict=True):
        if parts[-1] and (size + _JOIN_TOKENS + cost > _PACK_LIMIT or size >= target):
            parts.append([])
            size = 0
        size += cost + (_JOIN_TOKENS if parts[-1] else 0)
        parts[-1].append(unit)
    out = []
    for part in parts:
        text = "\n\n".join(part)
        out.append(Chunk(section.heading, text, count_tokens(text)))
    return out


def _units(paragraph: str) -> list[str]:
    """A paragraph as pieces of at most ``_PACK_LIMIT`` tokens: itself, its sentences, or
    windows of tokens for a sentence longer than that."""
    if count_tokens(paragraph) <= _PACK_LIMIT:
        return [paragraph]
    pieces: list[str] = []
    for sentence in _SENTENCE_END.split(paragraph):
        sentence = sentence.strip()
        if not sentence:
            continue
        if count_tokens(sentence) <= _PACK_LIMIT:
            pieces.append(sentence)
            continue
        ids = encoding().encode(sentence, disallowed_special=())
        # Windows of about equal size, each within the limit.
        step = math.ceil(len(ids) / math.ceil(len(ids) / _PACK_LIMIT))
        pieces += [encoding().decode(ids[i : i + step]).strip() for i in range(0, len(ids), step)]
    # The packing puts the sentences back together, into parts of about equal size.
    return pieces


def _joined_small(parts: list[Chunk]) -> list[Chunk]:
    """Passages under ``MIN_TOKENS`` joined to the next one (the last to the one before) while
    the two fit in ``MAX_TOKENS``."""
    out: list[Chunk] = []
    carry: Chunk | None = None
    for part in parts:
        if carry is not None:
            joined = _join(carry, part)
            if joined.tokens <= MAX_TOKENS:
                part = joined
            else:
                out.append(carry)
        carry = None
        if part.tokens < MIN_TOKENS:
            carry = part
        else:
            out.append(part)
    if carry is not None:
        if out and (joined := _join(out[-1], carry)).tokens <= MAX_TOKENS:
            out[-1] = joined
        else:
            out.append(carry)
    return out


def _join(first: Chunk, second: Chunk) -> Chunk:
    text = first.text + "\n\n" + second.text
    return Chunk(_common_heading(first.heading, second.heading), text, count_tokens(text))


def _common_heading(first: str, second: str) -> str:
    """The headings both passages are under ("Setting › Docks" and "Setting › Market":
    "Setting"); with none in common, the first's (or the second's, the first having none)."""
    a, b = first.split(HEADING_SEPARATOR), second.split(HEADING_SEPARATOR)
    common = []
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common.append(x)
    return HEADING_SEPARATOR.join(common) or first or second
