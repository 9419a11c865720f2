"""The context's sections as text: each rendered under its heading with what it costs in
tokens and why it went in, for ``engine.turns.context`` to place (and Insights to report).

Pure functions of their inputs: no database, no budget of the whole (the engine's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.prompt.inputs import Retrieved
from engine.prompt.report import ItemReport, SectionReport
from engine.prompt.tokens import count_tokens

#: Below this many words the length hint is left out.
MIN_HINT_WORDS = 40

#: Headings of the sections that have one, as the model reads them.
HEADINGS = {
    "party": "Party:",
    "story_summary": "Story Summary:",
    "memories": "Memories:",
    "knowledge": "Knowledge:",
    "story_cards": "World Lore:",
    "world_state": "World State:",
    "history": "Recent Story:",
}


@dataclass
class Section:
    """A rendered section, before it is placed."""

    key: str
    title: str
    text: str
    tokens: int
    reason: str = "always included"
    items: list[ItemReport] = field(default_factory=list)
    truncated: bool = False

    def report(self) -> SectionReport:
        return SectionReport(
            key=self.key,
            title=self.title,
            tokens=self.tokens,
            reason=self.reason,
            items=self.items,
            truncated=self.truncated,
        )


def block(key: str, title: str, body: str) -> Section | None:
    """A one-text section under its heading (if it has one); None when empty."""
    body = body.strip()
    if not body:
        return None
    heading = HEADINGS.get(key)
    text = f"{heading}\n{body}" if heading else body
    return Section(key, title, text, count_tokens(text))


def listed(
    key: str,
    title: str,
    chunks: Sequence[Retrieved],
    budget: int | None,
    note: str = "",
    *,
    noun: str = "",
) -> Section | None:
    """Memories, knowledge or the party: one line each under the heading; ``budget`` caps the
    tokens, and what does not fit is reported as left out.

    ``note`` replaces the section's reason in the report; with a note and nothing retrieved the
    section costs nothing but still tells Insights why (retrieval may rightly find nothing).
    ``noun`` counts what went in against what there was ("2 of 3 characters").
    """
    if not chunks:
        return Section(key, title, "", 0, note) if note else None
    heading = count_tokens(HEADINGS[key])
    used = heading
    lines: list[str] = []
    items: list[ItemReport] = []
    for label, text, reason in chunks:
        text = text.strip()
        if not text:
            continue
        cost = count_tokens(text)
        fits = budget is None or used + cost <= budget
        if fits:
            used += cost
            lines.append(text)
        items.append(
            ItemReport(
                label=label or first_words(text),
                tokens=cost,
                included=fits,
                reason=reason if fits else f"over the {title.lower()} budget",
            )
        )
    if not lines:
        if not items:
            return None
        return Section(key, title, "", 0, "nothing fitted its budget", items=items)
    text = HEADINGS[key] + "\n" + "\n".join(lines)
    what = note or (f"{len(lines)} of {len(items)} {noun}" if noun else f"{len(lines)} retrieved")
    if budget is not None:
        what += f", within its own budget of {budget} tokens"
    return Section(key, title, text, used, what, items=items)


def entries_label(n: int) -> str:
    return f"{n} newest {'entry' if n == 1 else 'entries'}"


def first_words(text: str, n: int = 6) -> str:
    words = text.split()
    return " ".join(words[:n]) + ("…" if len(words) > n else "")


def party(characters: Sequence[tuple[str, str]], budget: int) -> Section | None:
    """The players' characters, one line each ("Ann: a ranger from the north."), in the order
    they were made, while they fit ``budget``."""
    lines = [(name, f"{name}: {about}" if about.strip() else name) for name, about in characters]
    chunks = [(name, line, "a player's character") for name, line in lines]
    return listed("party", "Party", chunks, budget, noun="characters")


def output_words(max_tokens: int) -> int | None:
    """The reply's length ceiling in words, or None when it would be under 40 words."""
    words = int((max_tokens - 50) * 0.75 * 0.90)
    return words if words >= MIN_HINT_WORDS else None


def output_hint(words: int) -> str:
    # A ceiling, never a target: phrased as a budget it made replies longer (DESIGN.md §3).
    # The sentence before it is what the seeds found works: a model told only the ceiling
    # writes up to it; told that a turn is usually much shorter, it writes what the moment needs.
    return (
        "Write only as much as the moment needs; a typical turn is much shorter. "
        f"Keep your reply under {words} words."
    )


def authors_note_line(note: str) -> str:
    return f"[Author's note: {note}]"
