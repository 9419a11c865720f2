"""Playing by plain messages: what a message typed in an adventure's place means.

The convention (docs/commands.md, /help topic:playing): text is a do; text in quotes ("…" or
“…”) is a say; text starting with ``+`` is a story line; a message starting with ``//`` or ``(``
is out of character, and plays nothing. The front end strips a mention of the bot before asking.
"""

from __future__ import annotations

from engine.story.actions import ActionType

#: Opening and closing quotes that make a message a say.
QUOTES: dict[str, str] = {'"': '"', "“": "”", "„": "“", "«": "»"}
#: Out-of-character openings: table talk, not the story.
OUT_OF_CHARACTER = ("//", "(")
STORY_MARK = "+"


def message_action(text: str) -> tuple[ActionType, str] | None:
    """The action a plain message plays, with its text; None for a message that plays nothing
    (empty, or out of character)."""
    text = text.strip()
    if not text or text.startswith(OUT_OF_CHARACTER):
        return None
    if text.startswith(STORY_MARK):
        story = text[len(STORY_MARK) :].strip()
        return (ActionType.STORY, story) if story else None
    closing = QUOTES.get(text[0])
    if closing is not None and len(text) > 1 and text.endswith(closing):
        # The quotes are the mark, not the words: /say adds its own.
        said = text[1:-1].strip()
        return (ActionType.SAY, said) if said else None
    return ActionType.DO, text
