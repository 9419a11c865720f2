"""When the memory bank writes: a memory every 6 actions from the 12th, the summary every 15.

Pure arithmetic on story positions (engine.story.line.positions). The newest action is always held
back: it may still be retried, and a memory must never describe a take that gets replaced. A
cursor moves only when its write succeeds, so a failed call is simply due again after the next
turn (or the next sweep): the cadence retries by itself.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Cadence:
    """Work due every ``every`` actions, the first time once the story has ``first_at``."""

    first_at: int
    every: int

    def __post_init__(self) -> None:
        if self.first_at < 2 or self.every < 1:
            raise ValueError("a cadence starts at 2 actions or later and repeats every 1 or more")

    def due(self, actions: int, cursor: int) -> tuple[int, int] | None:
        """The stretch ``(after, through)`` of positions due now, or None.

        ``actions`` is the story's length in actions, ``cursor`` the position written through.
        The first stretch ends just before the ``first_at``-th action; later ones are
        ``every`` long. The newest action is never part of one.
        """
        settled = actions - 1  # the newest action may still be retried
        span = self.first_at - 1 if cursor <= 0 else self.every
        if actions < self.first_at or settled - max(cursor, 0) < span:
            return None
        return max(cursor, 0), max(cursor, 0) + span


MEMORY_CADENCE = Cadence(first_at=12, every=6)
SUMMARY_CADENCE = Cadence(first_at=15, every=15)
