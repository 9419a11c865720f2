"""Character cards read as scenarios, and scenarios written as cards.

The versions, by their specs:

- V1 (TavernAI): the fields at the top of the file: ``name``, ``description``,
  ``personality``, ``scenario``, ``first_mes``, ``mes_example`` (the older Pygmalion names
  ``char_name``, ``char_persona``, ``world_scenario``, ``char_greeting``, ``example_dialogue``
  are the same fields).
- V2 (github.com/malfoyslastname/character-card-spec-v2, spec_v2.md): ``{"spec":
  "chara_card_v2", "spec_version": "2.0", "data": {the V1 fields, creator_notes,
  system_prompt, post_history_instructions, alternate_greetings, character_book, tags,
  creator, character_version, extensions}}``.
- V3 (github.com/kwaroran/character-card-spec-v3, SPEC_V3.md): ``"chara_card_v3"``, ``"3.0"``,
  the V2 fields with ``nickname``, ``creator_notes_multilingual``, ``group_only_greetings``,
  ``source``, ``assets`` and dates.

A card is written for a chat in which the model plays the character; Campfire's model narrates
a story. So the character becomes the scenario's always-on story cards (its description, then
its personality), its ``scenario`` the plot essentials, ``first_mes`` the opening and every
alternate greeting another opening to choose at /start (V3's group-only greetings only in a
server), its ``character_book`` story cards through the world-info mapping
(``lorebooks.read_character_book``), SillyTavern's character's note
(``extensions.depth_prompt``) the author's note, and the creator's notes the scenario's
description. What instructs a chat model (``system_prompt``, ``post_history_instructions``) and
the example dialogue are left out, named in the preview. ``{{char}}`` and ``{{user}}``:
``engine.library.formats.macros``.
"""

from __future__ import annotations

from typing import Any

from engine.library.formats import lorebooks
from engine.library.formats.draft import (
    DESCRIPTION_MAX,
    TAG_MAX_CHARS,
    TAGS_MAX,
    ImportedCard,
    Opening,
    ScenarioDraft,
)
from engine.library.formats.lorebook_options import character_book_options, regex_keys
from engine.library.formats.macros import name_char, uses_user
from engine.library.reading.fields import Fields
from engine.prompt.lore import DEFAULT_ORDER
from engine.story.steering.cards import CARD_ENTRY_MAX
from engine.story.steering.text import TEXT_MAX_CHARS

V1 = "Character Card V1"
V2 = "Character Card V2"
V3 = "Character Card V3"
VERSIONS = frozenset({V1, V2, V3})
SPEC_V2 = "chara_card_v2"
SPEC_V3 = "chara_card_v3"
#: SillyTavern's default depth for a character's note (its "@ depth" field's default).
NOTE_DEPTH = 4
PERSONALITY = "'s personality: "
_V1_ALIASES = {
    "name": ("name", "char_name"),
    "description": ("description", "char_persona"),
    "scenario": ("scenario", "world_scenario"),
    "first_mes": ("first_mes", "char_greeting"),
    "mes_example": ("mes_example", "example_dialogue"),
}


def card_version(raw: dict[str, Any]) -> str | None:
    """Which card the object is (``V1``, ``V2``, ``V3``), or None for none."""
    spec = raw.get("spec")
    if spec == SPEC_V3:
        return V3
    data = raw.get("data")
    if spec == SPEC_V2 or (
        isinstance(data, dict)
        and "name" in data
        and ("first_mes" in data or "character_book" in data)
    ):
        return V2
    if isinstance(spec, str) and spec.startswith("chara_card"):
        # A later version (the V3 spec: read what is known, never refuse it for its number).
        return V3
    if any(k in raw for k in _V1_ALIASES["first_mes"]) and any(
        k in raw for k in _V1_ALIASES["name"]
    ):
        return V1
    return None


