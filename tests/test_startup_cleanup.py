"""Guest cleanup runs when the bot starts, not only every few hours after: a bot restarted more
often than that would otherwise never clean up. The real bot on the stand-in, both databases."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from engine.storage.database import Database
from engine.storage.models import User, utcnow
from tests.discord_env import campfire_on_standin

IDLE_GUEST = 777_000_000_000_000_001
RECENT_GUEST = 777_000_000_000_000_002


async def test_idle_guests_are_removed_at_start_up(tmp_path, fake_model, caplog, database_url):
    db = Database(database_url)
    try:
        async with db.transaction() as session:
            long_ago = utcnow() - timedelta(days=45)
            session.add(
                User(id=IDLE_GUEST, name="gone", created_at=long_ago, last_seen_at=long_ago)
            )
            session.add(User(id=RECENT_GUEST, name="here"))
    finally:
        await db.dispose()
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, guest_retention_days=30
    ) as env:
        services = env.bot.services
        for _ in range(100):  # the first run is due at once; it runs on the scheduler's loop
            async with services.db.session() as session:
                if await session.get(User, IDLE_GUEST) is None:
                    break
            await asyncio.sleep(0.05)
        async with services.db.session() as session:
            assert await session.get(User, IDLE_GUEST) is None
            assert await session.get(User, RECENT_GUEST) is not None
