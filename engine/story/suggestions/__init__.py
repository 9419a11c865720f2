"""Suggested actions as buttons under the newest turn (issue 22, Deliver 3): what counts as one
(``rules``), where they are kept (``store``), whether the model writes them (``fit``), and what
a press or a server's switch asks of the engine (``service``)."""

from engine.story.suggestions.fit import Fit, fit_of, keep_fit
from engine.story.suggestions.rules import (
    KEY,
    MAX_LABEL,
    MAX_SUGGESTIONS,
    SUGGESTIONS_PART,
    from_lists,
    validate,
)
from engine.story.suggestions.store import keep, offered, suggestions_on

__all__ = [
    "Fit",
    "KEY",
    "MAX_LABEL",
    "MAX_SUGGESTIONS",
    "SUGGESTIONS_PART",
    "fit_of",
    "from_lists",
    "keep",
    "keep_fit",
    "offered",
    "suggestions_on",
    "validate",
]
