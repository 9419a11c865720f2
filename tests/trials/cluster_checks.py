"""What the cluster trial reads to tell what happened (``tests.trials.cluster``): its actions'
tags in the stories, and the fake model server's log of requests with their start and end.

Every action the trial sends has its own tag (``m0042r03``: adventure 42, its third action), so
each may be stored at most once; the fake model's replies name their adventure ("band 0042"), so
that two adventures' memory work never looks like one piece of work done twice.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from typing import Any

from sqlalchemy import select
from sqlmodel import col

from engine.storage.database import Database
from engine.storage.models import Role, StoryNode
from engine.story.memory.prompts import MEMORY_SYSTEM, SUMMARY_SYSTEM

TAG = re.compile(r"\bm(\d{4})r(\d{2})\b")
#: How the fake model's replies name their adventure (not an action's tag: see TrialModel).
BAND = re.compile(r"\bband (\d{4})\b")


def action_text(adventure: int, number: int) -> str:
    return f"chalk the mark m{adventure:04d}r{number:02d} on the stone"


def tag_of(action: str) -> str:
    found = TAG.search(action)
    assert found is not None
    return found.group(0)


async def stored_tags(url: str) -> Counter[str]:
    """How many times each of the trial's actions is in the stories."""
    db = Database(url)
    try:
        async with db.session() as session:
            texts = await session.scalars(
                select(col(StoryNode.text)).where(col(StoryNode.role) == Role.PLAYER)
            )
            return Counter(m.group(0) for t in texts for m in TAG.finditer(t))
    finally:
        await db.dispose()


def system_text(request: dict[str, Any]) -> str:
    messages = request.get("messages") or []
    return next((m.get("content", "") for m in messages if m.get("role") == "system"), "")


def memory_call(request: dict[str, Any]) -> bool:
    return request.get("_path", "").endswith("/chat/completions") and system_text(request) in (
        MEMORY_SYSTEM,
        SUMMARY_SYSTEM,
    )


def max_concurrent_generations(requests: list[dict[str, Any]]) -> int:
    """The most narration requests of one adventure in flight at once."""
    spans: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for request in requests:
        if not request.get("_path", "").endswith("/chat/completions") or memory_call(request):
            continue
        words = json.dumps(request.get("messages"))
        found = TAG.search(words)
        if found is None:
            continue
        adventure = found.group(1)
        spans[adventure].append((request["_started"], 1))
        spans[adventure].append((request.get("_ended", float("inf")), -1))
    most = 0
    for events in spans.values():
        running = 0
        for _, step in sorted(events, key=lambda e: (e[0], e[1])):
            running += step
            most = max(most, running)
    return most


def memory_calls_repeated(requests: list[dict[str, Any]], killed_at: float | None) -> int:
    """Memory-bank calls asked again with a prompt already answered: the same work paid twice.
    One cut off by the kill (in flight as the process died) was not answered."""
    answered: dict[str, float] = {}
    repeated = 0
    for request in sorted((r for r in requests if memory_call(r)), key=lambda r: r["_started"]):
        key = json.dumps(request.get("messages"), sort_keys=True)
        ended = request.get("_ended", float("inf"))
        cut_off = killed_at is not None and request["_started"] <= killed_at <= ended + 1.0
        if key in answered and answered[key] <= request["_started"]:
            repeated += 1
        if not cut_off:
            answered.setdefault(key, ended)
    return repeated
