"""A scenario read from a file, before anything is written: what every format reader returns.

``finish`` applies the same caps as live creation (card sizes from ``engine.story.steering.cards``,
steering text from one Discord text input, the script and card limits from the settings, the stat
schema through ``engine.story.world.schema``), sanitises every text (``engine.platform.sanitise``),
and collects warnings a player sees in the preview. A reader never writes;
``engine.library.scenarios.library`` saves a draft in one transaction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.library.reading.errors import ImportRejected
from engine.people.content import Rating
from engine.platform.sanitise import sanitise, sanitise_code
from engine.prompt.card_cap import DEFAULT_MAX_CARDS, CardCap
from engine.prompt.lore import clean_lore
from engine.story.steering.cards import (
    CARD_ENTRY_MAX,
    CARD_KEYS_MAX,
    CARD_TITLE_MAX,
    CARD_TYPE_MAX,
    DEFAULT_CARD_TYPE,
)
from engine.story.steering.text import TEXT_MAX_CHARS
from engine.story.world.schema import SchemaError, parse_schema

TITLE_MAX = 100
ICON_MAX = 32
DESCRIPTION_MAX = 4000
#: An opening longer than this is a novel, not a prompt (AI Dungeon allows far less).
PROMPT_MAX_CHARS = 20_000
TAGS_MAX = 20
TAG_MAX_CHARS = 40
MAX_SCRIPTS = 20
SCRIPT_NAME_MAX = 100
#: A menu of options is one Discord select menu.
MAX_OPTIONS = 25
#: Scenarios in one file, options and their options included.
MAX_SCENARIOS = 100
#: A Discord form (modal) holds five text inputs: /start asks a scenario's questions five to a
#: form, in as many forms as it takes.
QUESTIONS_PER_FORM = 5

PLACEHOLDER = re.compile(r"\$\{([^{}\n]{1,200})\}")


@dataclass(frozen=True, slots=True)
class ImportLimits:
    """The caps an import shares with live creation (from the settings)."""

    max_bytes: int = 2 * 1024 * 1024
    #: A character card PNG: its picture is never read, only stepped over to find the card.
    max_image_bytes: int = 8 * 1024 * 1024
    max_cards: int = DEFAULT_MAX_CARDS
    max_script_chars: int = 100_000


@dataclass
class ImportedCard:
    title: str = ""
    keys: str = ""
    entry: str = ""
    type: str = DEFAULT_CARD_TYPE
    description: str = ""
    always_on: bool = False
    #: World-info options (``engine.prompt.lore``) as the file gave them; ``finish`` keeps what
    #: is valid, bounded, and names the rest.
    lore: Any = field(default_factory=dict)


@dataclass
class ImportedScript:
    name: str = ""
    description: str = ""
    enabled: bool = True
    shared_library: str = ""
    on_input: str = ""
    on_model_context: str = ""
    on_output: str = ""

    @property
    def empty(self) -> bool:
        return not any((self.shared_library, self.on_input, self.on_model_context, self.on_output))


@dataclass
class Opening:
    """One more way a scenario may begin, besides its ``prompt`` (a character card's alternate
    greeting); ``group_only`` ones are offered only to a group (in a server)."""

    text: str
    group_only: bool = False


@dataclass
class ScenarioDraft:
    title: str
    icon: str = ""
    description: str = ""
    tags: list[str] = field(default_factory=list)
    prompt: str = ""
    plot_essentials: str = ""
    authors_note: str = ""
    ai_instructions: str = ""
    stat_schema: dict[str, Any] = field(default_factory=dict)
    cards: list[ImportedCard] = field(default_factory=list)
    scripts: list[ImportedScript] = field(default_factory=list)
    #: Sub-scenarios a player chooses between at /start (AI Dungeon's "options").
    options: list[ScenarioDraft] = field(default_factory=list)
    #: Openings a player chooses between at /start, after ``prompt`` (the first).
    openings: list[Opening] = field(default_factory=list)
    #: Chapters and beats, checked (``engine.story.chapters.plan``); {} when it has none.
    chapters: dict[str, Any] = field(default_factory=dict)
    #: Bundle options for play: suggested actions offered (``engine.story.suggestions``), and lines
    #: that stand in for a failed narration (``engine.story.fallback``).
    suggestions: bool = True
    fallback: list[str] = field(default_factory=list)
    #: What its author rated it (``safe``, ``moderate``, ``mature``; ``engine.people.content``),
    #: as the file says it until checked; "" for unrated.
    content_rating: str = ""

    def walk(self) -> list[ScenarioDraft]:
        """This scenario and every option under it, parents first."""
        out: list[ScenarioDraft] = []
        stack: list[ScenarioDraft] = [self]
        while stack:
            draft = stack.pop(0)
            out.append(draft)
            stack.extend(draft.options)
        return out

    @property
    def placeholders(self) -> list[str]:
        """The ``${questions}`` asked at /start (``scenario_questions``)."""
        return scenario_questions(
            self.plot_essentials,
            "\n".join([self.prompt, *(o.text for o in self.openings)]),
            self.authors_note,
            [(c.title, c.keys, c.entry) for c in self.cards],
        )


@dataclass
class ImportedScenario:
    """A draft with the format it was read as and what the player should know before saving."""

    format: str
    draft: ScenarioDraft
    warnings: list[str] = field(default_factory=list)
    #: The file's other scenarios, when it holds several side by side (AI Dungeon's 2020–21
    #: export of a list): each is saved as a scenario of its own, after ``draft``.
    more: list[ScenarioDraft] = field(default_factory=list)
    #: Story cards past the card cap, left out of their scenario (its first ones are kept).
    cards_left_out: int = 0

    @property
    def scenarios(self) -> list[ScenarioDraft]:
        """The file's scenarios side by side (not their options)."""
        return [self.draft, *self.more]

    def walk(self) -> list[ScenarioDraft]:
        """Every scenario in the file with every option under it."""
        return [d for top in self.scenarios for d in top.walk()]

    @property
    def card_count(self) -> int:
        return sum(len(d.cards) for d in self.walk())

    @property
    def script_count(self) -> int:
        return sum(len(d.scripts) for d in self.walk())

    @property
    def option_count(self) -> int:
        return len(self.walk()) - len(self.scenarios)

    @property
    def placeholders(self) -> list[str]:
        """Every ``${question}`` the file's scenarios and options ask at /start."""
        seen: dict[str, None] = {}
        for draft in self.walk():
            seen.update(dict.fromkeys(draft.placeholders))
        return list(seen)


