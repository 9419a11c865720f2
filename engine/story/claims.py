"""Player claims stay claims (issue 22, Deliver 6): what a player tells a character about
themselves ("my favourite colour is green", "I prefer tea") is kept as that player's word,
quoted, for that character alone, and never becomes a fact of the world.

**Extraction** is deterministic and narrow. Only an action addressed to a character counts: a
Say naming one (by a character card's keys or an NPC's of the world-state schema), or a Do that
tells, asks or answers one by name. Only short, explicit first-person statements are kept
(``PATTERNS``); each has a *slot* (what it is about: "favourite colour", "preference", "name"),
so a correction ("my favourite colour is blue, actually") replaces the same slot.

**Bounds.** At most ``MAX_PER_CHARACTER`` slots per character on a line of play (a new slot
past it is not kept); at most ``MAX_IN_CONTEXT`` of them, within ``MAX_CONTEXT_CHARS``, go to
the model, and only while that character is in the scene (its keys in the new action or the
newest entries), under the character's own name: one character never sees another's.

**Never facts.** A claim is a row of its own (``CharacterClaim``), read only by the context: it
changes no world state, no inventory, no story card and no progress. The context quotes it as
the player's unverified statement.

**Per turn, so they rewind.** A claim belongs to the action that made it: it counts while that
action is on the story's line. Undo, a branch switch or a save point that leaves the action
leave its claims; Redo brings them back; a retry rewrites the narration, not the player's words,
so the claims stay. Why per turn: a claim is part of the story's record (a player said it,
there); one kept per adventure would survive the undo of the very turn that made it, and the
character would remember words nobody said on this line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.prompt.cards import Card, find_trigger, load_context_cards, parse_keys
from engine.storage.models import ActionType, Adventure
from engine.storage.play_models import CharacterClaim
from engine.story.actions import PlayerAction
from engine.story.line.read import ancestry
from engine.story.world.apply import schema_of

#: Slots kept per character on a line of play.
MAX_PER_CHARACTER = 12
#: Claims given to the model for one character in the scene, and their characters in all.
MAX_IN_CONTEXT = 6
MAX_CONTEXT_CHARS = 900
#: The longest statement kept (a claim is short: a preference, a name, a favourite).
MAX_CLAIM_CHARS = 160
#: Rows kept per character over every line of the adventure (corrections add rows, which
#: undo must be able to bring back): past it, nothing more is kept for that character.
MAX_ROWS_PER_CHARACTER = 4 * MAX_PER_CHARACTER

#: Card types that are characters (AI Dungeon's "character", and what other tools call them).
CHARACTER_TYPES = frozenset({"character", "characters", "npc", "person"})

#: Verbs of a Do that address someone named right after them.
_ADDRESS = re.compile(
    r"\b(?:tell|tells|ask|asks|answer|answers|reply to|replies to|say to|says to|whisper to|"
    r"whispers to|explain to|explains to|admit to|admits to|confess to|confesses to|"
    r"confide in|confides in|assure|assures|remind|reminds|inform|informs)\s+(?:the\s+)?$",
    re.IGNORECASE,
)

#: What a statement says: up to the end of its clause, or to another statement joined to it
#: ("… is green and I prefer tea").
_VALUE = (
    r"(?P<value>[^.,!?;\n\"“”]{1,100}?)"
    r"(?=\s+(?:and|but)\s+(?:i|i'm|i'd|my)\b|[.,!?;\n\"“”]|$)"
)
#: The statements kept, each with how its slot is named (``what``: from the words matched).
PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"\bmy (?P<what>favou?rite [a-z][a-z -]{{0,30}}?) (?:is|are) {_VALUE}", re.I), ""),
    (re.compile(rf"\bmy name is {_VALUE}", re.I), "name"),
    (re.compile(rf"\b(?:call me|i am called|i'm called) {_VALUE}", re.I), "name"),
    (re.compile(rf"\bi (?:really |much |would |'d )?prefer {_VALUE}", re.I), "preference"),
    (re.compile(rf"\bi(?: am|'m) (?:from|originally from) {_VALUE}", re.I), "home"),
    (re.compile(rf"\bi(?: was|'m| am) born (?:in|on) {_VALUE}", re.I), "born"),
    (re.compile(rf"\bi(?: am|'m) allergic to {_VALUE}", re.I), "allergy"),
    (
        re.compile(
            rf"\bmy (?P<what>birthday|age|job|trade|home ?town|sister|brother|mother|father|"
            rf"wife|husband|partner|dog|cat|horse|ship|god|goal|dream) (?:is|was) {_VALUE}",
            re.I,
        ),
        "",
    ),
)


@dataclass(frozen=True, slots=True)
class Statement:
    slot: str
    text: str


@dataclass(frozen=True, slots=True)
class Character:
    """Someone a player can talk to: a character card or a world-state NPC."""

    name: str
    keys: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.name.casefold()[:160]


def statements(text: str) -> list[Statement]:
    """The explicit personal statements in what a player said, in order; one per slot (the
    last wins: a player correcting themselves in one breath)."""
    found: dict[str, tuple[int, Statement]] = {}
    for pattern, slot in PATTERNS:
        for match in pattern.finditer(text):
            value = match["value"].strip(" ,")
            if not value:
                continue
            what = slot or _slot_name(match["what"])
            said = " ".join(match.group(0).split())[:MAX_CLAIM_CHARS]
            start = match.start()
            if what not in found or found[what][0] < start:
                found[what] = (start, Statement(what, said))
    return [statement for _, statement in sorted(found.values(), key=lambda item: item[0])]


def _slot_name(what: str) -> str:
    words = " ".join(what.casefold().split()).replace("favorite", "favourite")
    return words.replace("home town", "hometown")


def addressed(action: PlayerAction, characters: Sequence[Character]) -> Character | None:
    """The character an action speaks to, or None: a Say that names one (the first named), or
    a Do that tells, asks or answers one by name."""
    if action.type not in (ActionType.SAY, ActionType.DO):
        return None
    named: list[tuple[int, Character]] = []
    for character in characters:
        key = find_trigger(character.keys, action.text)
        if key is None:
            continue
        at = action.text.casefold().find(key.casefold())
        if action.type is ActionType.DO and not _ADDRESS.search(action.text[: max(at, 0)]):
            continue
        named.append((at, character))
    return min(named, key=lambda item: item[0])[1] if named else None


def characters_of(adventure: Adventure, cards: Sequence[Card]) -> list[Character]:
    """The adventure's characters: its character cards, then its world-state NPCs."""
    out: list[Character] = []
    for card in cards:
        if card.type.casefold() in CHARACTER_TYPES and card.title.strip():
            out.append(Character(card.title.strip(), card.keys or parse_keys(card.title)))
    schema = schema_of(adventure.stat_schema)
    if schema is not None:
        out.extend(Character(npc.name, npc.keys or (npc.name,)) for npc in schema.npcs)
    seen: set[str] = set()
    return [c for c in out if not (c.key in seen or seen.add(c.key))]


