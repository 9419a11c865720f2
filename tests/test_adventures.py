"""Starting an adventure copies its scenario, so later edits to the scenario change nothing."""

from __future__ import annotations

from sqlalchemy import select

from engine.library.scenarios.start import start_adventure
from engine.people.access.rules import active_adventure
from engine.storage.models import (
    ActionType,
    Adventure,
    AdventureCard,
    AdventureScript,
    Branch,
    Scenario,
    ScenarioCard,
    ScenarioScript,
    StoryNode,
)


async def test_an_adventure_owns_a_copy_of_its_scenario(db):
    async with db.session() as session, session.begin():
        scenario = Scenario(
            title="Crypt",
            prompt="You descend.",
            plot_essentials="The amulet is cursed.",
            stat_schema={"stats": {"hp": {"min": 0, "max": 100}}},
        )
        session.add(scenario)
        await session.flush()
        session.add(ScenarioCard(scenario_id=scenario.id, title="Mira", keys="Mira, smith"))
        session.add(ScenarioScript(scenario_id=scenario.id, name="Dice", on_input="text"))
        await session.flush()
        adventure = await start_adventure(session, scenario.id, channel_id=5)
        adventure_id, scenario_id = adventure.id, scenario.id

    async with db.session() as session, session.begin():
        scenario = await session.get(Scenario, scenario_id)
        scenario.plot_essentials = "Changed later."
        scenario.stat_schema["stats"]["hp"]["max"] = 1
        await session.execute(
            ScenarioCard.__table__.delete().where(ScenarioCard.scenario_id == scenario_id)
        )

    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure.plot_essentials == "The amulet is cursed."
        assert adventure.stat_schema == {"stats": {"hp": {"min": 0, "max": 100}}}
        cards = list(await session.scalars(select(AdventureCard)))
        scripts = list(await session.scalars(select(AdventureScript)))
        assert [(c.title, c.keys) for c in cards] == [("Mira", "Mira, smith")]
        assert [(s.name, s.on_input) for s in scripts] == [("Dice", "text")]

        root = await session.get(StoryNode, adventure.head_node_id)
        assert (root.index, root.action, root.text, root.parent_id) == (
            0,
            ActionType.START,
            "You descend.",
            None,
        )
        branch = await session.get(Branch, adventure.active_branch_id)
        assert (branch.name, branch.tip_node_id) == ("main", root.id)
        assert (await active_adventure(session, 5)).id == adventure_id
        assert await active_adventure(session, 6) is None