def read_card(
    raw: dict[str, Any], version: str, *, title: str, warnings: list[str]
) -> ScenarioDraft:
    """A card of any version as a scenario (nothing written)."""
    top = Fields(raw, "")
    data = top if version == V1 else (top.obj("data") or top)

    def field(name: str) -> str:
        return data.text(*_V1_ALIASES.get(name, (name,)))

    name = " ".join(field("name").split()) or title
    # V3: {{char}} is the nickname when there is one.
    called = " ".join(data.text("nickname").split()) or name

    def text(value: str) -> str:
        return name_char(value, called).strip()

    draft = ScenarioDraft(
        title=name,
        description=_notes(data, warnings),
        tags=_tags(data.words("tags"), warnings),
        plot_essentials=text(field("scenario")),
        prompt=text(field("first_mes")),
    )
    draft.cards = _character_cards(
        name, text(field("description")), text(data.text("personality")), called
    )
    if len(draft.plot_essentials) > TEXT_MAX_CHARS:
        # Too long for plot essentials: the same text as always-on cards instead.
        draft.cards += _parts(f"{name}: scenario", draft.plot_essentials, "plot")
        draft.plot_essentials = ""
    greetings = [text(g) for g in data.words("alternate_greetings") if g.strip()]
    draft.openings = [Opening(g) for g in greetings]
    draft.openings += [
        Opening(text(g), group_only=True) for g in data.words("group_only_greetings") if g.strip()
    ]
    if not draft.prompt and draft.openings:
        draft.prompt = draft.openings.pop(0).text
    extensions = data.obj("extensions")
    note = extensions.obj("depth_prompt") if extensions is not None else None
    if note is not None:
        draft.authors_note = text(note.text("prompt"))
    book = data.obj("character_book")
    if book is not None:
        cards = lorebooks.read_character_book(book.raw, title=name, warnings=warnings).cards
        for card in cards:
            card.title, card.keys, card.entry = (
                text(card.title),
                text(card.keys),
                text(card.entry),
            )
        draft.cards += cards
    _left_out(data, warnings)
    if any(uses_user(t) for t in _texts(draft)):
        warnings.append(
            "{{user}} is the player: “you” in a DM; in a server, /start asks the host for "
            "their character's name."
        )
    return draft


def _texts(draft: ScenarioDraft) -> list[str]:
    cards = [part for c in draft.cards for part in (c.title, c.keys, c.entry)]
    openings = [o.text for o in draft.openings]
    return [draft.prompt, draft.plot_essentials, draft.authors_note, *openings, *cards]


def _character_cards(
    name: str, description: str, personality: str, called: str
) -> list[ImportedCard]:
    """The character as always-on cards (SillyTavern sends both fields with every message,
    the personality as "{{char}}'s personality: …", its default story string's words)."""
    text = "\n\n".join(
        part for part in (description, personality and f"{name}{PERSONALITY}{personality}") if part
    )
    cards = _parts(name, text, "character")
    for card in cards:
        card.keys = ",".join(dict.fromkeys((name, called)))
    return cards


