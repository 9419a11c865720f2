"""The story tree: takes, undo and redo, edits, branches and save points.

``service.StoryTree`` is what a front end calls (its shared steps in ``core``, branches and
save points in ``branches``); lines are read and grown in ``engine.story.line``,
``takes`` keeps a turn's attempts, ``edits`` changes any entry's words (as a new take),
``shape`` reads /tree's picture of the story, ``picture`` and ``image`` draw it. Who may change
what is ``engine.people.access``'s rule. A turn being stored calls
``story_line.write.advance_line``; a retry uses ``takes.plan_retry``.
"""

from engine.story.tree.branches import NAME_MAX, BranchView, SavePointView
from engine.story.tree.core import MOVED_ON, HeadMove
from engine.story.tree.edits import (
    EDIT_BACK_MAX,
    EDIT_MAX_CHARS,
    EntryChoice,
    EntryEdit,
    TurnText,
)
from engine.story.tree.service import StoryTree

__all__ = [
    "EDIT_BACK_MAX",
    "EDIT_MAX_CHARS",
    "MOVED_ON",
    "NAME_MAX",
    "BranchView",
    "EntryChoice",
    "EntryEdit",
    "HeadMove",
    "SavePointView",
    "StoryTree",
    "TurnText",
]