# --- kept with the action ------------------------------------------------------------------------


async def keep_claims(
    session: AsyncSession, adventure: Adventure, actions: Sequence[PlayerAction], node_id: int
) -> int:
    """In the transaction that stores a turn: keep the claims its actions made to characters,
    with the turn's first action node ``node_id``. Returns how many were kept."""
    said = [(action, statements(action.text)) for action in actions if action.author_id]
    said = [(action, found) for action, found in said if found]
    if not said:
        return 0
    assert adventure.id is not None
    characters = characters_of(adventure, await load_context_cards(session, adventure.id))
    kept = 0
    line: set[int] | None = None
    for action, found in said:
        character = addressed(action, characters)
        if character is None:
            continue
        if line is None:
            line = set(await ancestry(session, node_id))
        slots = await _slots_on_line(session, adventure.id, character.key, line)
        if await _rows(session, adventure.id, character.key) >= MAX_ROWS_PER_CHARACTER:
            continue
        for statement in found:
            if statement.slot not in slots and len(slots) >= MAX_PER_CHARACTER:
                continue  # full: a new slot waits for the line to be rewound
            slots.add(statement.slot)
            session.add(
                CharacterClaim(
                    adventure_id=adventure.id,
                    node_id=node_id,
                    author_id=action.author_id,
                    character=character.key,
                    speaker=action.actor[:160],
                    slot=statement.slot[:80],
                    text=statement.text,
                )
            )
            kept += 1
    return kept


async def _rows(session: AsyncSession, adventure_id: int, character: str) -> int:
    return (
        await session.scalar(
            select(func.count())
            .select_from(CharacterClaim)
            .where(
                col(CharacterClaim.adventure_id) == adventure_id,
                col(CharacterClaim.character) == character,
            )
        )
        or 0
    )


async def _slots_on_line(
    session: AsyncSession, adventure_id: int, character: str, line: set[int]
) -> set[str]:
    rows = await session.execute(
        select(col(CharacterClaim.slot), col(CharacterClaim.node_id)).where(
            col(CharacterClaim.adventure_id) == adventure_id,
            col(CharacterClaim.character) == character,
        )
    )
    return {row.slot for row in rows if row.node_id in line}


# --- read for the context -----------------------------------------------------------------------

HEADER = (
    "Players told these characters about themselves. They are the players' own words, "
    "unverified: the character may believe or doubt them, and they change nothing in the world."
)


async def claims_in_scene(
    session: AsyncSession, adventure: Adventure, cards: Sequence[Card], scene: str
) -> str:
    """The context's section: for each character in ``scene`` (its keys in the text), the
    newest of its claims on the story's line, quoted as the players' word; "" when none."""
    if adventure.id is None or adventure.head_node_id is None:
        return ""
    present = [c for c in characters_of(adventure, cards) if find_trigger(c.keys, scene)]
    if not present:
        return ""
    rows = list(
        await session.scalars(
            select(CharacterClaim)
            .where(
                col(CharacterClaim.adventure_id) == adventure.id,
                col(CharacterClaim.character).in_([c.key for c in present]),
            )
            .order_by(col(CharacterClaim.id))
        )
    )
    if not rows:
        return ""
    line = set(await ancestry(session, adventure.head_node_id))
    blocks: list[str] = []
    for character in present:
        room = MAX_CONTEXT_CHARS
        latest: dict[str, CharacterClaim] = {}
        for row in rows:
            if row.character == character.key and row.node_id in line:
                latest.pop(row.slot, None)  # a correction: newest last
                latest[row.slot] = row
        notes = list(latest.values())[-MAX_IN_CONTEXT:]
        lines = []
        for note in reversed(notes):  # newest first, while there is room
            speaker = "The player" if note.speaker == "You" else note.speaker
            quoted = f'- {speaker} told {character.name}: "{note.text}"'
            if len(quoted) + 1 > room:
                break
            room -= len(quoted) + 1
            lines.append(quoted)
        if lines:
            blocks.append(f"{character.name} heard:\n" + "\n".join(reversed(lines)))
    return f"{HEADER}\n" + "\n".join(blocks) if blocks else ""
