"""A server's and a user's scenario library: import, export, list, show, delete.

Who may import (``engine.people.access.may_import``): in a server, members who can manage it or hold
the role its admins named (``/server importers``); in a DM, anyone, into their own library.
The same people may delete what was imported (a user always their own). Scenarios imported
in one server are not visible in another; a user's own scenarios go with them everywhere.

An import is read and checked in full before the player is asked to confirm (``preview``), and
saved in one transaction (``save``): a file with one bad card writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import NotAllowed
from engine.library.formats import aidungeon, character_card
from engine.library.formats.bundle import write_bundle
from engine.library.formats.detect import read_scenario
from engine.library.formats.draft import (
    ImportedCard,
    ImportedScenario,
    ImportedScript,
    ImportLimits,
    Opening,
    ScenarioDraft,
)
from engine.library.reading.errors import ImportRejected
from engine.library.scenarios.lookup import resolve_scenario, visible_scenarios
from engine.library.scenarios.play_options import keep_play_options, load_play_options
from engine.library.scenarios.start import scenario_openings
from engine.people.access.checks import check_may_import, reads_scenario_scripts
from engine.people.accounts import touch_server, touch_user
from engine.people.limits import Kind, UsageLimits
from engine.storage.models import Scenario, ScenarioCard, ScenarioScript
from engine.storage.play_models import ScenarioOpening
from engine.story.chapters.store import add_scenario_plan, scenario_plan

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
    from engine.storage.database import Database


@dataclass(frozen=True, slots=True)
class SavedScenario:
    scenario_id: int
    title: str
    where: str  # "this server's library" / "your library"
    cards: int
    scripts: int
    options: int
    #: The titles of the file's other scenarios, saved beside the first (a list of several).
    more: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScenarioFile:
    filename: str
    content: bytes


@dataclass(frozen=True, slots=True)
class ScenarioExport:
    title: str
    files: list[ScenarioFile]
    #: The scripts whose code the files leave out: the exporter may not read it.
    scripts_left_out: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScenarioEntry:
    scenario_id: int
    title: str
    icon: str
    cards: int
    options: int
    #: Its author's rating ("" for unrated).
    content_rating: str = ""


@dataclass(frozen=True, slots=True)
class LibraryListing:
    server: list[ScenarioEntry] = field(default_factory=list)
    own: list[ScenarioEntry] = field(default_factory=list)
    shipped: list[ScenarioEntry] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ScenarioDetails:
    scenario_id: int
    title: str
    icon: str
    description: str
    tags: list[str]
    source: str  # "shipped with Campfire" / "this server's" / "yours"
    prompt: str
    cards: int
    scripts: int
    options: list[str]
    placeholders: list[str]
    tracks_world_state: bool
    content_rating: str = ""
    #: Openings to choose from at /start besides the first (a character card's greetings).
    openings: int = 0


class ScenarioLibrary:
    def __init__(
        self, db: Database, limits: ImportLimits, *, rate_limits: UsageLimits | None = None
    ) -> None:
        self.db = db
        self.limits = limits
        #: Imports per player per day and scenarios per library (None: none, for tools and
        #: tests).
        self.rate_limits = rate_limits

    # --- import ----------------------------------------------------------------------------

    async def check_may_import(self, actor: Actor) -> None:
        async with self.db.session() as session:
            await check_may_import(session, actor, "import scenarios")

    def check_size(self, size: int, filename: str = "") -> None:
        """Refuse a file by its announced size, before downloading it (a ``.png`` is held to
        the image cap; its content decides what it is once read)."""
        image = filename.lower().endswith(".png")
        most = self.limits.max_image_bytes if image else self.limits.max_bytes
        if size > most:
            raise ImportRejected(
                f"The {'image' if image else 'file'} is {size / 1024:,.0f} KiB; the largest "
                f"accepted is {most / 1024:,.0f} KiB."
            )

    async def preview(self, actor: Actor, data: bytes, filename: str) -> ImportedScenario:
        """Read and check a file (nothing is written); raises ``ImportRejected``."""
        await self.check_may_import(actor)
        if self.rate_limits is not None:
            await self.rate_limits.use(Kind.IMPORT, actor)
        # Parsing a 2 MiB file takes a moment: off the event loop, so other turns keep going.
        return await asyncio.to_thread(read_scenario, data, filename, self.limits)

    async def save(self, actor: Actor, imported: ImportedScenario) -> SavedScenario:
        """Write a previewed scenario, its cards, scripts and options, in one transaction."""
        async with self.db.transaction() as session:
            await check_may_import(session, actor, "import scenarios")
            await touch_user(session, actor.user_id, actor.user_name)
            server_id = actor.server_id
            owner_id = None if server_id is not None else actor.user_id
            if server_id is not None:
                await touch_server(session, server_id, actor.server_name)
            if self.rate_limits is not None:
                await self.rate_limits.check_library(
                    session, server_id, owner_id, adding=len(imported.scenarios)
                )
            titles: list[str] = []
            ids: list[int] = []
            for draft in imported.scenarios:
                # Each scenario of a file of several is one of the library's own.
                title = await _free_title(session, draft.title, server_id, owner_id)
                top = await _insert(session, draft, title, server_id, owner_id, parent_id=None)
                assert top.id is not None
                titles.append(title)
                ids.append(top.id)
            return SavedScenario(
                ids[0],
                titles[0],
                "this server's library" if server_id is not None else "your library",
                imported.card_count,
                imported.script_count,
                imported.option_count,
                tuple(titles[1:]),
            )

    # --- export, list, show, delete --------------------------------------------------------------

    async def export(self, actor: Actor, query: str, card: str | None = None) -> ScenarioExport:
        """The scenario as a Campfire bundle, and its cards as an AI Dungeon story-card file;
        or, with ``card`` (``character_card.V2`` or ``V3``), as a character card's JSON.

        Its scripts' code only for those who may read it (``may_read_scenario_scripts``): for
        anyone else the bundle has no scripts, and says which it left out."""
        async with self.db.session() as session:
            scenario = await resolve_scenario(
                session, query, server_id=actor.server_id, user_id=actor.user_id
            )
            draft = await load_draft(session, scenario)
            left_out: tuple[str, ...] = ()
            if not await reads_scenario_scripts(session, scenario, actor):
                left_out = _drop_scripts(draft)
        stem = _file_stem(draft.title)
        if card is not None:
            suffix = "v3" if card == character_card.V3 else "v2"
            written = _dump(character_card.write_card(draft, card))
            return ScenarioExport(
                draft.title, [ScenarioFile(f"{stem}.card-{suffix}.json", written)]
            )
        files = [ScenarioFile(f"{stem}.campfire.json", _dump(write_bundle(draft)))]
        if draft.cards:
            cards = aidungeon.story_card_file(draft.cards)
            files.append(ScenarioFile(f"{stem}.story-cards.json", _dump(cards)))
        return ScenarioExport(draft.title, files, left_out)

    async def listing(self, actor: Actor) -> LibraryListing:
        async with self.db.session() as session:
            scenarios = await visible_scenarios(session, actor.server_id, actor.user_id, limit=300)
            ids = [s.id for s in scenarios]
            cards = await _counts(session, col(ScenarioCard.scenario_id), ids)
            options = await _counts(session, col(Scenario.parent_id), ids)
        listing = LibraryListing()
        for s in scenarios:
            assert s.id is not None
            entry = ScenarioEntry(
                s.id,
                s.title,
                s.icon,
                cards.get(s.id, 0),
                options.get(s.id, 0),
                s.content_rating or "",
            )
            if s.builtin_key is not None:
                listing.shipped.append(entry)
            elif s.server_id is not None:
                listing.server.append(entry)
            else:
                listing.own.append(entry)
        return listing

    async def show(self, actor: Actor, query: str) -> ScenarioDetails:
        async with self.db.session() as session:
            scenario = await resolve_scenario(
                session, query, server_id=actor.server_id, user_id=actor.user_id
            )
            draft = await load_draft(session, scenario)
            assert scenario.id is not None
            return ScenarioDetails(
                scenario.id,
                draft.title,
                draft.icon,
                draft.description,
                draft.tags,
                _source(scenario),
                draft.prompt,
                len(draft.cards),
                len(draft.scripts),
                [option.title for option in draft.options],
                draft.placeholders,
                bool(draft.stat_schema),
                draft.content_rating,
                len(draft.openings),
            )

    async def delete(self, actor: Actor, query: str) -> str:
        """Delete a scenario with its cards, scripts and options; adventures keep their copies."""
        async with self.db.transaction() as session:
            scenario = await resolve_scenario(
                session, query, server_id=actor.server_id, user_id=actor.user_id
            )
            if scenario.builtin_key is not None:
                raise NotAllowed(f"“{scenario.title}” ships with Campfire and cannot be deleted.")
            if scenario.parent_id is not None:
                parent = await session.get(Scenario, scenario.parent_id)
                raise NotAllowed(
                    f"“{scenario.title}” is an option of “{parent.title if parent else '?'}”; "
                    "delete that scenario instead."
                )
            if scenario.owner_id != actor.user_id:
                await check_may_import(session, actor, "delete this server's scenarios")
            title = scenario.title
            await session.execute(delete(Scenario).where(col(Scenario.id) == scenario.id))
            return title


# --- helpers -------------------------------------------------------------------------------------


async def _free_title(
    session: AsyncSession, title: str, server_id: int | None, owner_id: int | None
) -> str:
    """The title, numbered if the library already has one like it (so /start can tell them
    apart)."""
    scope = (
        col(Scenario.server_id) == server_id
        if server_id is not None
        else (col(Scenario.owner_id) == owner_id)
    )
    taken = {
        t.casefold()
        for t in await session.scalars(
            select(col(Scenario.title)).where(scope, col(Scenario.parent_id).is_(None))
        )
    }
    candidate, n = title, 2
    while candidate.casefold() in taken:
        suffix = f" ({n})"
        candidate = title[: 100 - len(suffix)] + suffix
        n += 1
    return candidate


def add_parts(session: AsyncSession, scenario_id: int, draft: ScenarioDraft) -> None:
    """Add a draft's cards and scripts to a stored scenario, in their order (an import, or a
    shipped scenario seeded or updated)."""
    session.add_all(
        ScenarioCard(scenario_id=scenario_id, position=i, **asdict(card))
        for i, card in enumerate(draft.cards)
    )
    session.add_all(
        ScenarioScript(scenario_id=scenario_id, position=i, **asdict(script))
        for i, script in enumerate(draft.scripts)
    )
    session.add_all(
        ScenarioOpening(scenario_id=scenario_id, position=i, text=o.text, group_only=o.group_only)
        for i, o in enumerate(draft.openings, start=1)
    )
    add_scenario_plan(session, scenario_id, draft.chapters)


async def _insert(
    session: AsyncSession,
    draft: ScenarioDraft,
    title: str,
    server_id: int | None,
    owner_id: int | None,
    parent_id: int | None,
) -> Scenario:
    scenario = Scenario(
        title=title,
        icon=draft.icon,
        description=draft.description,
        tags=list(draft.tags),
        content_rating=draft.content_rating or None,
        prompt=draft.prompt,
        plot_essentials=draft.plot_essentials,
        authors_note=draft.authors_note,
        ai_instructions=draft.ai_instructions,
        stat_schema=draft.stat_schema,
        server_id=server_id,
        owner_id=owner_id,
        parent_id=parent_id,
    )
    session.add(scenario)
    await session.flush()
    assert scenario.id is not None
    add_parts(session, scenario.id, draft)
    await keep_play_options(session, scenario.id, draft)
    for option in draft.options:
        await _insert(session, option, option.title, server_id, owner_id, parent_id=scenario.id)
    await session.flush()
    return scenario


def _drop_scripts(draft: ScenarioDraft) -> tuple[str, ...]:
    """Take the scripts out of a draft and its options; the names of those taken out."""
    names = tuple(script.name for script in draft.scripts)
    draft.scripts = []
    for option in draft.options:
        names += tuple(name for name in _drop_scripts(option) if name not in names)
    return names


async def load_draft(session: AsyncSession, scenario: Scenario) -> ScenarioDraft:
    """A stored scenario with its cards, scripts and options, as a draft (for export)."""
    draft = ScenarioDraft(
        title=scenario.title,
        icon=scenario.icon,
        description=scenario.description,
        tags=list(scenario.tags or []),
        content_rating=scenario.content_rating or "",
        prompt=scenario.prompt,
        plot_essentials=scenario.plot_essentials,
        authors_note=scenario.authors_note,
        ai_instructions=scenario.ai_instructions,
        stat_schema=dict(scenario.stat_schema or {}),
    )
    assert scenario.id is not None
    await load_play_options(session, scenario.id, draft)
    cards = await session.scalars(
        select(ScenarioCard)
        .where(col(ScenarioCard.scenario_id) == scenario.id)
        .order_by(col(ScenarioCard.position), col(ScenarioCard.id))
    )
    draft.cards = [
        ImportedCard(c.title, c.keys, c.entry, c.type, c.description, c.always_on, c.lore)
        for c in cards
    ]
    scripts = await session.scalars(
        select(ScenarioScript)
        .where(col(ScenarioScript.scenario_id) == scenario.id)
        .order_by(col(ScenarioScript.position), col(ScenarioScript.id))
    )
    draft.scripts = [
        ImportedScript(
            s.name,
            s.description,
            s.enabled,
            s.shared_library,
            s.on_input,
            s.on_model_context,
            s.on_output,
        )
        for s in scripts
    ]
    draft.openings = [
        Opening(o.text, o.group_only) for o in await scenario_openings(session, scenario.id)
    ]
    draft.chapters = await scenario_plan(session, scenario.id)
    children = await session.scalars(
        select(Scenario).where(col(Scenario.parent_id) == scenario.id).order_by(col(Scenario.id))
    )
    draft.options = [await load_draft(session, child) for child in list(children)]
    return draft


async def _counts(session: AsyncSession, column, ids: list[int | None]) -> dict[int, int]:
    if not ids:
        return {}
    rows = await session.execute(
        select(column, func.count()).where(column.in_(ids)).group_by(column)
    )
    return {key: count for key, count in rows.all()}


def _source(scenario: Scenario) -> str:
    if scenario.builtin_key is not None:
        return "shipped with Campfire"
    if scenario.server_id is not None:
        return "this server's library"
    return "your library"


def _file_stem(title: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").lower()
    return stem[:60] or "scenario"


def _dump(value: object) -> bytes:
    return (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
