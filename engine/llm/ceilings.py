"""The operator's ceilings on the operator's model.

An adventure's host may set its context and reply length (``/adventure settings``, or an
imported file's settings) within wide ranges, since a player's or server's own model is theirs
to spend. On the operator's model those settings are clamped, turn by turn, to what the operator
configured (``CAMPFIRE_CONTEXT_TOKENS``, ``CAMPFIRE_MAX_OUTPUT_TOKENS``, the embedded model's
smaller ones): a player cannot raise the operator's spend by raising their own settings.
Insights says when a setting was clamped (``ContextReport.clamped``).

An adventure's sampling (top-p, min-p, the penalties, stop strings: ``engine.llm.sampling``)
changes what a reply costs the operator not at all, so it has no ceiling here: every model holds
it to the same ranges, stop strings bounded in count and length, refused when set or imported.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ceilings:
    """The most context and the longest reply a turn on the operator's model may have."""

    context_tokens: int
    max_output_tokens: int

    def clamp(self, budget: int, max_output: int) -> tuple[int, int, tuple[str, ...]]:
        """``budget`` and ``max_output`` within the ceilings, and a note for each clamped."""
        notes = []
        if budget > self.context_tokens:
            notes.append(
                f"context {budget:,} tokens held to the operator's {self.context_tokens:,}"
            )
        if max_output > self.max_output_tokens:
            notes.append(
                f"replies of {max_output:,} tokens held to the operator's "
                f"{self.max_output_tokens:,}"
            )
        return (
            min(budget, self.context_tokens),
            min(max_output, self.max_output_tokens),
            tuple(notes),
        )
