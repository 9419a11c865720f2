"""What the play service answers the front end: an adventure started, what /start must ask
first, the adventure in a place, the adventures in a channel's threads. Plain data, no
Discord."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class StartedAdventure:
    adventure_id: int
    title: str
    icon: str
    opening: str
    version: int
    #: The opening's story node (the root of the tree), so its message can take buttons again.
    opening_node_id: int | None = None


@dataclass(frozen=True, slots=True)
class StartPlan:
    """What /start must ask before starting a scenario: a choice among its options, or the
    answers to its ``${placeholders}`` (all of them, asked five to a form)."""

    scenario_id: int
    title: str
    icon: str
    intro: str  # a menu scenario's own prompt, shown above its options
    options: list[tuple[str, str]]  # (label, scenario id)
    placeholders: list[str]
    #: The title of the adventure running where it would start, which starting ends (None:
    #: nothing runs there).
    replaces: str | None = None
    #: The openings to choose from, (position, its first words), the prompt first as 0: more
    #: than one, or none (a character card's greetings: ``start_adventure``'s ``opening``).
    openings: list[tuple[int, str]] = field(default_factory=list)
    #: The opening chosen (None: not yet, when there are ``openings``).
    opening: int | None = None


@dataclass(frozen=True, slots=True)
class AdventureRef:
    adventure_id: int
    title: str
    version: int


@dataclass(frozen=True, slots=True)
class ThreadAdventure:
    """An adventure running in a thread opened for it from a channel."""

    adventure_id: int
    title: str
    icon: str
    thread_id: int
