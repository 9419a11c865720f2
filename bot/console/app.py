"""The console: Campfire's own cogs, driven through the local Discord stand-in in a terminal.

Every command that exists in Discord exists here, typed as in Discord. The player is a user
with a fixed id talking to the bot in a DM whose id is fixed too, so the adventure in the data
folder is found again on the next run.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TextIO

from discord import app_commands

from bot.config import Settings
from bot.console.commands import (
    ConsoleInputError,
    PressInput,
    QuitInput,
    SlashInput,
    parse_line,
)
from bot.console.screen import Screen
from bot.discord_bot import CampfireBot
from bot.standin import StandIn, StandinFile
from bot.standin.world import InteractionRecord

# Fixed ids, below the range of the stand-in's time-based ids, so they never collide.
CONSOLE_USER_ID = 100_000_000_000_000_001
CONSOLE_DM_ID = 100_000_000_000_000_002

INTRO = """\
Campfire console: you are talking to the bot in a private message.
Type as in Discord: /do open the door, /say Hello, /continue, /help. Plain text is /do.
Press a button with ! and its label or number: !continue, !1. Quit with /quit or Ctrl-D.
"""


class Console:
    def __init__(
        self,
        bot: CampfireBot,
        standin: StandIn,
        out: TextIO,
        *,
        live: bool,
        files_dir: Path | None = None,
    ) -> None:
        self.bot = bot  # the client the stand-in runs
        self.standin = standin
        self.fake = standin.fake
        self.screen = Screen(out, live=live, files_dir=files_dir)
        self.live = live

    @property
    def tree(self) -> app_commands.CommandTree:
        return self.bot.tree

    async def begin(self) -> None:
        self.screen.note(INTRO)
        play = self.bot.services.play
        if await play.adventure_in(CONSOLE_DM_ID) is None:
            await self.execute(SlashInput("start"))
        else:
            self.screen.note("(Resuming your adventure where you left it.)")
            for text in await play.recent_story(CONSOLE_DM_ID):
                self.screen.note(text + "\n")

    async def handle(self, line: str) -> bool:
        """Act on one typed line; False once the player quits."""
        try:
            parsed = parse_line(line, self.tree)
        except ConsoleInputError as error:
            self.screen.note(f"⚠ {error}")
            return True
        if isinstance(parsed, QuitInput):
            return False
        if parsed is not None:
            if not self.live:
                self.screen.note(f"› {line.strip()}")
            await self.execute(parsed)
        return True

    async def execute(self, command: SlashInput | PressInput) -> None:
        try:
            if isinstance(command, SlashInput):
                files = {
                    name: StandinFile(path.name, path.read_bytes())
                    for name, path in command.files.items()
                }
                record = await self.fake.slash(
                    CONSOLE_USER_ID, CONSOLE_DM_ID, command.path, **command.options, **files
                )
            else:
                record = await self._press(command)
        except (LookupError, ValueError, OSError) as error:
            self.screen.note(f"⚠ {error}")
            return
        await self._follow(record)

    async def _press(self, command: PressInput) -> InteractionRecord:
        for message in reversed(self._visible()):
            buttons = message.buttons
            if not buttons:
                continue
            if isinstance(command.target, int):
                if command.target > len(buttons):
                    raise LookupError(f"The newest buttons are 1 to {len(buttons)}.")
                return await self.fake.press(CONSOLE_USER_ID, message.id, index=command.target)
            wanted = command.target.casefold()
            for label, custom_id, _ in buttons:
                if label is not None and label.casefold() == wanted:  # emoji-only: no label
                    return await self.fake.press(CONSOLE_USER_ID, message.id, custom_id)
        raise LookupError(f"No message here has a button called {command.target}.")

    async def _follow(self, record: InteractionRecord) -> None:
        """Show the bot's answer as it comes, until it has finished with the interaction."""
        done = asyncio.ensure_future(self.standin.idle())
        while not done.done():
            self._refresh(final=False)
            await asyncio.wait({done}, timeout=0.1)
        done.result()
        self._refresh(final=True)
        if record.modal is not None:
            await self._answer_modal(record)

    async def _answer_modal(self, record: InteractionRecord) -> None:
        modal = record.modal or {}
        self.screen.note(f"✎ {modal.get('title', 'A form')}")
        values = {}
        for field in _text_inputs(modal):
            label = field.get("label") or field["custom_id"]
            values[field["custom_id"]] = await asyncio.to_thread(input, f"{label}: ")
        follow = await self.fake.submit_modal(CONSOLE_USER_ID, record, values)
        await self._follow(follow)

    def _visible(self):
        return self.fake.messages(CONSOLE_DM_ID, visible_to=CONSOLE_USER_ID)

    def _refresh(self, *, final: bool) -> None:
        self.screen.update(self._visible(), final=final)


def _text_inputs(modal: dict) -> list[dict]:
    found = []
    for top in modal.get("components") or []:
        for component in top.get("components") or [top.get("component") or {}]:
            if component.get("type") == 4:  # text input
                found.append(component)
    return found


async def run_console(
    settings: Settings, *, stdin: TextIO = sys.stdin, out: TextIO = sys.stdout
) -> None:
    live = stdin.isatty() and out.isatty()
    bot = CampfireBot(settings)
    standin = StandIn(bot)
    standin.fake.add_user("Player", user_id=CONSOLE_USER_ID)
    standin.fake.dm_channel(CONSOLE_USER_ID, channel_id=CONSOLE_DM_ID)
    async with standin:
        files_dir = settings.data_dir / "console-files"
        console = Console(bot, standin, out, live=live, files_dir=files_dir)
        await console.begin()
        while True:
            if live:
                try:
                    line = await asyncio.to_thread(input, "› ")
                except EOFError:
                    break
            else:
                line = await asyncio.to_thread(stdin.readline)
                if not line:
                    break
            if not await console.handle(line):
                break
