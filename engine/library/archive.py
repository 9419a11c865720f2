"""Adventures to and from files (``/adventure export`` and ``/adventure import``)."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Final

from engine.errors import InvalidInput, StoryMovedOn
from engine.library.formats import adventure as adventure_file
from engine.library.formats.adventure_content import banned_here, masked_story
from engine.library.formats.adventure_export import export_adventure
from engine.library.formats.draft import ImportLimits
from engine.library.formats.prose_render import EXTENSIONS, ProseFormat, render
from engine.library.formats.story_prose import read_story_prose
from engine.library.formats.strict_json import MAX_ARRAY_ITEMS, JsonCaps, load_json
from engine.library.reading.errors import ImportRejected
from engine.people.access.checks import check_may_import_scripts
from engine.people.access.rules import adventure_here, may_read_scripts
from engine.people.accounts import touch_server, touch_user
from engine.people.adventure_caps import AdventureCaps, check_may_begin
from engine.people.content import ContentPolicy
from engine.people.limits import Kind, UsageLimits
from engine.storage.models import StoryNode, utcnow

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
    from engine.storage.database import Database

#: The answer to an export where no adventure runs.
NOTHING_TO_EXPORT = "There is no adventure running here to export. Start one with /start."
#: The export ``/adventure import`` reads back: the whole tree (the others are prose to read).
JSON_FORMAT = "json"


@dataclass(frozen=True, slots=True)
class AdventureFile:
    title: str
    filename: str
    content: bytes
    #: The scripts whose code the file leaves out: the exporter may not read it.
    scripts_left_out: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RestoredAdventure:
    adventure_id: int
    title: str
    icon: str
    nodes: int
    branches: int
    head_text: str
    version: int
    #: The node the story stands on, shown when the adventure is posted.
    head_node_id: int
    #: How many of its passages had banned words masked (said to the importer).
    masked: int = 0


@dataclass(frozen=True, slots=True)
class RunningHere:
    """The adventure an import would end where it runs: asked about before it is."""

    adventure_id: int
    title: str


class NotAsked(Enum):
    """``restore`` called without asking first (tools, tests): whatever runs there ends."""

    NOT_ASKED = "not asked"


NOT_ASKED: Final = NotAsked.NOT_ASKED


class AdventureArchive:
    def __init__(
        self,
        db: Database,
        limits: ImportLimits,
        *,
        caps: AdventureCaps | None = None,
        rate_limits: UsageLimits | None = None,
        content: ContentPolicy | None = None,
    ) -> None:
        self.db = db
        self.limits = limits
        #: The operator's content rules: their banned words (with the server's and the file's
        #: own) are masked in an imported story, as in a narration.
        self.content = content or ContentPolicy()
        #: Imports per player per day (None: no limit, for tools and tests).
        self.rate_limits = rate_limits
        #: The operator's caps on adventures per player; an import begins one too.
        self.caps = caps

    def check_size(self, size: int) -> None:
        """Refuse a file by its announced size, before downloading it."""
        if size > adventure_file.MAX_BYTES:
            raise ImportRejected(
                f"The file is {size / (1024 * 1024):.1f} MiB; the largest adventure file "
                f"accepted is {adventure_file.MAX_BYTES // (1024 * 1024)} MiB."
            )

    async def export(self, actor: Actor, channel_id: int, kind: str = JSON_FORMAT) -> AdventureFile:
        """The adventure running here as one file, for anyone where it runs.

        ``kind`` "json" (the default): every branch and take of it, for ``/adventure import``;
        its scripts' code only for those who may read it (``may_read_scripts``): for anyone
        else the file has no scripts, and says which it left out. "text", "markdown" or
        "html": its current line as prose to read (``engine.library.formats.story_prose``),
        which holds no script at all."""
        prose_kind = None if kind == JSON_FORMAT else _prose_format(kind)
        async with self.db.session() as session:
            # The one check every format shares: the adventure runs where it is asked for.
            adventure = await adventure_here(session, channel_id, missing=NOTHING_TO_EXPORT)
            if prose_kind is not None:
                prose = await read_story_prose(session, adventure)
            else:
                raw = await export_adventure(session, adventure)
        if prose_kind is not None:
            content = _fitting(render(prose, prose_kind).encode("utf-8"))
            name = f"{_stem(adventure.title)}.adventure.{EXTENSIONS[prose_kind]}"
            return AdventureFile(adventure.title, name, content)
        left_out: tuple[str, ...] = ()
        if raw["scripts"] and not may_read_scripts(adventure, actor):
            left_out = tuple(script["name"] for script in raw["scripts"])
            raw["scripts"] = []
        content = _fitting((json.dumps(raw, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
        name = f"{_stem(raw['title'])}.adventure.json"
        return AdventureFile(raw["title"], name, content, left_out)

    async def read(self, data: bytes, actor: Actor | None = None) -> adventure_file.ParsedAdventure:
        """Check an adventure file in full (nothing is written); raises ``ImportRejected``.
        ``actor``: who imports it, counted against the imports per day before it is read."""
        if actor is not None and self.rate_limits is not None:
            await self.rate_limits.use(Kind.IMPORT, actor)
        # Adventures are larger than scenarios: the cap is Discord's own upload limit, and an
        # array may be as long as the node cap.
        caps = JsonCaps(
            max_bytes=adventure_file.MAX_BYTES,
            max_array_items=max(MAX_ARRAY_ITEMS, adventure_file.MAX_NODES),
        )

        def parse() -> adventure_file.ParsedAdventure:
            return adventure_file.parse_adventure(load_json(data, caps), self.limits)

        return await asyncio.to_thread(parse)

    async def check_may_restore(
        self, actor: Actor, place: int | None, parsed: adventure_file.ParsedAdventure
    ) -> RunningHere | None:
        """Whatever would refuse the import in ``place`` (None: a thread not opened yet),
        asked before a thread is opened for it; ``restore`` asks again as it writes. The
        adventure running there, which the import would end: the importer is asked first."""
        check_may_import_scripts(actor, _script_names(parsed))
        async with self.db.session() as session:
            running = await check_may_begin(session, actor, place, self.caps)
        if running is None:
            return None
        assert running.id is not None
        return RunningHere(running.id, running.title)

    async def restore(
        self,
        actor: Actor,
        channel_id: int,
        parsed: adventure_file.ParsedAdventure,
        *,
        opened_from: int | None = None,
        replaces: int | None | NotAsked = NOT_ASKED,
    ) -> RestoredAdventure:
        """Write a checked adventure into a channel, thread or DM, in one transaction. One
        running there ends, if ``actor`` may end it; its scripts come in only with the script
        right, and the caps on adventures per player count it (``check_may_begin``).
        ``opened_from``: the channel a thread was opened from for it (as ``PlayService.start``).
        The words banned there are masked in the story as it is written (``masked_story``).
        ``replaces``: the adventure the importer agreed to end there (``check_may_restore``'s,
        None for none); refused when another runs there now, since they were not asked about
        it. Left out (tools, tests), whatever runs there ends."""
        check_may_import_scripts(actor, _script_names(parsed))
        async with self.db.transaction() as session:
            # First: the user's row lock queues this player's starts (see adventure_caps).
            await touch_user(session, actor.user_id, actor.user_name)
            if actor.server_id is not None:
                await touch_server(session, actor.server_id, actor.server_name)
            running = await check_may_begin(session, actor, channel_id, self.caps)
            if replaces is not NOT_ASKED and (running.id if running else None) != replaces:
                raise StoryMovedOn(
                    "What runs here changed since you were asked (an adventure began or ended); "
                    "nothing was imported. Import the file again with `/adventure import`."
                )
            if running is not None:
                running.ended_at = utcnow()
            # An imported story obeys the rules the model's words do where it will run.
            banned = await banned_here(session, actor, parsed, self.content)
            parsed, masked = masked_story(parsed, banned)
            adventure = await adventure_file.write_adventure(
                session,
                parsed,
                channel_id=channel_id,
                server_id=actor.server_id,
                host_id=actor.user_id,
            )
            adventure.parent_channel_id = opened_from
            head = await session.get(StoryNode, adventure.head_node_id)
            assert adventure.id is not None and head is not None and head.id is not None
            return RestoredAdventure(
                adventure.id,
                adventure.title,
                adventure.icon,
                len(parsed.nodes),
                len(parsed.branches),
                head.text,
                adventure.version,
                head.id,
                masked,
            )


def _prose_format(kind: str) -> ProseFormat:
    try:
        return ProseFormat(kind)
    except ValueError:
        shown = ", ".join((JSON_FORMAT, *ProseFormat))
        raise InvalidInput(f"An adventure exports as {shown}; not as “{kind}”.") from None


def _fitting(content: bytes) -> bytes:
    """``content``, if Discord takes a file that large from a bot."""
    if len(content) > adventure_file.MAX_BYTES:
        raise InvalidInput(
            f"This adventure's file would be {len(content) / (1024 * 1024):.1f} MiB, more "
            f"than Discord accepts from a bot ({adventure_file.MAX_BYTES // (1024 * 1024)} "
            "MiB)."
        )
    return content


def _stem(title: str) -> str:
    """A file name's first part from the adventure's title: ASCII words joined by "-"."""
    return re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").lower()[:60] or "adventure"


def _script_names(parsed: adventure_file.ParsedAdventure) -> list[str]:
    return [script.name for script in parsed.steering.scripts]
