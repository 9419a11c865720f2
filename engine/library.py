"""The scenarios that ship with Campfire, seeded into the database at start-up.

Each file in ``data/scenarios`` is one scenario; its ``key`` makes seeding idempotent: a
changed file updates the stored scenario in place, and adventures already started from it keep
their own copies.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from engine.storage.models import Scenario, ScenarioCard, ScenarioScript, utcnow
from engine.world_state.schema import parse_schema

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
BUILTIN_SCENARIOS = DATA_DIR / "scenarios"


def _scenario_fields(raw: dict[str, Any]) -> dict[str, Any]:
    tags = raw.get("tags", [])
    if isinstance(tags, str):
        tags = [tag.strip() for tag in tags.split(",") if tag.strip()]
    return {
        "title": raw["title"],
        "icon": raw.get("icon", ""),
        "description": raw.get("description", ""),
        "tags": tags,
        "prompt": raw.get("prompt", ""),
        "plot_essentials": raw.get("plot_essentials", raw.get("memory", "")),
        "authors_note": raw.get("authors_note", ""),
        "ai_instructions": raw.get("ai_instructions", ""),
        "stat_schema": raw.get("stat_schema", {}),
    }


def _read_scenario_files(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.stem, json.loads(path.read_text(encoding="utf-8")))
        for path in sorted(folder.glob("*.json"))
    ]


async def seed_builtin_scenarios(session: AsyncSession, folder: Path = BUILTIN_SCENARIOS) -> int:
    """Insert or refresh every shipped scenario; returns how many there are. Caller commits."""
    files = await asyncio.to_thread(_read_scenario_files, folder)
    for stem, raw in files:
        key = raw.get("key") or stem
        # A shipped scenario with a broken schema is a bug to catch at start, not at a turn.
        parse_schema(raw.get("stat_schema"))
        scenario = await session.scalar(select(Scenario).where(Scenario.builtin_key == key))
        if scenario is None:
            scenario = Scenario(builtin_key=key, **_scenario_fields(raw))
            session.add(scenario)
            await session.flush()
        else:
            for name, value in _scenario_fields(raw).items():
                setattr(scenario, name, value)
            scenario.updated_at = utcnow()
            await session.execute(
                delete(ScenarioCard).where(ScenarioCard.scenario_id == scenario.id)
            )
            await session.execute(
                delete(ScenarioScript).where(ScenarioScript.scenario_id == scenario.id)
            )
        session.add_all(
            ScenarioCard(
                scenario_id=scenario.id,
                position=i,
                type=card.get("type", "class"),
                title=card.get("title", card.get("name", "")),
                keys=card.get("keys", ""),
                entry=card.get("entry", card.get("value", "")),
                description=card.get("description", card.get("notes", "")),
            )
            for i, card in enumerate(raw.get("story_cards", []))
        )
    await session.flush()
    return len(files)