def _parts(title: str, text: str, kind: str) -> list[ImportedCard]:
    """``text`` as cards of at most a card's entry each, cut between paragraphs (or lines, or
    words) and titled ``title``, ``title (2)``, …"""
    chunks: list[str] = []
    rest = text.strip()
    while rest:
        if len(rest) <= CARD_ENTRY_MAX:
            chunks.append(rest)
            break
        window = rest[:CARD_ENTRY_MAX]
        # The last paragraph break in the second half of the window, else line, else word.
        cuts = (window.rfind(mark) for mark in ("\n\n", "\n", " "))
        cut = next((c for c in cuts if c > CARD_ENTRY_MAX // 2), CARD_ENTRY_MAX)
        chunks.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    return [
        ImportedCard(
            title=title if n == 1 else f"{title} ({n})", entry=chunk, type=kind, always_on=True
        )
        for n, chunk in enumerate(chunks, start=1)
    ]


def _notes(data: Fields, warnings: list[str]) -> str:
    """The creator's notes (V3: the English ones of several languages), kept as the
    scenario's description; cut at its cap, with a warning, rather than refuse the card."""
    notes = data.text("creator_notes").strip()
    languages = data.mapping("creator_notes_multilingual")
    if isinstance(languages.get("en"), str):
        notes = languages["en"].strip()
    if len(notes) > DESCRIPTION_MAX:
        warnings.append(
            f"The creator's notes have {len(notes):,} characters; the first {DESCRIPTION_MAX:,} "
            "are kept as the scenario's description."
        )
        notes = notes[: DESCRIPTION_MAX - 1].rstrip() + "…"
    return notes


def _tags(tags: list[str], warnings: list[str]) -> list[str]:
    kept = [t.strip() for t in tags if t.strip() and len(t.strip()) <= TAG_MAX_CHARS]
    if len(kept) < len([t for t in tags if t.strip()]) or len(kept) > TAGS_MAX:
        warnings.append(
            f"The card has {len(tags)} tags; the first {TAGS_MAX} of at most "
            f"{TAG_MAX_CHARS} characters are kept."
        )
    return kept[:TAGS_MAX]


def _left_out(data: Fields, warnings: list[str]) -> None:
    named = [
        label
        for key, label in (
            ("system_prompt", "its system prompt"),
            ("post_history_instructions", "its post-history instructions"),
            ("mes_example", "its example dialogue"),
            ("example_dialogue", "its example dialogue"),
        )
        if data.text(key).strip()
    ]
    if named:
        shown = ", ".join(dict.fromkeys(named))
        warnings.append(
            f"Left out of the card: {shown}. They are written for a chat model playing the "
            "character; Campfire's narrator tells a story with the character in it."
        )


# --- writing -------------------------------------------------------------------------------------


def write_card(draft: ScenarioDraft, version: str) -> dict[str, Any]:
    """A scenario as a V2 or V3 card (JSON): its character cards (always-on, of type
    "character", named after it) as the description and personality, the other cards as the
    character book, plot essentials as the scenario, the openings as the greetings."""
    # The character's own cards come first (``read_card``): their title is its name, which the
    # scenario's title may no longer be (a library numbers a title it already has).
    first = draft.cards[0] if draft.cards else None
    name = first.title if first is not None and first.type == "character" else draft.title
    own = [c for c in draft.cards if c.type == "character" and _is_part_of(c.title, name)]
    rest = [c for c in draft.cards if c not in own]
    description, marker, personality = "\n\n".join(c.entry for c in own).rpartition(
        f"{name}{PERSONALITY}"
    )
    if not marker:
        description, personality = personality, ""
    data: dict[str, Any] = {
        "name": name,
        "description": description.strip(),
        "personality": personality.strip(),
        "scenario": draft.plot_essentials,
        "first_mes": draft.prompt,
        "mes_example": "",
        "creator_notes": draft.description,
        "system_prompt": draft.ai_instructions,
        "post_history_instructions": "",
        "alternate_greetings": [
            o.text for o in draft.openings if version == V2 or not o.group_only
        ],
        "tags": list(draft.tags),
        "creator": "",
        "character_version": "",
        "extensions": (
            {"depth_prompt": {"prompt": draft.authors_note, "depth": NOTE_DEPTH, "role": "system"}}
            if draft.authors_note
            else {}
        ),
    }
    if rest:
        data["character_book"] = {
            "name": name,
            "extensions": {},
            "entries": [
                {
                    "keys": [k.strip() for k in c.keys.split(",") if k.strip()]
                    + regex_keys(c.lore),
                    "content": c.entry,
                    "extensions": {},
                    "enabled": True,
                    # Read back as the card's order: the default unless its options set one.
                    "insertion_order": DEFAULT_ORDER,
                    "constant": c.always_on,
                    "name": c.title,
                    "comment": c.title,
                    "id": n,
                    "use_regex": bool(regex_keys(c.lore)),
                }
                # The card's world-info options, in the spec's fields and SillyTavern's.
                | character_book_options(c.lore, always_on=c.always_on)
                for n, c in enumerate(rest)
            ],
        }
    if version == V3:
        data["group_only_greetings"] = [o.text for o in draft.openings if o.group_only]
        # The character's cards are keyed by its name and its nickname (``_character_cards``).
        called = own[0].keys.split(",")[1:2] if own else []
        if called:
            data["nickname"] = called[0]
        return {"spec": SPEC_V3, "spec_version": "3.0", "data": data}
    return {"spec": SPEC_V2, "spec_version": "2.0", "data": data}


def _is_part_of(title: str, name: str) -> bool:
    if title == name:
        return True
    head, _, tail = title.rpartition(" (")
    return head == name and tail.endswith(")") and tail[:-1].isdigit()
