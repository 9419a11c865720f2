"""Adventures to and from files (``/adventure export`` and ``/adventure import``)."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.access import active_adventure, adventure_here
from engine.accounts import touch_server, touch_user
from engine.errors import InvalidInput
from engine.formats import adventure as adventure_file
from engine.formats.draft import ImportLimits
from engine.formats.errors import ImportRejected
from engine.formats.strict_json import MAX_ARRAY_ITEMS, JsonCaps, load_json
from engine.storage.models import StoryNode, utcnow

if TYPE_CHECKING:
    from engine.access import Actor
    from engine.storage.database import Database

#: The answer to an export where no adventure runs.
NOTHING_TO_EXPORT = "There is no adventure running here to export. Start one with /start."


@dataclass(frozen=True, slots=True)
class AdventureFile:
    title: str
    filename: str
    content: bytes


@dataclass(frozen=True, slots=True)
class RestoredAdventure:
    adventure_id: int
    title: str
    icon: str
    nodes: int
    branches: int
    head_text: str
    version: int


class AdventureArchive:
    def __init__(self, db: Database, limits: ImportLimits) -> None:
        self.db = db
        self.limits = limits

    def check_size(self, size: int) -> None:
        """Refuse a file by its announced size, before downloading it."""
        if size > adventure_file.MAX_BYTES:
            raise ImportRejected(
                f"The file is {size / (1024 * 1024):.1f} MiB; the largest adventure file "
                f"accepted is {adventure_file.MAX_BYTES // (1024 * 1024)} MiB."
            )

    async def export(self, channel_id: int) -> AdventureFile:
        """The adventure running here, every branch and take of it, as one JSON file."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id, missing=NOTHING_TO_EXPORT)
            raw = await adventure_file.export_adventure(session, adventure)
        content = (json.dumps(raw, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
        if len(content) > adventure_file.MAX_BYTES:
            raise InvalidInput(
                f"This adventure's file would be {len(content) / (1024 * 1024):.1f} MiB, more "
                f"than Discord accepts from a bot ({adventure_file.MAX_BYTES // (1024 * 1024)} "
                "MiB)."
            )
        stem = re.sub(r"[^A-Za-z0-9]+", "-", raw["title"]).strip("-").lower()[:60] or "adventure"
        return AdventureFile(raw["title"], f"{stem}.adventure.json", content)

    async def read(self, data: bytes) -> adventure_file.ParsedAdventure:
        """Check an adventure file in full (nothing is written); raises ``ImportRejected``."""
        # Adventures are larger than scenarios: the cap is Discord's own upload limit, and an
        # array may be as long as the node cap.
        caps = JsonCaps(
            max_bytes=adventure_file.MAX_BYTES,
            max_array_items=max(MAX_ARRAY_ITEMS, adventure_file.MAX_NODES),
        )

        def parse() -> adventure_file.ParsedAdventure:
            return adventure_file.parse_adventure(load_json(data, caps), self.limits)

        return await asyncio.to_thread(parse)

    async def restore(
        self, actor: Actor, channel_id: int, parsed: adventure_file.ParsedAdventure
    ) -> RestoredAdventure:
        """Write a checked adventure into a channel, thread or DM (one running there ends), in
        one transaction."""
        async with self.db.session() as session, session.begin():
            await touch_user(session, actor.user_id, actor.user_name)
            if actor.server_id is not None:
                await touch_server(session, actor.server_id, actor.server_name)
            running = await active_adventure(session, channel_id)
            if running is not None:
                running.ended_at = utcnow()
            adventure = await adventure_file.write_adventure(
                session,
                parsed,
                channel_id=channel_id,
                server_id=actor.server_id,
                host_id=actor.user_id,
            )
            head = await session.get(StoryNode, adventure.head_node_id)
            assert adventure.id is not None and head is not None
            return RestoredAdventure(
                adventure.id,
                adventure.title,
                adventure.icon,
                len(parsed.nodes),
                len(parsed.branches),
                head.text,
                adventure.version,
            )
