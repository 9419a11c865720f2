"""Where Canon meets the narrative state: the facts the narration may not change.

The order of authority is the host's correction, then Canon, then the narration
(``engine.story_state.events``). The validator takes Canon as a set of protected fact ids or
texts; this module is the one place that set is made, so the knowledge library (Canon sources,
issue 21's first part) feeds it here and nothing else changes. Until it does, nothing is
protected but what the host set.
"""

from __future__ import annotations

from collections.abc import Iterable


def protected_facts(canon: Iterable[str] = ()) -> frozenset[str]:
    """The fact ids or texts the narration may not retract or rewrite, compared case aside:
    ``canon`` is what the knowledge library's Canon establishes (none yet)."""
    return frozenset(text.strip().casefold() for text in canon if text.strip())
