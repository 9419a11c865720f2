"""Finding scenarios: what a server or a user can see, by id or by part of a title."""

from __future__ import annotations

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotFound
from engine.platform.sanitise import QUOTE_MAX, echo, row_id, sanitise
from engine.storage.models import Scenario, Server

#: The scenario a new server plays until an admin picks another.
STARTER_KEY = "lantern-road"
#: How many titles an unknown scenario's answer names.
SCENARIOS_NAMED = 10


def _visible(server_id: int | None, user_id: int | None) -> ColumnElement[bool]:
    """Shipped scenarios, the server's own, and the user's own; never another server's."""
    clauses: list[ColumnElement[bool]] = [col(Scenario.builtin_key).is_not(None)]
    if server_id is not None:
        clauses.append(col(Scenario.server_id) == server_id)
    if user_id is not None:
        clauses.append(col(Scenario.owner_id) == user_id)
    return or_(*clauses)


async def visible_scenarios(
    session: AsyncSession, server_id: int | None, user_id: int | None, *, limit: int = 100
) -> list[Scenario]:
    # Options of a menu scenario are chosen through their parent, never listed on their own.
    rows = await session.scalars(
        select(Scenario)
        .where(_visible(server_id, user_id), col(Scenario.parent_id).is_(None))
        .order_by(col(Scenario.title))
        .limit(limit)
    )
    return list(rows)


async def resolve_scenario(
    session: AsyncSession, query: str | None, *, server_id: int | None, user_id: int | None
) -> Scenario:
    """The scenario a player asked for: an id (from autocomplete), a unique part of a title, or
    with no query the server's default, else the starter."""
    query = sanitise(query or "").strip()
    if not query:
        return await default_scenario(session, server_id)
    visible = _visible(server_id, user_id)
    # A number beyond any id is looked for among the titles only (it never goes into the id
    # query: the database would refuse it), and is not found like any other unknown id.
    scenario_id = row_id(query)
    if scenario_id is not None:
        scenario = await session.scalar(
            select(Scenario).where(col(Scenario.id) == scenario_id, visible)
        )
        if scenario is not None:
            return scenario
    matches = list(
        await session.scalars(
            select(Scenario)
            .where(
                visible,
                col(Scenario.parent_id).is_(None),
                col(Scenario.title).ilike(f"%{_escape_like(query)}%", escape="\\"),
            )
            .order_by(col(Scenario.title))
            .limit(6)
        )
    )
    exact = [s for s in matches if s.title.casefold() == query.casefold()]
    if len(exact) == 1:
        return exact[0]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        # Named, not "start typing to see the list": a front end without autocomplete (the
        # console) has no list to see, and a title is quicker read than looked for.
        shown = await visible_scenarios(session, server_id, user_id, limit=SCENARIOS_NAMED + 1)
        titles = ", ".join(f"“{echo(s.title, QUOTE_MAX)}”" for s in shown[:SCENARIOS_NAMED])
        more = ", and more: /scenario list shows them all" if len(shown) > SCENARIOS_NAMED else ""
        there = f" Scenarios: {titles}{more}." if titles else ""
        raise NotFound(f"No scenario matches “{echo(query, QUOTE_MAX)}”.{there}")
    titles = ", ".join(f"“{s.title}”" for s in matches[:5])
    raise InvalidInput(
        f"“{echo(query, QUOTE_MAX)}” matches several scenarios: {titles}. Be more specific."
    )


async def default_scenario(session: AsyncSession, server_id: int | None) -> Scenario:
    if server_id is not None:
        server = await session.get(Server, server_id)
        if server is not None and server.default_scenario_id is not None:
            scenario = await session.get(Scenario, server.default_scenario_id)
            if scenario is not None:
                return scenario
    scenario = await session.scalar(
        select(Scenario).where(col(Scenario.builtin_key) == STARTER_KEY)
    )
    if scenario is None:
        scenario = await session.scalar(
            select(Scenario)
            .where(col(Scenario.builtin_key).is_not(None))
            .order_by(col(Scenario.id))
        )
    if scenario is None:
        raise NotFound("No scenarios are installed. Ask the bot's operator to check its data.")
    return scenario


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
