"""Campfire's bot and the Discord stand-in in a process of their own, played over a pipe, so
that a trial can kill the bot for real (SIGKILL) and start it again on the same database.

    python -m tests.trials.bot_process '{"database_url": "…", "model_url": "…", …}'

The argument is the bot's settings (``bot.config.Settings`` fields) as JSON. The player is one
user in a DM with the bot, both with fixed ids, so a restarted process finds the same adventure
(started on the first run). Standard input takes one order a line, as JSON:

    {"do": "open the door"}      /do with that action
    {"press": 1234}              press Retry on message 1234
    {"quit": true}               stop (closing the bot as a shutdown would)

and standard output answers each, once the bot has finished with it (its turn streamed and
stored, or refused), with one JSON line: ``{"answer": …, "buttons": […], "messages": […]}``,
the interaction's own response and the bot's messages new in the DM since the order (each
``{"id", "content", "buttons"}``). The first line out is ``{"ready": pid, "messages": […]}``,
once the bot has taken back what it held before a restart, with what it posted doing so. Logs go to
standard error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any

from bot.config import load_settings
from bot.discord_bot import CampfireBot
from bot.standin import FakeDiscord, StandIn
from bot.standin.records import InteractionRecord

# Below the stand-in's time-based ids, so they never collide with one it makes.
PLAYER_ID = 100_000_000_000_000_011
DM_ID = 100_000_000_000_000_012

#: How long one order may take before the process gives up waiting on the bot.
ORDER_SECONDS = 120.0


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _labels(buttons: list[tuple[str | None, str | None, bool]]) -> list[str]:
    return [label or "" for label, _, _ in buttons]


def _outcome(fake: FakeDiscord, record: InteractionRecord, before: set[int]) -> dict[str, Any]:
    answer = ""
    buttons: list[str] = []
    if record.original_message_id is not None:
        original = fake.message(record.original_message_id)
        answer, buttons = original.content, _labels(original.buttons)
    return {
        "answer": answer,
        "buttons": buttons,
        "failed": record.failed,
        "messages": _posted(fake, before),
    }


def _posted(fake: FakeDiscord, before: set[int]) -> list[dict[str, Any]]:
    """The bot's own messages in the DM (its channel messages and public follow-ups, not an
    interaction's response) new since ``before``."""
    mine = (m for m in fake.messages(DM_ID) if m.id not in before)
    new = [m for m in mine if not m.is_response and not m.ephemeral]
    return [{"id": m.id, "content": m.content, "buttons": _labels(m.buttons)} for m in new]


async def serve(settings: dict[str, Any]) -> None:
    bot = CampfireBot(load_settings(**settings))
    standin = StandIn(bot)
    fake = standin.fake
    fake.add_user("player", user_id=PLAYER_ID)
    fake.dm_channel(PLAYER_ID, channel_id=DM_ID)
    async with standin:
        # A restarted bot first takes back what it held and tells the DM of a cut-off turn:
        # what it posted then is reported with "ready", as no order's outcome would show it.
        before = {m.id for m in fake.messages(DM_ID)}
        assert bot.resuming is not None
        await bot.resuming
        await standin.idle()
        posted = _posted(fake, before)
        if await bot.services.play.adventure_in(DM_ID) is None:
            await fake.slash(PLAYER_ID, DM_ID, "start")
            await standin.idle()
        _say({"ready": os.getpid(), "messages": posted})
        while line := await asyncio.to_thread(sys.stdin.readline):
            order = json.loads(line)
            if order.get("quit"):
                break
            before = {m.id for m in fake.messages(DM_ID)}
            if "do" in order:
                record = await fake.slash(PLAYER_ID, DM_ID, "do", action=order["do"])
            else:
                record = await fake.press(PLAYER_ID, int(order["press"]), label="Retry")
            await standin.idle(timeout=ORDER_SECONDS)
            _say(_outcome(fake, record, before))


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    asyncio.run(serve(json.loads(args[0])))


if __name__ == "__main__":
    main()
