"""Where a turn's story cards go in the prompt: SillyTavern's insertion positions for its World
Info entries (docs.sillytavern.app "World Info", "Insertion Position"; ``world_info_position``
in ``public/scripts/world-info.js``), on Campfire's layout (``engine.turns.context``).

A card's ``position`` (``engine.prompt.lore``) says where it goes:

- unset: where Campfire always put cards: always-on ones before the story (the same every
  turn, so a provider's prompt cache keeps them), the triggered ones after it;
- ``before`` / ``after``: SillyTavern's "before" and "after the character's definitions", here
  with the always-on cards before the story or with the triggered ones after it;
- ``an_top`` / ``an_bottom``: just before or just after the author's note, wherever the note
  stands (the system message, a depth in the story, beside the action), as SillyTavern wraps
  its note with them; with no note they stand where the note would;
- ``depth``: inside the story, ``depth`` entries from its end, counted as the author's note's
  depth is (``engine.prompt.sections.note_place``: SillyTavern's "@ D", 0 after the newest
  entry, the new action the newest). SillyTavern sends each depth's entries as a message of
  their own; here they are one "World Lore:" block among the story's entries, in their
  insertion order, after the author's note when both stand at one depth (SillyTavern orders a
  depth's prompts by their names, its note's first).

Every card, wherever it goes, is paid from the one card budget (as SillyTavern's World Info
budget covers all its positions): always-on cards claim it first, then the others by order.

Pure: no database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.prompt.card_scan import CardMatch, ScanWindow, scan_cards
from engine.prompt.cards import Card
from engine.prompt.report import ItemReport
from engine.prompt.sections import HEADINGS, Section, first_words, note_place
from engine.prompt.tokens import count_tokens

#: The places inside the author's note: their cards join its text, with no heading of their own.
_NOTE_PLACES = ("an_top", "an_bottom")


def place_of(card: Card) -> str:
    """The card's place: ``before``, ``after``, ``an_top``, ``an_bottom`` or ``depth:N``."""
    position = card.lore.position
    if position is None:
        return "before" if card.always_on else "after"
    return f"depth:{card.lore.depth}" if position == "depth" else position


@dataclass
class PlacedCards:
    """The turn's card sections, by where they go."""

    #: Before the story (``always_cards``): None when no card goes there.
    before: Section | None = None
    #: After the story (``story_cards``): None only when the adventure has no cards.
    after: Section | None = None
    #: Just before and after the author's note.
    note_top: Section | None = None
    note_bottom: Section | None = None
    #: In the story, by depth (deepest first).
    depths: list[tuple[int, Section]] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        placed = [self.before, self.after, self.note_top, self.note_bottom]
        placed += [section for _, section in self.depths]
        return sum(section.tokens for section in placed if section is not None)


def place_cards(
    cards: Sequence[Card], window: str | ScanWindow, cap: int, share: float, seed: str = ""
) -> PlacedCards:
    """The story cards the recent story calls for, within ``cap`` tokens (``share`` of the room
    left, named in the reason a card is left out), each in the section its place says. ``seed``
    fixes the turn's probability rolls (``engine.prompt.card_scan.scan_cards``).

    As SillyTavern spends its World Info budget, always-on cards claim it first, then the
    others by their insertion order, highest first; what fits goes in by insertion order,
    lowest first (a higher order is nearer the story's end), then in the cards' order, which
    is stable across turns (for prefix caching). A card placed by its options says where in
    its reason ("…; at depth 2").
    """
    if not cards:
        return PlacedCards()
    fired = scan_cards(cards, window, seed)
    order = sorted(range(len(fired)), key=lambda i: (fired[i].card.lore.order, i))
    matches = [fired[i] for i in order]
    ranked = sorted(
        range(len(matches)),
        key=lambda i: (not matches[i].card.always_on, -matches[i].card.lore.order, i),
    )
    heading = count_tokens(HEADINGS["story_cards"])
    over = f"over the {round(share * 100)}% card budget"
    used: dict[str, int] = {}  # by place: each section pays for its own heading
    items: list[ItemReport | None] = [None] * len(matches)
    for i in ranked:
        match = matches[i]
        place = place_of(match.card)
        cost = count_tokens(match.card.entry.strip())
        # The author's note's cards join its text; the others go under "World Lore:".
        headed = place not in _NOTE_PLACES and place not in used
        extra = cost + (heading if headed else 0)
        fits = match.included and sum(used.values()) + extra <= cap
        if fits:
            used[place] = used.get(place, 0) + extra
        reason = match.reason
        if match.card.lore.place is not None:
            reason += f"; {match.card.lore.place}"
        items[i] = ItemReport(
            label=match.card.title or first_words(match.card.entry),
            tokens=cost,
            included=fits,
            reason=reason if fits or not match.included else f"{over} ({reason})",
        )
    reported = [item for item in items if item is not None]
    pairs = list(zip(matches, reported, strict=True))

    def section(place: str) -> Section:
        mine = [(m, item) for m, item in pairs if place_of(m.card) == place]
        body = "\n".join(m.card.entry.strip() for m, item in mine if item.included)
        included = sum(item.included for _, item in mine)
        rolled = sum(not m.included for m, _ in mine)
        key, title, reason = _describe(place, mine, cards)
        if rolled:
            reason += f"; {rolled} not this turn by chance"
        if included < len(mine) - rolled:
            reason += f"; {len(mine) - rolled - included} left out"
        headed = place not in _NOTE_PLACES and included
        text = f"{HEADINGS['story_cards']}\n{body}" if headed else body if included else ""
        return Section(key, title, text, used.get(place, 0), reason, items=[i for _, i in mine])

    live = [card for card in cards if card.entry.strip() and not card.lore.disabled]
    fired_places = {place_of(m.card) for m in matches}
    depths = sorted(
        (int(place.split(":")[1]) for place in fired_places if place.startswith("depth:")),
        reverse=True,
    )
    return PlacedCards(
        before=section("before") if any(place_of(c) == "before" for c in live) else None,
        after=section("after"),
        note_top=section("an_top") if "an_top" in fired_places else None,
        note_bottom=section("an_bottom") if "an_bottom" in fired_places else None,
        depths=[(depth, section(f"depth:{depth}")) for depth in depths],
    )


