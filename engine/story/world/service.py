"""`/state` for the front end: the whole world state with its bands, and a host's correction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.errors import InvalidInput
from engine.people.access.checks import check_may_steer
from engine.people.access.rules import adventure_here
from engine.platform.sanitise import QUOTE_MAX, echo, sanitise
from engine.story.versions import advance_version
from engine.story.world.apply import current_state, schema_of
from engine.story.world.referee import set_value
from engine.story.world.render import chip, describe

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
    from engine.storage.database import Database

NO_STATE = "This adventure's scenario tracks no world state."


@dataclass(frozen=True, slots=True)
class StateView:
    title: str
    text: str


class WorldStateService:
    """What the front end calls for /state show and /state set."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def show(self, channel_id: int) -> StateView:
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            schema = schema_of(adventure.stat_schema)
            if schema is None:
                raise InvalidInput(NO_STATE)
            return StateView(
                adventure.title, describe(schema, current_state(schema, adventure.world_state))
            )

    async def set(self, channel_id: int, actor: Actor, path: str, value: str) -> str:
        """Set one value, refereed for type and range like any change; the chip of what
        changed. Who may: whoever may steer the adventure.

        The story's version moves on, so a turn being written meanwhile is not saved over it.
        """
        path, value = sanitise(path).strip(), sanitise(value)
        async with self.db.transaction() as session:
            adventure = await adventure_here(session, channel_id, for_update=True)
            assert adventure.id is not None  # a stored row
            await check_may_steer(session, adventure, actor)
            schema = schema_of(adventure.stat_schema)
            if schema is None:
                raise InvalidInput(NO_STATE)
            new_state, report = set_value(
                schema,
                current_state(schema, adventure.world_state),
                path,
                value,
                turn_index=0,  # a host's correction neither checks nor starts a cooldown
            )
            if report.rejected and not report.applied and not report.clamped:
                problems = "; ".join(
                    f"{echo(r.path, QUOTE_MAX)}: {r.reason}" for r in report.rejected
                )
                raise InvalidInput(f"Nothing was changed ({problems}).")
            await advance_version(
                session,
                adventure.id,
                adventure.version,
                moved_on="The story moved on meanwhile; nothing was changed.",
                world_state=new_state,
            )
            return chip(schema, report) or "Nothing changed: it already had that value."