def scenario_questions(
    plot_essentials: str, prompt: str, authors_note: str, cards: Iterable[tuple[str, ...]] = ()
) -> list[str]:
    """Every distinct ``${question}`` a scenario asks before it starts, in AI Dungeon's order:
    plot essentials, then the opening, the author's note and the story cards, each asked once
    however often it is used. AI Dungeon has no official page on placeholders; this is the
    order and the places of the community's reference, "Placeholders Guide: Using ${} for
    Scenario Creation" (reddit.com/r/AIDungeon/comments/1psd1kp, December 2025). AI
    instructions are not among the places it lists (it advises against them there), so their
    placeholders are filled only where the same question is asked elsewhere."""
    texts = [plot_essentials, prompt, authors_note, *(part for card in cards for part in card)]
    return placeholders_in("\n".join(texts))


def placeholders_in(text: str) -> list[str]:
    """The distinct ``${…}`` questions in a text, in order of first use."""
    seen: dict[str, None] = {}
    for match in PLACEHOLDER.finditer(text):
        seen.setdefault(match.group(1).strip(), None)
    return [name for name in seen if name]


#: AI Dungeon's built-in placeholders are names, not questions: what the form asks instead.
BUILTIN_QUESTIONS = {
    "character.name": "Your character's name",
    "character.class": "Your character's class",
    "character.race": "Your character's race",
}


def question_for(placeholder: str) -> str:
    """What a form asks for a ``${…}`` placeholder (its own words, unless it is a built-in)."""
    return BUILTIN_QUESTIONS.get(placeholder.casefold(), placeholder)


def fill_placeholders(text: str, answers: dict[str, str]) -> str:
    """``text`` with each answered ``${…}`` replaced; unanswered ones stay as written."""
    if not answers:
        return text

    def swap(match: re.Match[str]) -> str:
        # The answers are what a player typed at /start: sanitised as they enter the story.
        answer = answers.get(match.group(1).strip())
        return match.group(0) if answer is None else sanitise(answer)

    return PLACEHOLDER.sub(swap, text)


# --- finishing a draft ---------------------------------------------------------------------------


