"""Starting an adventure from a scenario."""

from __future__ import annotations

import copy
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import SQLModel, col

from engine.errors import NotFound
from engine.library.formats.draft import fill_placeholders, scenario_questions
from engine.prompt.tokens import count_tokens
from engine.storage.models import (
    ActionType,
    Adventure,
    AdventureCard,
    AdventureScript,
    Branch,
    CardFields,
    Role,
    Scenario,
    ScenarioCard,
    ScenarioScript,
    ScriptFields,
    SteeringFields,
    StoryNode,
)
from engine.story.chapters.store import begin_chapters
from engine.story.world.apply import schema_of
from engine.story.world.schema import initial_state

MAIN_BRANCH = "main"


async def start_adventure(
    session: AsyncSession,
    scenario_id: int,
    *,
    channel_id: int | None = None,
    server_id: int | None = None,
    host_id: int | None = None,
    answers: dict[str, str] | None = None,
) -> Adventure:
    """Create an adventure, copying the scenario's fields, cards and scripts.

    ``answers`` fill the scenario's ``${placeholders}`` (asked for at /start) wherever they
    appear: the opening, the steering text and the cards.

    A server adventure belongs to the server; one outside a server (a DM) belongs to its host.
    The opening text is the root of the story tree, on a branch called "main". The caller
    commits.
    """
    scenario = await session.get(Scenario, scenario_id)
    if scenario is None:
        raise NotFound("That scenario no longer exists.")
    fields = _copy(scenario, SteeringFields)
    cards = [
        _copy(card, CardFields)
        for card in await session.scalars(
            select(ScenarioCard).where(col(ScenarioCard.scenario_id) == scenario.id)
        )
    ]
    if answers:
        for name in ("prompt", "plot_essentials", "authors_note", "ai_instructions"):
            fields[name] = fill_placeholders(str(fields[name]), answers)
        for card in cards:
            for name in ("title", "keys", "entry"):
                card[name] = fill_placeholders(str(card[name]), answers)
    adventure = Adventure(
        **fields,
        scenario_id=scenario.id,
        server_id=server_id,
        owner_id=None if server_id is not None else host_id,
        host_id=host_id,
        channel_id=channel_id,
    )
    schema = schema_of(adventure.stat_schema)
    if schema is not None:
        adventure.world_state = initial_state(schema)
    session.add(adventure)
    await session.flush()
    assert adventure.id is not None  # flushed just above
    await begin_chapters(session, adventure, scenario.id)

    session.add_all(AdventureCard(**card, adventure_id=adventure.id) for card in cards)
    scripts = await session.scalars(
        select(ScenarioScript).where(col(ScenarioScript.scenario_id) == scenario.id)
    )
    session.add_all(
        AdventureScript(**_copy(script, ScriptFields), adventure_id=adventure.id)
        for script in scripts
    )

    opening = StoryNode(
        adventure_id=adventure.id,
        index=0,
        role=Role.NARRATOR,
        action=ActionType.START,
        author_id=host_id,
        text=adventure.prompt,
        token_count=count_tokens(adventure.prompt),
    )
    session.add(opening)
    await session.flush()
    branch = Branch(adventure_id=adventure.id, name=MAIN_BRANCH, tip_node_id=opening.id)
    session.add(branch)
    await session.flush()
    adventure.head_node_id = opening.id
    adventure.active_branch_id = branch.id
    await session.flush()
    return adventure


async def scenario_questions_of(session: AsyncSession, scenario: Scenario) -> list[str]:
    """The ``${questions}`` /start asks for the scenario (``scenario_questions``)."""
    cards = await session.execute(
        select(col(ScenarioCard.title), col(ScenarioCard.keys), col(ScenarioCard.entry))
        .where(col(ScenarioCard.scenario_id) == scenario.id)
        .order_by(col(ScenarioCard.position), col(ScenarioCard.id))
    )
    return scenario_questions(
        scenario.plot_essentials,
        scenario.prompt,
        scenario.authors_note,
        [tuple(row) for row in cards.all()],
    )


async def scenario_script_names(session: AsyncSession, scenario_id: int) -> list[str]:
    """The names of the scripts an adventure started from the scenario would run."""
    names = await session.scalars(
        select(col(ScenarioScript.name))
        .where(col(ScenarioScript.scenario_id) == scenario_id)
        .order_by(col(ScenarioScript.position), col(ScenarioScript.id))
    )
    return list(names)


def _copy(source: SQLModel, fields: type[SQLModel]) -> dict[str, Any]:
    """The values of the shared field set, deep enough that the copy owns its JSON.

    Keyed by field name, each value of its field's type: the sets differ, hence ``Any``.
    """
    return {name: copy.deepcopy(getattr(source, name)) for name in fields.model_fields}