def _describe(
    place: str, mine: Sequence[tuple[CardMatch, ItemReport]], cards: Sequence[Card]
) -> tuple[str, str, str]:
    """A section's key, title and reason; the two of Campfire's own places say what they
    always said unless a card was placed there."""
    n = len(mine)
    always = sum(1 for m, _ in mine if m.card.always_on)
    if place == "before":
        reason = f"{n} always on, the same every turn: before the story"
        if always < n:
            reason = f"{n} before the story ({always} always on, {n - always} placed there)"
        return "always_cards", "Always-on cards", reason
    if place == "after":
        keyed = sum(not card.always_on and place_of(card) == "after" for card in cards)
        reason = f"{n - always} of {keyed} cards triggered"
        if always:
            reason += f", {always} always on placed after the story"
        return "story_cards", "Story cards", reason
    if place in _NOTE_PLACES:
        where = "top" if place == "an_top" else "bottom"
        return f"note_cards_{where}", f"Cards in the author's note ({where})", f"{n} placed there"
    depth = place.split(":")[1]
    return f"depth_cards_{depth}", f"Cards at depth {depth}", f"{n} placed there"


@dataclass
class Layout:
    """Where the author's note and the placed cards stand this turn, each list in the order
    sent: the note's own cards around it, then cards at a depth the note shares."""

    system: list[Section] = field(default_factory=list)  # closing the system message
    #: In the story, before its last ``n`` entries: ``(n, section)``.
    in_story: list[tuple[int, Section]] = field(default_factory=list)
    before_action: list[Section] = field(default_factory=list)
    after_action: list[Section] = field(default_factory=list)

    def put(self, place: str, into: int, sections: Sequence[Section]) -> None:
        if place == "system":
            self.system.extend(sections)
        elif place == "story":
            self.in_story.extend((into, section) for section in sections)
        elif place == "before_action":
            self.before_action.extend(sections)
        else:
            self.after_action.extend(sections)


def lay_out(
    placed: PlacedCards,
    note: Section | None,
    *,
    note_depth: int | None,
    from_script: bool,
    action: bool,
    story: bool,
) -> Layout:
    """Where ``note`` (the author's note, if any) and the cards placed in it or at a depth go,
    each section's reason saying where; ``story``: whether the story has an entry yet (a depth
    in an empty story is after it)."""
    layout = Layout()

    def where(depth: int | None, script: bool) -> tuple[str, int, str]:
        place, into, why = note_place(depth, script, action)
        if place == "story" and not story:
            place, why = "before_action", why + " (the story has none yet: after it)"
        return place, into, why

    place, into, why = where(note_depth, from_script)
    if note is not None:
        note.reason = why
    around = [s for s in (placed.note_top, placed.note_bottom) if s is not None]
    for section in around:
        section.reason += f", with the author's note: {why}"
    top, bottom = placed.note_top, placed.note_bottom
    layout.put(place, into, [s for s in (top, note, bottom) if s is not None])
    for depth, section in placed.depths:
        place, into, why = where(depth, False)
        section.reason += f": {why}"
        layout.put(place, into, [section])
    return layout


def insert_at_depths(texts: Sequence[str], inserts: Sequence[tuple[int, str]]) -> list[str]:
    """``texts`` (the story's entries, oldest first) with each ``(n, text)`` put before the
    last ``n`` of them (before the first when there are fewer), several at one place in the
    order given; of those past the first, the deeper first."""
    at = sorted(
        (max(0, len(texts) - into), -into, i, text)
        for i, (into, text) in enumerate(inserts)
        if text
    )
    out: list[str] = []
    done = 0
    for position, _, _, text in at:
        out.extend(texts[done:position])
        done = max(done, position)
        out.append(text)
    out.extend(texts[done:])
    return out
