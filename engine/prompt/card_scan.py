"""Which story cards a turn's context takes, and why: a card's keys (``engine.prompt.cards``)
with its world-info options (``engine.prompt.lore``), as SillyTavern's World Info runs its
entries (docs.sillytavern.app "World Info"; ``public/scripts/world-info.js``, ``checkWorldInfo``):
secondary keys and their logic, scan depth, probability, a recursive scan through the texts of
the cards that went in, sticky, cooldown and delay, inclusion groups and their scoring.

Pure: the scan texts are built once per depth a turn asks for (``ScanWindow``), the keys were
compiled once per distinct keys and options (``compile_keys``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.prompt.cards import DEFAULT_SCAN_ENTRIES, Card, compile_keys, scan_text
from engine.prompt.regex_keys import find_regex


@dataclass(frozen=True, slots=True)
class CardMatch:
    card: Card
    #: "always on", "trigger: <key>", with what the options added ("…, and secondary key …").
    reason: str
    #: False for a card that fired but lost its probability roll (reported, never sent).
    included: bool = True


class ScanWindow:
    """The story a turn's cards are matched against: the newest entries and the new action,
    as deep as each card scans (its ``scan_depth``, or ``depth``), case-folded or not, each
    text built once per turn however many cards read it."""

    def __init__(
        self,
        entries: Sequence[str],
        action_text: str = "",
        depth: int = DEFAULT_SCAN_ENTRIES,
        *,
        indices: Sequence[int] = (),
        turn: int | None = None,
        starts: Iterable[int] = (),
    ) -> None:
        self.entries = entries
        self.action_text = action_text
        self.depth = depth
        #: Each entry's index in the story line (parallel to ``entries``), and the index of the
        #: entry this turn writes: sticky, cooldown and delay count in them.
        self.indices = indices
        self.turn = turn
        #: The indices at which past turns began (the entry after a narration): the points at
        #: which cards were scanned, replayed for sticky and cooldown.
        self.starts = frozenset(starts)
        self._texts: dict[tuple[int, bool], str] = {}

    @classmethod
    def of(cls, text: str) -> ScanWindow:
        """A window that is ``text`` whatever the depth (tests, scripts' checks)."""
        window = cls((), text, 0)
        window._fixed = True
        return window

    _fixed = False

    def past(self, index: int, depth: int | None, case_sensitive: bool) -> str:
        """The text a card scanned when the line's entry ``index`` was the newest: that entry
        and the ``depth`` before it (as far as this window reaches back)."""
        depth = self.depth if depth is None else depth
        texts = [t for i, t in zip(self.indices, self.entries, strict=False) if i <= index]
        raw = "\n".join(texts[-(depth + 1) :])
        return raw if case_sensitive else raw.casefold()

    def text(self, depth: int | None, case_sensitive: bool) -> str:
        depth = self.depth if depth is None or self._fixed else depth
        key = (depth, case_sensitive)
        if key not in self._texts:
            raw = scan_text(self.entries, self.action_text, depth)
            self._texts[key] = raw if case_sensitive else raw.casefold()
        return self._texts[key]


#: How many times cards' texts are scanned for more cards (SillyTavern's "max recursion
#: steps"; its default, 0, means until nothing new fires, which a bound keeps cheap here).
MAX_RECURSION_STEPS = 5


def match_cards(cards: Iterable[Card], window: str | ScanWindow, seed: str = "") -> list[CardMatch]:
    """The cards that go into the context, in the order given: always-on or triggered, as
    their options allow; see ``scan_cards`` for the ones that fired and lost their roll."""
    return [match for match in scan_cards(cards, window, seed) if match.included]


def scan_cards(cards: Iterable[Card], window: str | ScanWindow, seed: str = "") -> list[CardMatch]:
    """Every card that fired this turn, in the order given, each with why; a card that lost
    its probability roll is among them, not ``included``. ``seed`` names the adventure and the
    turn, so the same turn rolls the same (a retry, an undo and a replay agree).

    A card with no entry text would add nothing, so it never fires; nor a disabled one.
    """
    scan = window if isinstance(window, ScanWindow) else ScanWindow.of(window)
    live = [card for card in cards if card.entry.strip() and not card.lore.disabled]
    fired: dict[int, CardMatch] = {}
    here = _seed_at(seed, scan.turn)
    for i, card in enumerate(live):
        timed = card.lore.sticky or card.lore.cooldown or card.lore.delay
        if timed and scan.turn is not None:
            match = timed_match(card, scan, seed)
            if match is not None:
                fired[i] = match
            continue
        reason = "always on" if card.always_on else _fires(card, scan, "")
        if reason is not None:
            fired[i] = _rolled(card, reason, here)
    settled: set[str] = set()
    _inclusion_groups(fired, set(fired), settled, here, scan, "")
    sources = [m.card for m in fired.values() if m.included and m.card.lore.recurse]
    steps = 0
    while sources and steps < MAX_RECURSION_STEPS:
        # SillyTavern's recursive scan: the text of the cards that just went in is scanned
        # with the story, for cards not yet in that let other cards trigger them.
        steps += 1
        extra = "\n".join(card.entry for card in sources)
        new: set[int] = set()  # the cards this step found
        for i, card in enumerate(live):
            if i in fired or card.always_on or card.lore.exclude_recursion:
                continue
            if _held_back(card, scan, seed):
                continue
            reason = _fires(card, scan, extra)
            if reason is not None:
                fired[i] = _rolled(card, _from_card(card, sources, reason), here)
                new.add(i)
        _inclusion_groups(fired, new, settled, here, scan, extra)
        sources = [fired[i].card for i in sorted(new) if fired[i].included]
        sources = [card for card in sources if card.lore.recurse]
    return [fired[i] for i in sorted(fired)]


def timed_match(card: Card, scan: ScanWindow, seed: str) -> CardMatch | None:
    """The match of a card with a sticky, cooldown or delay (SillyTavern's timed effects,
    counted in story entries as SillyTavern counts chat messages), or None.

    The state is not stored: it is read again from the story line each turn, replaying the
    card at the turns before this one (as far as the window reaches, and at most
    ``sticky + cooldown`` entries back), each with its own probability roll. So an undo, a retry or
    another branch finds the state its own line implies, as everything else of the story.
    """
    lore = card.lore
    turn = scan.turn
    assert turn is not None
    if turn < lore.delay:
        reason = _fires(card, scan, "") if not card.always_on else "always on"
        if reason is None:
            return None
        return CardMatch(card, f"{reason}; delayed until entry {lore.delay}", included=False)
    sticky_until, cooldown_until = _timers(card, scan, seed)
    if turn <= sticky_until:
        return CardMatch(card, f"sticky: stays in through entry {sticky_until}")
    if turn <= cooldown_until:
        reason = _fires(card, scan, "") if not card.always_on else "always on"
        if reason is None:
            return None
        left = cooldown_until - turn + 1
        more = f"{left} more {'entry' if left == 1 else 'entries'}"
        return CardMatch(card, f"{reason}; on cooldown for {more}", included=False)
    reason = "always on" if card.always_on else _fires(card, scan, "")
    return None if reason is None else _rolled(card, reason, _seed_at(seed, turn))


def _timers(card: Card, scan: ScanWindow, seed: str) -> tuple[int, int]:
    """The last entries a timed card stays in through and is on cooldown through (-1: none),
    replayed at the past turns that reach this one."""
    lore = card.lore
    turn = scan.turn
    assert turn is not None
    sticky_until = cooldown_until = -1
    for index in range(max(lore.delay, turn - lore.sticky - lore.cooldown), turn):
        if index <= cooldown_until or index not in scan.starts:
            continue
        if card.always_on or _fires_past(card, scan, index):
            if _roll(_seed_at(seed, index), card) < lore.probability:
                sticky_until = index + lore.sticky
                cooldown_until = sticky_until + lore.cooldown
    return sticky_until, cooldown_until


def _held_back(card: Card, scan: ScanWindow, seed: str) -> bool:
    """Whether a timed card may not fire now (delayed, or on cooldown), so that a recursive
    scan does not bring it in past its timer."""
    lore = card.lore
    if scan.turn is None or not (lore.cooldown or lore.delay):
        return False
    return scan.turn < lore.delay or scan.turn <= _timers(card, scan, seed)[1]


def _fires_past(card: Card, scan: ScanWindow, index: int) -> bool:
    """Whether ``card``'s keys fired when entry ``index`` was the newest."""
    past = ScanWindow.of(scan.past(index, card.lore.scan_depth, True))
    return _fires(card, past, "") is not None


def _inclusion_groups(
    fired: dict[int, CardMatch],
    new: set[int],
    settled: set[str],
    seed: str,
    scan: ScanWindow,
    extra: str,
) -> None:
    """Keep one card of each inclusion group among the ``new`` matches (SillyTavern's
    ``filterByInclusionGroups``, before its probability rolls: a winner that then loses its
    roll leaves the group out): a card with ``group_override`` and the highest order, else
    one drawn by the weights, fixed for the turn. A group that had its card in an earlier
    step of the recursive scan is ``settled``: its new cards stay out.

    Before that choice, where a card of the group asks for ``group_scoring``, the scoring
    cards whose keys matched fewer times (``key_score``, in the window and ``extra``) than
    the group's best drop out (SillyTavern's ``filterGroupsByScoring``, which runs first; a
    card without it stays a candidate whatever its score)."""
    members: dict[str, list[int]] = {}
    for i in sorted(new):
        for group in fired[i].card.lore.groups:
            members.setdefault(group, []).append(i)
    for group, ids in members.items():
        beaten: list[int] = []
        if group in settled:
            losers, winner = ids, None
        else:
            settled.add(group)
            if len(ids) == 1:
                continue
            if any(fired[i].card.lore.group_scoring for i in ids):
                scores = {i: key_score(fired[i].card, scan, extra) for i in ids}
                best = max(scores.values())
                beaten = [i for i in ids if fired[i].card.lore.group_scoring and scores[i] < best]
            left = [fired[i].card for i in ids if i not in beaten]
            winner = left[0] if len(left) == 1 else _group_winner(left, f"{seed}\x00{group}")
            losers = [i for i in ids if fired[i].card is not winner]
        for i in losers:
            match = fired[i]
            if match.included or winner is not None:
                chosen = f"{winner.title} chosen" if winner is not None else "chosen before"
                if i in beaten:
                    chosen += " (most keys matched)"
                fired[i] = CardMatch(
                    match.card,
                    f"{match.reason}; inclusion group {group}: {chosen}",
                    included=False,
                )


def key_score(card: Card, scan: ScanWindow, extra: str) -> int:
    """How many of ``card``'s keys occur in the window (and ``extra``), as SillyTavern's
    ``WorldInfoBuffer.getScore`` counts them for group scoring: each primary key (regular
    expressions too) found, plus the secondary keys found when the logic is AND ANY, or AND
    ALL with every one found; a card with no primary key scores 0."""
    lore = card.lore
    if not card.keys and not lore.regex:
        return 0
    case = bool(lore.case_sensitive)
    whole = lore.whole_words is not False
    text = scan.text(lore.scan_depth, case)
    if extra:
        text = f"{text}\n{extra if case else extra.casefold()}"
    found = 0
    for key in card.keys:
        matcher = compile_keys((key,), case, whole)
        found += matcher is not None and matcher.find(text) is not None
    if lore.regex:
        raw = scan.text(lore.scan_depth, True)
        raw = f"{raw}\n{extra}" if extra else raw
        found += sum(find_regex((key,), raw) is not None for key in lore.regex)
    if not lore.secondary or lore.logic not in ("and_any", "and_all"):
        return found
    present = sum(m is not None and m.find(text) is not None for m in card.secondary)
    if lore.logic == "and_all" and present < len(lore.secondary):
        return found
    return found + present


def _group_winner(cards: Sequence[Card], seed: str) -> Card:
    overriding = [card for card in cards if card.lore.group_override]
    if overriding:
        return max(overriding, key=lambda card: card.lore.order)  # the first of the highest
    total = sum(card.lore.group_weight for card in cards)
    digest = hashlib.blake2b(seed.encode(), digest_size=8).digest()
    point = int.from_bytes(digest, "big") / 2**64 * total
    for card in cards:
        point -= card.lore.group_weight
        if point < 0:
            return card
    return cards[-1]


def _seed_at(seed: str, turn: int | None) -> str:
    return seed if turn is None else f"{seed}:{turn}"


def _fires(card: Card, scan: ScanWindow, extra: str) -> str | None:
    """Why ``card`` fires in the window (and ``extra``, cards' texts in a recursive scan), or
    None: a primary key, then its secondary keys as ``logic`` asks (SillyTavern's
    ``world_info_logic``, evaluated as ``checkWorldInfo`` does)."""
    matcher = card.matcher
    if matcher is None and not card.lore.regex:
        return None
    case = matcher.case_sensitive if matcher else bool(card.lore.case_sensitive)
    text = scan.text(card.lore.scan_depth, case)
    if extra:
        text = f"{text}\n{extra if case else extra.casefold()}"
    key = matcher.find(text) if matcher and text else None
    if key is None and card.lore.regex:
        # Regular-expression keys read the text as written: their flags say about case.
        raw = scan.text(card.lore.scan_depth, True)
        key = find_regex(card.lore.regex, f"{raw}\n{extra}" if extra else raw)
    if key is None:
        return None
    reason = f"trigger: {key}"
    if not card.lore.secondary:
        return reason
    present = [
        (secondary, m is not None and m.find(text) is not None)
        for secondary, m in zip(card.lore.secondary, card.secondary, strict=True)
    ]
    found = [k for k, hit in present if hit]
    missing = [k for k, hit in present if not hit]
    logic = card.lore.logic
    if logic == "and_any" and found:
        return f"{reason}, fired by secondary key {found[0]} (AND ANY)"
    if logic == "not_all" and missing:
        return f"{reason}, secondary key {missing[0]} absent (NOT ALL)"
    if logic == "not_any" and not found:
        return f"{reason}, no secondary key present (NOT ANY)"
    if logic == "and_all" and not missing:
        return f"{reason}, with every secondary key (AND ALL)"
    return None


def _from_card(card: Card, sources: Sequence[Card], reason: str) -> str:
    """``reason``, naming the card whose text triggered this one, if one alone did."""
    matcher = card.matcher
    for source in sources:
        if (matcher and matcher.find(matcher.prepare(source.entry)) is not None) or (
            card.lore.regex and find_regex(card.lore.regex, source.entry) is not None
        ):
            return f"{reason} (in the text of {source.title or 'another card'})"
    return reason


def _rolled(card: Card, reason: str, seed: str) -> CardMatch:
    """The match, after the card's probability roll (SillyTavern rolls after a card fires)."""
    chance = card.lore.probability
    if chance >= 100:
        return CardMatch(card, reason)
    if _roll(seed, card) < chance:
        return CardMatch(card, f"{reason}; probability {chance}%: this turn")
    return CardMatch(card, f"{reason}; probability {chance}%: not this turn", included=False)


def _roll(seed: str, card: Card) -> float:
    """A number in [0, 100) fixed by the turn and the card: the same turn rolls the same."""
    who = str(card.id) if card.id is not None else f"{card.title}\x00{card.entry}"
    digest = hashlib.blake2b(f"{seed}\x00{who}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 * 100
