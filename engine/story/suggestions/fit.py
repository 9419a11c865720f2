"""Whether the adventure's model writes suggested actions, so a model that never does is not
asked for them every turn (issue 39: on the embedded 135M model the request cost about 110 of a
turn's 1,100 prompt tokens, and it never wrote the block).

Counted per adventure, for the model that answers (its label), in the database (every process
plays the adventure's turns, one at a time under its lease): how many of its replies in a row
offered no suggestion the engine kept. After ``MISSED_LIMIT`` such replies, the request is left
out of the prompt, and Insights says so. It comes back:

* at once when the adventure's model changes (another label: its count starts again);
* when the model offers suggestions anyway (its count goes back to 0);
* for one turn in every ``RETRY_EVERY`` while it is left out, to see whether the model (or the
  story, which may now show it the block) has changed.

Leaving it out changes the system message once; the retry turn changes it twice (in, and out
again), once in ``RETRY_EVERY`` turns, which the cached-prefix share hardly notices.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from engine.storage.play_models import SuggestionFit

#: Replies in a row without a suggestion before the request is left out.
MISSED_LIMIT = 3
#: While it is left out, it is asked for again once in this many turns.
RETRY_EVERY = 20


@dataclass(frozen=True, slots=True)
class Fit:
    """The model's record on the adventure: its label and its replies in a row without one."""

    model: str
    missed: int = 0

    @property
    def asked(self) -> bool:
        """Whether this turn's prompt asks for suggestions."""
        if self.missed < MISSED_LIMIT:
            return True
        return (self.missed - MISSED_LIMIT + 1) % RETRY_EVERY == 0

    @property
    def reason(self) -> str:
        """Why they are left out, for Insights."""
        wait = RETRY_EVERY - 1 - (self.missed - MISSED_LIMIT + 1) % RETRY_EVERY
        return (
            f"left out: the model's last {self.missed} replies offered none; asked again in "
            f"{wait + 1} {'turn' if wait == 0 else 'turns'}, or at once on another model"
        )

    def after(self, offered: bool) -> Fit:
        """The record after a reply that offered suggestions, or none."""
        return Fit(self.model, 0 if offered else self.missed + 1)


async def fit_of(session: AsyncSession, adventure_id: int, model: str) -> Fit:
    """The record of ``model`` on the adventure (a fresh one for a model not seen last)."""
    row = await session.get(SuggestionFit, adventure_id)
    if row is None or row.model != model:
        return Fit(model)
    return Fit(model, row.missed)


async def keep_fit(session: AsyncSession, adventure_id: int, fit: Fit) -> None:
    """Store the record (in the transaction that stores the turn)."""
    await session.merge(
        SuggestionFit(adventure_id=adventure_id, model=fit.model, missed=fit.missed)
    )