def finish(
    imported: ImportedScenario, limits: ImportLimits, *, where: str = "The scenario"
) -> ImportedScenario:
    """Check every scenario in the draft against the caps; raise on the first problem.
    ``where`` names a file of one scenario in what is said (a story-card file: "The file")."""
    scenarios = imported.walk()
    if len(scenarios) > MAX_SCENARIOS:
        raise ImportRejected(
            f"The file holds {len(scenarios):,} scenarios with its options; at most "
            f"{MAX_SCENARIOS} are imported at once."
        )
    several = len(imported.scenarios) > 1
    for n, top in enumerate(imported.scenarios, start=1):
        for i, draft in enumerate(top.walk()):
            if i > 0:
                named = f"Option “{draft.title[:60]}”"
            elif several:
                named = f"Scenario {n} (“{draft.title[:60]}”)"
            else:
                named = where
            _finish_one(draft, named, limits, imported)
    return imported


def _finish_one(
    draft: ScenarioDraft, where: str, limits: ImportLimits, imported: ImportedScenario
) -> None:
    warnings = imported.warnings
    draft.title = " ".join(sanitise(draft.title).split())
    if not draft.title:
        raise ImportRejected(f"{where} has no title.")
    _cap(draft.title, TITLE_MAX, f"{where}'s title")
    draft.icon = sanitise(draft.icon).strip()
    _cap(draft.icon, ICON_MAX, f"{where}'s icon")
    draft.description = sanitise(draft.description).strip()
    _cap(draft.description, DESCRIPTION_MAX, f"{where}'s description")
    draft.tags = _tags(draft.tags, where)
    draft.content_rating = _rating(draft.content_rating, where)
    draft.prompt = sanitise(draft.prompt).strip("\n")
    _cap(draft.prompt, PROMPT_MAX_CHARS, f"{where}'s opening prompt")
    _finish_openings(draft, where, warnings)
    for name, label in (
        ("plot_essentials", "plot essentials (memory)"),
        ("authors_note", "author's note"),
        ("ai_instructions", "AI instructions"),
    ):
        value = sanitise(getattr(draft, name)).strip()
        _cap(value, TEXT_MAX_CHARS, f"{where}'s {label}")
        setattr(draft, name, value)
    try:
        parse_schema(draft.stat_schema)
    except SchemaError as error:
        problems = "\n".join(f"• {p}" for p in error.problems[:5])
        raise ImportRejected(
            f"{where}'s world-state schema (stat_schema) has problems:\n{problems}"
        ) from None
    if len(draft.options) > MAX_OPTIONS:
        raise ImportRejected(
            f"{where} has {len(draft.options)} options; a menu holds at most {MAX_OPTIONS}."
        )
    _finish_cards(draft, where, limits, imported)
    _finish_scripts(draft, where, limits, warnings)


def _finish_openings(draft: ScenarioDraft, where: str, warnings: list[str]) -> None:
    """The other openings: each one as checked as the first, as many as one menu holds."""
    kept = []
    for n, opening in enumerate(draft.openings, start=2):
        opening.text = sanitise(opening.text).strip("\n")
        _cap(opening.text, PROMPT_MAX_CHARS, f"{where}'s opening {n}")
        if opening.text.strip():
            kept.append(opening)
    # /start offers every opening as one button of one menu, the first (the prompt) included;
    # as with the card cap, the first ones are kept and the player told before saving.
    most = MAX_OPTIONS - 1
    if len(kept) > most:
        warnings.append(
            f"{where} has {len(kept) + 1} openings; /start offers at most {MAX_OPTIONS}, so "
            f"the last {len(kept) - most} are left out."
        )
        del kept[most:]
    draft.openings = kept


def _rating(value: str, where: str) -> str:
    """A scenario's content rating by its name, or AI Dungeon's (Everyone, Teen, Mature);
    "" for unrated."""
    if not value.strip() or value.strip().lower() == "unrated":
        return ""
    rating = Rating.parse(value)
    if rating is None:
        raise ImportRejected(
            f"{where}'s content_rating is “{value[:30]}”; it must be safe, moderate or mature "
            "(or left out for an unrated scenario)."
        )
    return rating.label


def _tags(tags: list[str], where: str) -> list[str]:
    out: list[str] = []
    for tag in tags:
        tag = " ".join(sanitise(tag).split())
        if tag and tag not in out:
            _cap(tag, TAG_MAX_CHARS, f"{where}'s tag “{tag[:20]}…”")
            out.append(tag)
    if len(out) > TAGS_MAX:
        raise ImportRejected(f"{where} has {len(out)} tags; at most {TAGS_MAX}.")
    return out


