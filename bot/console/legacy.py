"""The console: play Campfire in a terminal, with no Discord token and no setup.

It drives the same engine the Discord front end does and shows the narration as it streams.
Type an action to do it; ``/say``, ``/story``, ``/continue`` (or an empty line), ``/retry`` after
a failure, ``/new`` for a fresh adventure, ``/help`` and ``/quit``.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
from dataclasses import dataclass

from bot.services import Services
from engine.actions import PlayerAction
from engine.adventures import active_adventure, list_scenarios, start_adventure
from engine.events import ActionAccepted, ReasoningDelta, TextDelta, TurnDone, TurnFailed
from engine.storage.models import ActionType, Scenario, utcnow
from engine.story import line_tail

#: The console plays in a "channel" of its own, as a local user.
CONSOLE_CHANNEL = 0
CONSOLE_USER = 0

HELP = """\
  open the door        do something (written as "> You open the door.")
  /say Hello there     speak
  /story A storm rolls in.   add to the story in your own words
  /continue            let the narrator go on (or press Enter on an empty line)
  /retry               try the last action again after a failure
  /new                 start a fresh adventure
  /quit                leave (the story is saved)"""

DIM, RESET = ("\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "")


@dataclass
class Console:
    services: Services
    adventure_id: int | None = None
    failed: PlayerAction | None = None

    async def run(self) -> None:
        print(f"Campfire console. Narrating with {self.services.provider.label}.")
        print("Type /help for commands.\n")
        await self._resume_or_start()
        while True:
            try:
                line = await asyncio.to_thread(input, "\n› ")
            except (EOFError, KeyboardInterrupt):
                print()
                return
            if not await self.handle(line.strip()):
                return

    async def handle(self, line: str) -> bool:
        """Act on one line; False to quit."""
        command, _, rest = line.partition(" ") if line.startswith("/") else ("", "", line)
        if command in ("/quit", "/exit"):
            return False
        if command == "/help":
            print(HELP)
        elif command == "/new":
            await self._start_new()
        elif command == "/retry":
            if self.failed is None:
                print("Nothing to retry.")
            else:
                await self._play(self.failed)
        elif command == "/say":
            await self._play(PlayerAction(ActionType.SAY, rest, CONSOLE_USER))
        elif command == "/story":
            await self._play(PlayerAction(ActionType.STORY, rest, CONSOLE_USER))
        elif command == "/continue" or (not command and not rest):
            await self._play(PlayerAction(ActionType.CONTINUE, "", CONSOLE_USER))
        elif command in ("", "/do"):
            await self._play(PlayerAction(ActionType.DO, rest, CONSOLE_USER))
        else:
            print(f"Unknown command {command}. Type /help.")
        return True

    async def _resume_or_start(self) -> None:
        async with self.services.db.session() as session:
            adventure = await active_adventure(session, CONSOLE_CHANNEL)
            if adventure is None:
                await self._start_new()
                return
            self.adventure_id = adventure.id
            recent = await line_tail(session, adventure.head_node_id, 6)
        print(f"Resuming “{adventure.title}”.\n")
        for node in recent:
            _print_wrapped(node.text)

    async def _start_new(self) -> None:
        async with self.services.db.session() as session, session.begin():
            old = await active_adventure(session, CONSOLE_CHANNEL)
            if old is not None:
                old.ended_at = utcnow()
            scenarios = await list_scenarios(session)
            scenario = await self._choose(scenarios)
            adventure = await start_adventure(
                session, scenario.id, channel_id=CONSOLE_CHANNEL, host_id=None
            )
            self.adventure_id = adventure.id
        print(f"\n{scenario.icon} {scenario.title}\n")
        _print_wrapped(adventure.prompt)

    async def _choose(self, scenarios: list[Scenario]) -> Scenario:
        if len(scenarios) == 1:
            return scenarios[0]
        for number, scenario in enumerate(scenarios, 1):
            print(f"  {number}. {scenario.icon} {scenario.title}")
        while True:
            answer = await asyncio.to_thread(input, "Choose a scenario by number: ")
            if answer.strip().isdigit() and 1 <= int(answer) <= len(scenarios):
                return scenarios[int(answer) - 1]

    async def _play(self, action: PlayerAction) -> None:
        assert self.adventure_id is not None
        thinking = False
        async for event in self.services.turns.play(self.adventure_id, action):
            if isinstance(event, ActionAccepted):
                print(f"\n{event.text}\n" if event.text else "")
            elif isinstance(event, ReasoningDelta):
                if not thinking:
                    print(f"{DIM}(thinking) ", end="")
                    thinking = True
                print(f"{DIM}{event.text}{RESET}", end="", flush=True)
            elif isinstance(event, TextDelta):
                if thinking:
                    print(f"{RESET}\n")
                    thinking = False
                print(event.text, end="", flush=True)
            elif isinstance(event, TurnDone):
                self.failed = None
                print()
            elif isinstance(event, TurnFailed):
                self.failed = action if event.error.retryable else None
                hint = " Type /retry to try again." if event.error.retryable else ""
                print(f"\n⚠ {event.error.message}{hint}")


def _print_wrapped(text: str) -> None:
    for paragraph in text.split("\n"):
        print(textwrap.fill(paragraph, width=100) if paragraph.strip() else "")


async def run_console(services: Services) -> None:
    await Console(services).run()
