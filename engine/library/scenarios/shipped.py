"""The scenarios that ship with Campfire, seeded into the database at start-up.

Each file in ``engine/library/scenarios/builtin`` is one scenario in Campfire's bundle format
(``engine.library.formats.bundle``: the same file ``/scenario export`` writes and ``/scenario
import`` reads, plus ``key`` and ``credits``); its ``key`` makes seeding idempotent: a
changed file updates the stored scenario in place, and adventures already started from it keep
their own copies.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.library.formats.bundle import read_bundle
from engine.library.formats.detect import BUNDLE
from engine.library.formats.draft import ImportedScenario, ImportLimits, ScenarioDraft, finish
from engine.library.scenarios.library import add_parts
from engine.library.scenarios.play_options import keep_play_options
from engine.storage.models import Scenario, ScenarioCard, ScenarioScript, utcnow
from engine.storage.play_models import ScenarioOpening
from engine.story.chapters.store import drop_scenario_plan

#: Package data (pyproject.toml): found beside this module however Campfire was installed.
BUILTIN_SCENARIOS = Path(__file__).resolve().parent / "builtin"


def _draft(raw: dict[str, Any], stem: str) -> ScenarioDraft:
    """A shipped file read as the bundle it is, under the same caps as an import (a shipped
    scenario that breaks them is a bug to catch at start, not at a turn)."""
    imported = finish(ImportedScenario(BUNDLE, read_bundle(raw, stem)), ImportLimits())
    return imported.draft


def _digest(draft: ScenarioDraft) -> str:
    """What was read of a shipped file, digested: the scenario as seeding would store it, so
    that a change to the file, or to how Campfire reads it, is seeded again."""
    text = json.dumps(dataclasses.asdict(draft), sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


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
        draft = _draft(raw, stem)
        digest = _digest(draft)
        fields = {
            "title": draft.title,
            "icon": draft.icon,
            "description": draft.description,
            "tags": draft.tags,
            "prompt": draft.prompt,
            "plot_essentials": draft.plot_essentials,
            "authors_note": draft.authors_note,
            "ai_instructions": draft.ai_instructions,
            "stat_schema": draft.stat_schema,
        }
        scenario = await session.scalar(select(Scenario).where(col(Scenario.builtin_key) == key))
        if scenario is not None and scenario.builtin_digest == digest:
            continue  # seeded from this very file: nothing to write
        if scenario is None:
            scenario = Scenario(builtin_key=key, builtin_digest=digest, **fields)
            session.add(scenario)
            await session.flush()
        else:
            scenario.builtin_digest = digest
            for name, value in fields.items():
                setattr(scenario, name, value)
            scenario.updated_at = utcnow()
            await session.execute(
                delete(ScenarioCard).where(col(ScenarioCard.scenario_id) == scenario.id)
            )
            await session.execute(
                delete(ScenarioScript).where(col(ScenarioScript.scenario_id) == scenario.id)
            )
            await session.execute(
                delete(ScenarioOpening).where(col(ScenarioOpening.scenario_id) == scenario.id)
            )
            await drop_scenario_plan(session, scenario.id)
        assert scenario.id is not None  # read from the database, or flushed into it above
        add_parts(session, scenario.id, draft)
        await keep_play_options(session, scenario.id, draft)
    await session.flush()
    return len(files)
