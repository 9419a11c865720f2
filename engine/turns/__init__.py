"""The turn loop: players' actions in, the narrator's reply streamed out, the turn stored.

Every turn (play, continue, retry) is a plan (``plan``), one generate step (``generate``) and
one commit (``commit``), run by the ``TurnEngine`` (``engine``).
"""

from engine.turns.commit import TurnResult
from engine.turns.engine import TurnEngine
from engine.turns.plan import Fence, TurnPlan

__all__ = ["Fence", "TurnEngine", "TurnPlan", "TurnResult"]
