"""A process too busy to acknowledge within Discord's 3 s (an overloaded process: here its
event loop held for longer than that): Discord answers the late acknowledgement with 10062
Unknown interaction and shows the player "This interaction failed". The bot writes nothing
(acknowledgement comes before the database) and logs a warning, not an incident with a
traceback, since there is nothing wrong with the code and nobody to tell."""

from __future__ import annotations

import asyncio
import logging
import time

from sqlalchemy import func, select

from engine.storage.coordination_models import RequestRecord
from engine.storage.database import Database
from tests.discord_env import DiscordEnv


async def test_an_interaction_acknowledged_too_late_is_a_warning_and_writes_nothing(
    env: DiscordEnv, caplog, database_url
):
    fake = env.fake
    record, payload = fake._slash(env.bob, env.channel, "do", {"action": "open the door"})
    await fake._send(record, payload, wait=False)
    time.sleep(3.3)  # noqa: ASYNC251 - the whole process stalls: that is the point
    for _ in range(100):  # the bot now receives it, tries to acknowledge, and is refused
        if any("came too late to acknowledge" in r.getMessage() for r in caplog.records):
            break
        await asyncio.sleep(0.05)
    await env.standin.idle()
    assert record.failed is not None and "3 s" in record.failed
    assert any("came too late to acknowledge" in r.getMessage() for r in caplog.records)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    db = Database(database_url)
    try:
        async with db.session() as session:
            assert await session.scalar(select(func.count()).select_from(RequestRecord)) == 0
    finally:
        await db.dispose()
    # Discord said "This interaction failed" to the player (once its deadline watch has seen
    # it too); the fixture's checks expect none.
    await asyncio.sleep(0.5)
    fake.failures.clear()
    fake.refused.clear()
