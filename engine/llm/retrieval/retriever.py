"""The retriever seam: what the context engine asks of each thing that finds text for a turn.

The context engine takes a list of retrievers, each filling one section of the context
(engine.turns.context's ``RETRIEVED_SECTIONS``: memories and knowledge), and hands each the same
query: the adventure and its recent text, newest first. A retriever
answers with its chosen items, best first, and a summary for Insights; what fits the section's
budget goes in, the rest is reported as left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from sqlalchemy.ext.asyncio import AsyncSession


class FoundItem(Protocol):
    """One retrieved text."""

    @property
    def label(self) -> str:
        """How Insights names it ("#12 Mira hid the silver key…")."""
        ...

    @property
    def text(self) -> str:
        """What goes into the context."""
        ...

    @property
    def reason(self) -> str:
        """Why it was chosen, with its scores, as Insights shows it ("lexical 3.10 (mira)")."""
        ...


class Found(Protocol):
    """A retriever's answer for one turn."""

    @property
    def chosen(self) -> Sequence[FoundItem]:
        """The items for the context, best first."""
        ...

    @property
    def summary(self) -> str:
        """What Insights says of the section as a whole ("2 of 40 memories; …"), shown even
        when nothing was chosen: retrieval may rightly find nothing."""
        ...


@runtime_checkable
class CountsUse(Protocol):
    """An answer whose chosen rows count as used once the turn is stored (memories: the
    capacity rule forgets the least used first). The count is written by the turn's commit, in
    its own transaction, never by the retriever, which only reads."""

    @property
    def used_ids(self) -> Sequence[int]:
        """The ids of the chosen rows."""
        ...


class Retriever(Protocol):
    @property
    def section(self) -> str:
        """The context section this retriever fills ("memories")."""
        ...

    async def retrieve(
        self, session: AsyncSession, adventure_id: int, recent: Sequence[str]
    ) -> Found:
        """The items for this turn; ``recent`` is the newest text first (the new action, then
        the latest story entries)."""
        ...
