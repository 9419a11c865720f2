"""Suggested actions as buttons under the newest turn (issue 22, Deliver 3): what counts as one
(``rules``), where they are kept (``store``), and what a press or a server's switch asks of the
engine (``service``)."""

from engine.story.suggestions.rules import (
    KEY,
    MAX_LABEL,
    MAX_SUGGESTIONS,
    SUGGESTION_RULE,
    from_lists,
    validate,
)
from engine.story.suggestions.store import keep, offered, suggestions_on

__all__ = [
    "KEY",
    "MAX_LABEL",
    "MAX_SUGGESTIONS",
    "SUGGESTION_RULE",
    "from_lists",
    "keep",
    "offered",
    "suggestions_on",
    "validate",
]
