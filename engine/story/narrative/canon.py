"""Where Canon meets the narrative state: the facts the narration may not change.

The order of authority is the host's correction, then Canon, then the narration
(``engine.story.narrative.events``). The validator takes Canon as a set of protected fact ids or
texts; this module is the one place that set is made. The knowledge library feeds it the turn's
Canon passages (``engine.library.knowledge.prompt.canon_texts``: those retrieved for the scene and
those always included): a fact whose words a Canon passage states is Canon's, and the narration may
not retract or rewrite it.
"""

from __future__ import annotations

from collections.abc import Iterable


def protected_facts(canon: Iterable[str] = ()) -> frozenset[str]:
    """The fact ids or texts the narration may not retract or rewrite, compared case aside:
    ``canon`` is what the knowledge library's Canon establishes, as fact ids or as passages
    (a fact is protected by one that states its words, ``engine.story.narrative.events``)."""
    return frozenset(text.strip().casefold() for text in canon if text.strip())
