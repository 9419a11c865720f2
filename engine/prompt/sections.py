"""The context's sections as text: each rendered under its heading with what it costs in
tokens and why it went in, for ``engine.turns.context`` to place (and Insights to report).

Pure functions of their inputs: no database, no budget of the whole (the engine's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.prompt.held_block import BlockPart, LeftOut, instruction, ordered
from engine.prompt.inputs import ContextInputs, HistoryEntry, Retrieved
from engine.prompt.report import ItemReport, SectionReport
from engine.prompt.tokens import count_tokens

#: The story's window starts at a multiple of this many entries (``engine.turns.context``),
#: so it keeps its start, and the prompt its prefix, for that many turns.
ANCHOR_STEP = 8
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


def note_place(depth: int | None, from_script: bool, action: bool) -> tuple[str, int, str]:
    """Where the author's note goes, and why (for Insights): ``("system", 0, …)``, closing the
    system message; ``("before_action", 0, …)`` or ``("after_action", 0, …)``, beside the new
    action; ``("story", n, …)``, in the story before its last ``n`` entries.

    ``depth`` counts entries from the end of the story, the new action (when there is one) the
    newest, as SillyTavern counts messages ("@ Depth": 0 after the last one,
    https://docs.sillytavern.app/usage/core-concepts/authors-note/) and AI Dungeon puts its note
    3 entries from the end. None keeps the layout's place: a note the adventure sets, the same
    every turn, closes the system message, where the provider's prompt cache keeps it; a note a
    script sets may change every turn, so it goes just before the action. A depth moves the
    note with the story each turn, so the cached prefix ends where it stood the turn before.
    """
    if depth is None:
        if from_script:
            return "before_action", 0, "after the story, before the action (a script may change it)"
        return "system", 0, "in the system message (the same every turn)"
    into = depth - 1 if action else depth
    where = f"depth {depth}: "
    if into < 0:
        return "after_action", 0, where + "after the new action"
    if into == 0:
        return "before_action", 0, where + "after the story, just before the new action"
    entries = "entry" if into == 1 else "entries"
    return "story", into, where + f"in the story, before its last {into} {entries}"


def history_section(
    inputs: ContextInputs,
    kept: list[tuple[HistoryEntry, str, int]],
    text: str,
    used: int,
    truncated: bool,
    over: bool,
    capped: bool,
    cap: int,
) -> Section:
    """The story's section with its report: which entries went in (``kept``, oldest first, with
    their text and cost), which were left out, and why: the entry ``cap``, or the window's start
    (it moves ``ANCHOR_STEP`` entries at a time)."""
    entries = [entry for entry in inputs.history if entry.text.strip()]
    # Blank entries (an opening a scenario left empty, a narration a script hid with
    # whitespace) are not story: none is "left out", nor counted as an entry.
    first_kept = kept[0][0].index if kept else None
    blank = [entry.index for entry in inputs.history if not entry.text.strip()]
    blank_older = sum(1 for index in blank if first_kept is None or index < first_kept)
    if inputs.line_length is not None:
        # Entries of a line are numbered from 0, so the oldest one kept has this many
        # before it.
        total = inputs.line_length - len(blank)
        older = (first_kept if first_kept is not None else inputs.line_length) - blank_older
    else:
        total = len(entries)
        older = len(entries) - len(kept)
    items: list[ItemReport] = []
    whole = [] if truncated else kept  # a truncated entry is the only one kept
    if whole:
        first, last = whole[0][0].index, whole[-1][0].index
        span = f"entry {first}" if first == last else f"entries {first}–{last}"
        items.append(
            ItemReport(
                label=f"{entries_label(len(whole))} ({span})",
                tokens=sum(cost for _, _, cost in whole),
                included=True,
                reason="kept though over the budget" if over else "newest first",
            )
        )
    if truncated:
        entry, _, cost = kept[-1]
        items.append(
            ItemReport(f"entry {entry.index}", cost, included=True, reason="truncated to fit")
        )
    if older:
        if capped:
            why = f"past the {cap}-entry cap"
        elif kept and kept[0][0].index % ANCHOR_STEP == 0:
            why = f"no room left, or before the window's start (it moves {ANCHOR_STEP} at a time)"
        else:
            why = "no room left"
        items.append(
            ItemReport(
                f"{older} older {'entry' if older == 1 else 'entries'}",
                0,
                included=False,
                reason=why,
            )
        )
    return Section(
        "history",
        "Recent story",
        text,
        used + (count_tokens(HEADINGS["history"]) if text else 0),
        f"{len(kept)} of {total} entries, newest first",
        items=items,
        truncated=truncated,
    )


def block_section(parts: Sequence[BlockPart], left_out: Sequence[LeftOut] = ()) -> Section | None:
    """The instruction as the context's ``held_block`` section, reporting each part asked for
    and each left out (with what it would have cost); None when the turn asks for none and
    leaves none out."""
    parts = ordered(parts)
    if not parts and not left_out:
        return None
    text = instruction(parts)
    items = [
        ItemReport(part.title, count_tokens(part.rule), True, "read by the engine")
        for part in parts
    ]
    tokens = count_tokens(text) if text else 0
    for gone in left_out:
        # What it would have cost: the instruction with it, less the one sent.
        cost = count_tokens(instruction([*parts, gone.part])) - tokens
        items.append(ItemReport(gone.part.title, cost, False, gone.reason))
    keys = ", ".join(part.key for part in parts)
    reason = f"one block for: {keys}" if parts else "nothing asked for this turn"
    return Section("held_block", "Held-back block", text, tokens, reason, items=items)
