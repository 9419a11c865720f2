"""The fault trial's counts, and the check run after every fault.

* injected: faults injected;
* lost: actions the player was told were played (their narration shown, or a Retry that said
  so) that the story does not hold;
* half-written: inconsistencies the database check finds (``invariants.inconsistencies``), and
  turns stored although their reply failed;
* duplicated: extra copies of an action in the story (every action the trial sends has its own
  text, so each may be stored at most once);
* stuck: play that did not resume within its bound.

Each problem is counted once, however many checks see it again.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from engine.storage.database import Database
from engine.story.actions import ActionType, PlayerAction, format_action
from tests.trials.invariants import inconsistencies, stored_actions


def stored_form(action: str, actor: str = "You") -> str:
    """The text ``/do action`` adds to the story: "> You …" in a DM; in a server the actor is
    the player's character or display name ("> alice opens …"), as ``engine.story.actions`` writes
    it. A trial that expects the DM's form in a server sees none of its actions stored, and counts
    every one as stuck."""
    return format_action(PlayerAction(ActionType.DO, action, actor=actor))


@dataclass
class Tally:
    injected: int = 0
    lost: int = 0
    half_written: int = 0
    duplicated: int = 0
    stuck: int = 0
    #: Every action sent (its stored form), and those the player was told were played.
    sent: set[str] = field(default_factory=set)
    told: set[str] = field(default_factory=set)
    #: What went wrong, in words, for the report.
    problems: list[str] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)
    _extra_copies: Counter[str] = field(default_factory=Counter)

    def problem(self, kind: str, text: str) -> None:
        """Count a problem of ``kind`` (a counter's name) once, keeping its words."""
        key = f"{kind}: {text}"
        if key in self._seen:
            return
        self._seen.add(key)
        setattr(self, kind, getattr(self, kind) + 1)
        self.problems.append(key)

    async def check(self, db: Database, where: str, *, settled: bool) -> Counter[str]:
        """The database check and the action counts after a fault; returns how many times each
        action is stored."""
        for found in await inconsistencies(db, settled=settled):
            self.problem("half_written", found)
        stored = await stored_actions(db)
        for action in self.told:
            if stored[action] == 0:
                self.problem("lost", f"{action!r} was shown as played but is not stored")
        for action in self.sent:
            extra = stored[action] - 1
            if extra > self._extra_copies[action]:
                self.duplicated += extra - self._extra_copies[action]
                self._extra_copies[action] = extra
                self.problems.append(f"duplicated ({where}): {action!r} is stored {extra + 1}×")
        return stored

    @classmethod
    def summed(cls, tallies: dict[str, Tally]) -> Tally:
        """The counts of several runs (one per database backend, by name) together."""
        total = cls()
        for run, tally in tallies.items():
            for name in ("injected", "lost", "half_written", "duplicated", "stuck"):
                setattr(total, name, getattr(total, name) + getattr(tally, name))
            total.problems += [f"{run}: {problem}" for problem in tally.problems]
        return total

    def line(self) -> str:
        return (
            f"faults: {self.injected} injected, lost {self.lost}, "
            f"half-written {self.half_written}, duplicated {self.duplicated}, stuck {self.stuck}"
        )

    @property
    def failed(self) -> bool:
        return bool(self.lost or self.half_written or self.duplicated or self.stuck)
