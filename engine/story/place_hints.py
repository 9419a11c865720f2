"""What this process last saw running in each place: a hint, never the truth.

Discord gives an interaction 3 seconds to be acknowledged, and a database read can wait far
longer than that (a lock, a busy pool, a starved CPU), so an action is acknowledged before the
database is asked anything. How to acknowledge it still depends on the place: where an
adventure runs, the answer is public (the action's line, then the narration); where none does,
it is a private "there is no adventure here". This map answers that at once, from what this
process last read or wrote for the place; the database confirms after the acknowledgement and
decides everything that matters (``engine.play.service``).

A wrong hint costs only looks: a public "thinking…" that is taken back for a private answer, or
a private acknowledgement of an action that then plays all the same (its narration is public as
ever). A story button's press is refused at once, without the database, only when the hint
proves the button stale: it names an older adventure than the one the hint knows, or that one
at an older version (ids and versions only grow, so no other process can have made it current
again). One exception: ``/adventure resume`` brings an older adventure back in its place. It
tells the hints of the process that runs it, which is the one a place's interactions reach (a
server's shard; DMs shard 0); a process that still knows the newer one there (shards moved
between processes meanwhile) would refuse the resumed adventure's buttons, privately and
changing nothing, until it next reads the place: the next action there (a slash command or a
message) reads it and puts the hint right.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from engine.people.access.checks import OTHER_ADVENTURE
from engine.story.tree import MOVED_ON

#: Places remembered at most; the least recently seen are forgotten first.
MAX_PLACES = 20_000


@dataclass(frozen=True, slots=True)
class Seen:
    """An adventure seen running in a place, at a version."""

    adventure_id: int
    version: int


class PlaceHints:
    """Per place (channel, thread or DM): the adventure last seen running there, or ``None``
    when none was. Per process (see ``engine.platform.coordination.per_process``)."""

    def __init__(self, capacity: int = MAX_PLACES) -> None:
        self.capacity = capacity
        self._places: OrderedDict[int, Seen | None] = OrderedDict()

    def seen(self, place: int, adventure_id: int | None, version: int | None = None) -> None:
        """What the database said, or what this process just wrote: the adventure running in
        ``place`` (None: none) at ``version``."""
        known = self._places.get(place)
        if adventure_id is not None and version is None:
            # Versions only grow: a sighting without one keeps the newest known.
            same = known is not None and known.adventure_id == adventure_id
            version = known.version if same and known is not None else 0
        self._places[place] = Seen(adventure_id, version or 0) if adventure_id is not None else None
        self._places.move_to_end(place)
        while len(self._places) > self.capacity:
            self._places.popitem(last=False)

    def expects_adventure(self, place: int, *, unknown: bool) -> bool:
        """Whether an adventure is likely running in ``place``: what this process last saw
        there, or ``unknown`` when it saw nothing (the front end's guess from the kind of
        place)."""
        if place not in self._places:
            return unknown
        return self._places[place] is not None

    def stale_button(self, place: int, drawn_for: int, version: int) -> str | None:
        """Why a button drawn for adventure ``drawn_for`` at ``version`` surely no longer acts
        here, or None when this process cannot tell: the adventure known here is a newer one
        (a place's adventure is only ever replaced by a newer one, and ids grow), or it is the
        same and has moved past that version."""
        known = self._places.get(place)
        if known is None:
            return None
        if drawn_for < known.adventure_id:
            return OTHER_ADVENTURE
        if drawn_for == known.adventure_id and version < known.version:
            return MOVED_ON
        return None