def _finish_cards(
    draft: ScenarioDraft, where: str, limits: ImportLimits, imported: ImportedScenario
) -> None:
    warnings = imported.warnings
    cap = CardCap(limits.max_cards)
    if not cap.holds(len(draft.cards)):
        # The rule of cards added by hand, kept as far as it goes: the first cards fit.
        left_out = draft.cards[cap.most :]
        del draft.cards[cap.most :]
        imported.cards_left_out += len(left_out)
        first = " ".join(sanitise(left_out[0].title).split())[:40] or "untitled"
        warnings.insert(
            0,
            f"{where} has {cap.most + len(left_out):,} story cards; an adventure may hold at "
            f"most {cap.most:,} (this bot's setting). Only the first {cap.most:,} are "
            f"imported: the last {len(left_out):,}, from “{first}” on, are left out.",
        )
    titles: set[str] = set()
    renamed = 0
    for n, card in enumerate(draft.cards, start=1):
        keys = ",".join(
            key.rstrip() for key in sanitise(card.keys).replace("\n", ",").split(",") if key.strip()
        )
        card.keys = keys
        title = " ".join(sanitise(card.title).split())
        if not title:
            # Old world info and lorebooks have no titles: the first key names the card.
            first = keys.split(",")[0].strip() if keys else ""
            title = (first or f"Card {n}")[:CARD_TITLE_MAX]
        label = f"{where}: story card {n} (“{title[:40]}”)"
        _cap(title, CARD_TITLE_MAX, f"{label}: its title")
        _cap(keys, CARD_KEYS_MAX, f"{label}: its keys together")
        card.entry = "\n".join(line.rstrip() for line in sanitise(card.entry).strip().splitlines())
        _cap(card.entry, CARD_ENTRY_MAX, f"{label}: its entry")
        card.description = sanitise(card.description).strip()
        _cap(card.description, CARD_ENTRY_MAX, f"{label}: its notes")
        kind = " ".join(sanitise(card.type).split()).lower() or DEFAULT_CARD_TYPE
        _cap(kind, CARD_TYPE_MAX, f"{label}: its type")
        card.type = kind
        card.lore = clean_lore(card.lore, warnings, where=f"{label}: ")
        # Titles are unique per adventure (cards are edited by title), so a repeat is numbered.
        base, k = title, 2
        while title.casefold() in titles:
            suffix = f" ({k})"
            title = base[: CARD_TITLE_MAX - len(suffix)] + suffix
            k += 1
        if title != base:
            renamed += 1
        titles.add(title.casefold())
        card.title = title
    if renamed:
        warnings.append(
            f"{where}: {renamed} story card(s) shared a title with another and were numbered."
        )


def _finish_scripts(
    draft: ScenarioDraft, where: str, limits: ImportLimits, warnings: list[str]
) -> None:
    draft.scripts = [s for s in draft.scripts if not s.empty]
    if len(draft.scripts) > MAX_SCRIPTS:
        raise ImportRejected(f"{where} has {len(draft.scripts)} scripts; at most {MAX_SCRIPTS}.")
    for n, script in enumerate(draft.scripts, start=1):
        script.name = " ".join(sanitise(script.name).split()) or f"Script {n}"
        _cap(script.name, SCRIPT_NAME_MAX, f"{where}: script {n}'s name")
        script.description = sanitise(script.description).strip()
        _cap(script.description, DESCRIPTION_MAX, f"{where}: script “{script.name}”'s description")
        for hook, label in (
            ("shared_library", "shared library"),
            ("on_input", "input hook"),
            ("on_model_context", "context hook"),
            ("on_output", "output hook"),
        ):
            code = sanitise_code(getattr(script, hook))
            _cap(code, limits.max_script_chars, f"{where}: script “{script.name}”'s {label}")
            setattr(script, hook, code)
    if draft.scripts:
        warnings.append(
            f"{where} has {len(draft.scripts)} script(s): code that runs in every adventure "
            "started from it (sandboxed; an error shows in Insights and never stops a turn)."
        )


def _cap(text: str, limit: int, what: str) -> None:
    if len(text) > limit:
        raise ImportRejected(f"{what} has {len(text):,} characters; at most {limit:,} are allowed.")
