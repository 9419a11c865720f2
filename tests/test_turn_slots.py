"""A process runs at most ``max_running`` turns at once (engine.turns.engine): the rest wait
for a slot, holding no connection, and then play; none fails for the wait."""

from __future__ import annotations

import asyncio

from engine.llm.providers.resolver import OperatorDefault
from engine.story.actions import ActionType, PlayerAction
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from tests.fakes.openai_server import Reply
from tests.helpers import new_adventure


async def test_turns_beyond_the_slots_wait_then_play(db, provider, fake_model):
    engine = TurnEngine(db, OperatorDefault(provider), max_running=2)
    adventures = [await new_adventure(db, channel_id=100 + i) for i in range(5)]
    fake_model.queue(*(Reply(text="The road bends.", delay=0.02) for _ in adventures))

    async def turn(adventure_id: int) -> object:
        events = [e async for e in engine.play(adventure_id, PlayerAction(ActionType.DO, "walk"))]
        return events[-1]

    results = await asyncio.gather(*(turn(a) for a in adventures))
    assert all(isinstance(r, TurnDone) for r in results)
    # At the model server, never more than two replies in flight at once.
    chats = [r for r in fake_model.requests if r["_path"].endswith("/chat/completions")]
    assert len(chats) == len(adventures)
    edges = sorted(
        [(r["_started"], 1) for r in chats] + [(r["_ended"], -1) for r in chats],
        key=lambda e: (e[0], e[1]),
    )
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    assert most == 2
