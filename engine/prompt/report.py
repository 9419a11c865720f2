"""What went into a turn's context, and why: the record Insights shows.

The context engine fills one ``ContextReport`` per narrator turn; it is stored as JSON with the
turn (a deferred column) and read back only when someone opens Insights.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ItemReport:
    """One card, memory, knowledge chunk or history entry considered for a section."""

    label: str  # a card's title, "turn 12", a memory's first words
    tokens: int
    included: bool
    #: Why it was included or left out: "trigger: Mira", "always on", "pinned", "score 0.82",
    #: "over the 40% card budget", "no room left", "truncated to fit".
    reason: str = ""


@dataclass
class SectionReport:
    key: str  # stable id: "narrator", "plot_essentials", "story_cards", "history", ...
    title: str  # as shown to people: "Plot essentials"
    tokens: int
    #: Why the section is there ("always included", "3 cards triggered", "12 of 40 turns").
    reason: str = ""
    items: list[ItemReport] = field(default_factory=list)
    truncated: bool = False


@dataclass
class ContextReport:
    budget: int  # the adventure's context budget in tokens
    reserved: int  # kept for the reply
    available: int  # max(256, budget - reserved)
    used: int  # tokens actually sent
    output_words: int | None  # the length ceiling given to the model, if any
    sections: list[SectionReport] = field(default_factory=list)
    #: The adventure's settings held to the operator's ceilings, in words (none: none were).
    clamped: list[str] = field(default_factory=list)
    #: The turn's script runs, one per script and hook: {hook, script, ms, logs, error, note}.
    scripts: list[dict[str, Any]] = field(default_factory=list)
    #: What the content checks did to this turn, in words (``engine.people.content``).
    checks: list[str] = field(default_factory=list)
    #: The sampling settings the model was sent, in words ("temperature 0.8", "min_p 0.05"),
    #: and those its server does not take, with why (``engine.llm.providers.dialects``).
    sampling: list[str] = field(default_factory=list)
    sampling_left_out: list[str] = field(default_factory=list)
    #: Of the prompt tokens the model's usage counted, how many it did not read again: a
    #: hosted provider's prompt cache, or the embedded model's reuse of the last turn's
    #: prompt (``Usage.cached_tokens``). Kept here, in the report's JSON, rather than in a
    #: column of its own; None when the model did not say (or for a turn stored before).
    cached_tokens: int | None = None

    @property
    def excluded(self) -> list[ItemReport]:
        return [item for section in self.sections for item in section.items if not item.included]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ContextReport:
        sections = [
            SectionReport(
                **{k: v for k, v in section.items() if k != "items"},
                items=[ItemReport(**item) for item in section.get("items", [])],
            )
            for section in data.get("sections", [])
        ]
        return cls(**{k: v for k, v in data.items() if k != "sections"}, sections=sections)
