"""What happened to turns and their leases, told to whoever watches (the bot's metrics).

The engine counts nothing itself and knows no metrics library: ``TurnIntake`` and
``TurnLeases`` call a ``PlayObserver`` as things happen, and the front end maps the calls to
what it exports (``bot/metrics.py``). Every method runs on the turn's path, so it must not
block and must not raise.
"""

from __future__ import annotations

from typing import Protocol

from engine.platform.events import Usage


class TurnFigures(Protocol):
    """What an observer reads of a stored turn (``engine.turns.TurnResult`` has it): the
    observer sits below the turns, so it names only what it reads."""

    @property
    def latency_ms(self) -> int: ...

    @property
    def first_token_ms(self) -> int | None: ...

    @property
    def usage(self) -> Usage | None: ...


class PlayObserver(Protocol):
    def turn_done(self, result: TurnFigures) -> None:
        """A turn was stored; its model's latency and usage are in ``result``."""

    def turn_failed(self, kind: str) -> None:
        """A turn that ran was rolled back; ``kind`` is the error's class name (a small,
        fixed set: ``ModelError``, ``StoryMovedOn``, ``InternalError``…)."""

    def lease_taken_over(self, adventure_id: int) -> None:
        """A turn lease was reclaimed from a holder that died (by a claim or the reaper)."""


class NoObserver:
    """Nobody watches (tools, tests, the console)."""

    def turn_done(self, result: TurnFigures) -> None:
        pass

    def turn_failed(self, kind: str) -> None:
        pass

    def lease_taken_over(self, adventure_id: int) -> None:
        pass
