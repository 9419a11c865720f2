"""The console: Campfire's own cogs, driven through the local Discord stand-in in a terminal.

Every command that exists in Discord exists here, typed as in Discord. The player is a user
with a fixed id talking to the bot in a DM whose id is fixed too, so the adventure in the data
folder is found again on the next run. With ``--server`` the console sits in a server channel
instead, and ``/as NAME`` changes who types (``place.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TextIO

from discord import app_commands

from bot.config import Settings
from bot.console.commands import (
    AsInput,
    ConsoleInputError,
    PressInput,
    QuitInput,
    SlashInput,
    button_keys,
    parse_line,
)
from bot.console.keys import TypeAhead
from bot.console.place import (
    CHANNEL_NAME,
    CONSOLE_CHANNEL_ID,
    CONSOLE_USER_ID,
    Place,
    PlaceError,
)
from bot.console.reader import CommandCompleter, TerminalReader
from bot.console.screen import Screen, button_labels
from bot.discord_bot import CampfireBot
from bot.standin import StandIn, StandinFile
from bot.standin.records import InteractionRecord
from cogs.help import embedded_model_note
from engine.errors import CampfireError

INTRO = """\
Campfire console: you are talking to the bot in a private message.
Type as in Discord: /do open the door, /say Hello, /continue, /help. Plain text is /do.
Press a button with ! and its key or number, shown on it: !continue, !do, !next, !1.
Quit with /quit or Ctrl-D.
"""

SERVER_INTRO = f"""\
Campfire console: you are in #{CHANNEL_NAME} of a server you own, to play as a group.
/as ann types as the member ann from now on (made on first use, without your rights);
/as alone lists the members. /start opens an adventure in a thread, and the console follows it.
Type as in Discord: /do open the door, /say Hello, /continue, /help. Plain text is /do.
Press a button with ! and its key or number, shown on it: !continue, !do, !next, !1.
Quit with /quit or Ctrl-D.
"""


#: How long the console waits for the bot to take back, at start, what it held before.
RESUME_WAIT_S = 30.0
#: A turn still running this long (a heavy script, a slow or embedded model) is said to be, and
#: again every ``STILL_RUNNING_EVERY`` seconds: the console waits for it however long it takes.
STILL_RUNNING_AFTER = 15.0
STILL_RUNNING_EVERY = 30.0


class Console:
    def __init__(
        self,
        bot: CampfireBot,
        standin: StandIn,
        out: TextIO,
        *,
        live: bool,
        place: Place,
        files_dir: Path | None = None,
        read: Callable[[str], Awaitable[str]] | None = None,
        keys: TypeAhead | None = None,
        reader: TerminalReader | None = None,
    ) -> None:
        """``read``: the next line typed after a prompt (EOFError at the end of the input);
        ``keys``: the terminal's, when ``live``; ``reader``: the terminal's line editor, which
        then reads the lines and the forms' fields instead of ``read``."""
        self.bot = bot  # the client the stand-in runs
        self.read = read or _typed
        self.standin = standin
        self.fake = standin.fake
        self.place = place
        self.screen = Screen(out, live=live, files_dir=files_dir, names=place, shared=place.server)
        self.live = live
        self.keys = keys
        self.reader = reader
        #: A command is being carried out (its answer followed): what Ctrl-C cuts off.
        self.busy = False

    @property
    def prompt(self) -> str:
        """What the next line is typed after: in a server, who types it."""
        return f"{self.place.user_name} › " if self.place.server else "› "

    @property
    def tree(self) -> app_commands.CommandTree:
        return self.bot.tree

    async def begin(self) -> None:
        try:
            await self._story_again()
        finally:
            # The bot tells of a turn the restart cut off (with its Retry) only now, below the
            # story and its buttons, as it would come in Discord.
            self.bot.may_announce.set()
        await self._resumed()

    async def _story_again(self) -> None:
        """The introduction, then the story where it stands: its newest entries, and its
        newest turn on a message the bot sends again with the turn's buttons, since the
        stand-in starts empty each run (the bot's own way to put them where the story stands
        when the message that had them is gone: ``Narrator.show_head``)."""
        play = self.bot.services.play
        place = self.place
        self.screen.note(SERVER_INTRO if place.server else INTRO)
        # On the embedded model: what it is, how slow a first turn is, and the way to a real one.
        note = embedded_model_note(self.bot.services.provider)
        if note:
            self.screen.note(note)
        if place.server:
            if place.channel_id == CONSOLE_CHANNEL_ID:
                return  # nothing to resume: the players /start when they are ready
            self.screen.note(
                f"(Resuming the adventure in #{place.channel_name(place.channel_id)}, "
                "where the console types now.)"
            )
        else:
            if await play.adventure_in(place.channel_id) is None:
                self.bot.may_announce.set()
                await self.execute(SlashInput("start"))
                return
            self.screen.note("(Resuming your adventure where you left it.)")
        try:
            head = await self.bot.services.tree.head_now(place.channel_id)
        except CampfireError:
            head = None
        story = await play.recent_story(place.channel_id)
        if head is not None and story and story[-1] == head.head_text:
            story = story[:-1]  # the bot's message below shows it, with the buttons
        for text in story:
            self.screen.note(text + "\n")
        if head is not None:
            await self.bot.narrator.show_head(
                self.bot.get_partial_messageable(place.channel_id), head
            )
            self._refresh(final=True)

    async def _resumed(self) -> None:
        """What the bot says as it takes back what it held before (a turn cut off by Ctrl-C
        or a crash, with its Retry), shown before the first prompt."""
        resuming = self.bot.resuming
        if resuming is not None:
            await asyncio.wait({resuming}, timeout=RESUME_WAIT_S)
            self._refresh(final=True)

    async def ask(self, prompt: str) -> str:
        """The next line typed after ``prompt`` (EOFError at the end of the input)."""
        self.screen.detach()  # the prompt and the line typed come below the newest block
        if self.reader is not None:
            # It takes the keys typed during the turn too, and shows them itself.
            return await self.reader.line(prompt)
        line = await self.read(prompt)
        if self.keys is not None and self.keys.unseen(line.rstrip("\n")):
            self.screen.typed(line)  # typed during the turn, when nothing echoed it
        return line

    def button_keys(self) -> list[str]:
        """The keys of the newest buttons, for ``!`` to complete."""
        for message in reversed(self._visible()):
            if message.buttons:
                return button_keys(button_labels(message))
        return []

    def stopped(self) -> None:
        """Ctrl-C: say what became of what was under way."""
        if self.busy:
            self.screen.note(
                "\n(Stopped. What the bot was doing was cut off and nothing of it was saved; "
                "the next start offers to play an interrupted turn again.)"
            )
        else:
            self.screen.note("")

    async def handle(self, line: str) -> bool:
        """Act on one typed line; False once the player quits."""
        try:
            parsed = parse_line(line, self.tree, self.place.person_named)
        except ConsoleInputError as error:
            self.screen.note(f"⚠ {error}")
            return True
        if isinstance(parsed, QuitInput):
            return False
        if parsed is not None:
            if not self.live:
                self.screen.note(f"{self.prompt}{line.strip()}")
            if isinstance(parsed, AsInput):
                await self._switch(parsed.name)
            else:
                # Left set when cancelled (Ctrl-C): ``stopped`` reads it afterwards.
                self.busy = True
                await self.execute(parsed)
                self.busy = False
        return True

    async def _switch(self, name: str | None) -> None:
        place = self.place
        try:
            if name is None:
                self.screen.note(
                    "Members: " + ", ".join(place.members()) + f". Typing now: {place.user_name}."
                )
                return
            new = await place.switch(name)
        except PlaceError as error:
            self.screen.note(f"⚠ {error}")
            return
        joined = ", who joins the server now as a plain member" if new else ""
        self.screen.note(f"(Typing as {place.user_name}{joined}.)")
        # What only this member sees, made while another typed, is theirs to see now.
        self._refresh(final=True)

    async def execute(self, command: SlashInput | PressInput) -> None:
        place = self.place
        threads = place.threads_here()
        try:
            if isinstance(command, SlashInput):
                files = {
                    name: StandinFile(path.name, path.read_bytes())
                    for name, path in command.files.items()
                }
                record = await self.fake.slash(
                    place.user_id, place.channel_id, command.path, **command.options, **files
                )
            else:
                record = await self._press(command)
        except (LookupError, ValueError, OSError) as error:
            self.screen.note(f"⚠ {error}")
            return
        await self._follow(record)
        if place.server and place.follow_new_thread(threads) is not None:
            # As a player clicks into the thread the bot opened: the story is there.
            self.screen.note(
                f"(Following the adventure into its thread #"
                f"{place.channel_name(place.channel_id)}: commands go there now.)"
            )
            self._refresh(final=True)

    async def _press(self, command: PressInput) -> InteractionRecord:
        """The button ``command`` names on the newest message that has it: by number on the
        newest message with buttons; by key (``!do``) or label (``!Do``) on the newest that
        has one so called."""
        for message in reversed(self._visible()):
            buttons = message.buttons
            if not buttons:
                continue
            if isinstance(command.target, int):
                if command.target > len(buttons):
                    raise LookupError(f"The newest buttons are 1 to {len(buttons)}.")
                return await self.fake.press(self.place.user_id, message.id, index=command.target)
            wanted = command.target.removeprefix("!").casefold()
            labels = button_labels(message)
            for label, key, (_, custom_id, _) in zip(
                labels, button_keys(labels), buttons, strict=True
            ):
                if wanted == key or (label is not None and label.casefold() == wanted):
                    return await self.fake.press(self.place.user_id, message.id, custom_id)
        raise LookupError(f"No message here has a button called {command.target}.")

    async def _follow(self, record: InteractionRecord) -> None:
        """Show the bot's answer as it comes, until it has finished with the interaction,
        however long that takes (no time limit: one slow turn must not end the console); a
        turn still running after a while is said to be."""
        started = asyncio.get_running_loop().time()
        done = asyncio.ensure_future(_finished(self.standin))
        # Keys typed meanwhile are not echoed into the block being redrawn (``keys``).
        with self.keys.quiet() if self.keys is not None else contextlib.nullcontext():
            await self._until(done, started)
        self._refresh(final=True)
        if record.modal is not None:
            await self._answer_modal(record)

    async def _until(self, done: asyncio.Future[None], started: float) -> None:
        """Redraw what changes until ``done``, saying now and then that the turn still runs."""
        loop = asyncio.get_running_loop()
        tell_at = STILL_RUNNING_AFTER
        while not done.done():
            self._refresh(final=False)
            await asyncio.wait({done}, timeout=0.1)
            waited = loop.time() - started
            if done.done() or waited < STILL_RUNNING_AFTER:
                continue
            said = (
                f"(The turn is still running: {waited:.0f} s so far. The console waits "
                "for it to finish; Ctrl-C leaves.)"
            )
            if self.screen.drawing:
                # Below the turn's text, which goes on being drawn above it, its time counted.
                if said != self.screen.status_line:
                    self.screen.status(said)
            elif waited >= tell_at:
                self.screen.note(said)
                tell_at = waited + STILL_RUNNING_EVERY
        done.result()

    async def _answer_modal(self, record: InteractionRecord) -> None:
        """Fill the form the bot opened, a field a line, as Discord's form would be: what it
        was prefilled with is shown and kept on Enter, a required field is asked again while
        blank, and ``/cancel`` (or Ctrl-D) closes it unsent, as closing Discord's form does."""
        modal = record.modal or {}
        if self.reader is not None:
            how = "each field holds what it has, to edit"
        else:
            how = "a line for each field; Enter keeps what it holds"
        self.screen.note(
            f"✎ {modal.get('title', 'A form')}: {how}, /cancel closes the form without sending it."
        )
        values = {}
        for field in _text_inputs(modal):
            value = await self._fill(field)
            if value is None:
                self.screen.note("(The form was closed: nothing was sent.)")
                return
            values[field["custom_id"]] = value
        follow = await self.fake.submit_modal(self.place.user_id, record, values)
        await self._follow(follow)

    async def _fill(self, field: dict) -> str | None:
        """One field's value, by Discord's rules for it (required unless it says not; within
        its lengths); None when the player closes the form."""
        label = field.get("label") or field["custom_id"]
        held = field.get("value") or ""
        required = field.get("required", True)
        shortest, longest = field.get("min_length") or 0, field.get("max_length") or 4000
        placeholder = field.get("placeholder") or ""
        paragraph = field.get("style") == 2  # TextInputStyle.paragraph: several lines
        if self.reader is None:
            if placeholder:
                # A hint, greyed in Discord's field and gone once typing starts: never a value.
                self.screen.note(f"  ({label}, for example: {placeholder})")
            if held:
                self.screen.note(f"  {label} now: {held}")
        elif paragraph:
            self.screen.note(f"  ({label}: several lines; Esc then Enter sends it.)")
        while True:
            try:
                typed = (await self._field(label, held, placeholder, paragraph)).strip("\n")
            except (EOFError, KeyboardInterrupt):
                return None
            if not self.live:
                self.screen.note(f"{label}: {typed}")
            if typed.strip() == "/cancel":
                return None
            # In the line editor the field holds its value to edit, so what is left is meant.
            value = typed if typed.strip() or self.reader is not None else held
            if required and not value.strip():
                self.screen.note(f"⚠ {label} is required: type it, or /cancel.")
            elif value and not shortest <= len(value) <= longest:
                self.screen.note(f"⚠ {label} takes {shortest} to {longest} characters.")
            else:
                return value

    async def _field(self, label: str, held: str, placeholder: str, paragraph: bool) -> str:
        """A field's line: in the terminal's editor, held and hinted in the box itself, as
        Discord's form shows it; else after a prompt, Enter keeping what it holds."""
        if self.reader is not None:
            self.screen.detach()
            return await self.reader.field(
                f"{label}: ", held=held, placeholder=placeholder, paragraph=paragraph
            )
        return await self.ask(f"{label}{' (Enter keeps it)' if held else ''}: ")

    def _visible(self):
        place = self.place
        return self.fake.messages(place.channel_id, visible_to=place.user_id)

    def _refresh(self, *, final: bool) -> None:
        self.screen.update(self._visible(), final=final)


async def _typed(prompt: str) -> str:
    """A line typed at the terminal (EOFError on Ctrl-D)."""
    return await _line_from(lambda: input(prompt))


def _line_from(read_line: Callable[[], str]) -> asyncio.Future[str]:
    """``read_line`` run in a daemon thread of its own, not the loop's executor: Ctrl-C at the
    prompt cancels the console's task, and ``asyncio.run`` would then wait for the executor's
    threads, one of them sitting in ``input()`` until Enter. A daemon thread is left behind."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def settle(line: str | None, error: BaseException | None) -> None:
        if future.done():  # cancelled: nobody waits for the line
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(line or "")

    def work() -> None:
        line: str | None = None
        failed: BaseException | None = None
        try:
            line = read_line()
        except BaseException as error:  # EOFError and the like: the reader's to raise
            failed = error
        try:
            loop.call_soon_threadsafe(settle, line, failed)
        except RuntimeError:  # the loop closed meanwhile
            pass

    threading.Thread(target=work, name="console-input", daemon=True).start()
    return future


#: Tasks that carry a turn on past the handler that asked for it (``engine.platform.queue``: a
#: turn runs in its adventure's queue, and is saved even if nobody follows it any more).
TURN_TASK_PREFIXES = ("adventure-queue-",)


async def _finished(standin: StandIn) -> None:
    """Until the bot is done with what was asked: no handler running, and no turn going on
    behind one (a turn outlives a handler that stopped following it, and its final edit comes
    after), so the prompt comes back only after the turn's final edit."""
    while True:
        await standin.idle(timeout=None)
        running = {
            task
            for task in asyncio.all_tasks()
            if not task.done() and task.get_name().startswith(TURN_TASK_PREFIXES)
        }
        if not running:
            return
        await asyncio.wait(running)


def _text_inputs(modal: dict) -> list[dict]:
    found = []
    for top in modal.get("components") or []:
        for component in top.get("components") or [top.get("component") or {}]:
            if component.get("type") == 4:  # text input
                found.append(component)
    return found


async def run_console(
    settings: Settings,
    *,
    server: bool = False,
    stdin: TextIO = sys.stdin,
    out: TextIO = sys.stdout,
) -> None:
    """``server``: in a channel of a stand-in server, members switched by /as; else a DM."""
    live = stdin.isatty() and out.isatty()
    # The console's user runs this bot: /operator answers them.
    if CONSOLE_USER_ID not in settings.operator_ids:
        settings = settings.model_copy(
            update={"operator_ids": (*settings.operator_ids, CONSOLE_USER_ID)}
        )
    bot = CampfireBot(settings)
    # Until the console has shown the story again (``Console.begin``).
    bot.may_announce.clear()
    standin = StandIn(bot)
    # An embedded model may take every core of a player's machine, and a late acknowledgement
    # here would only fail a turn with nobody to tell: the console forgives the bot's own
    # keeping of the event loop from a CPU, which Discord would not (``bot.standin.starvation``).
    standin.fake.forgive_own_starvation()
    place = Place(standin.fake, server=server)
    place.build()
    async with standin:
        if server:
            running = await bot.services.play.adventures_from(CONSOLE_CHANNEL_ID)
            if running:  # the newest
                await place.reopen_thread(running[0].thread_id, running[0].title)
        files_dir = settings.data_dir / "console-files"

        async def read(prompt: str) -> str:
            if live:
                return await _typed(prompt)
            line = await _line_from(stdin.readline)
            if not line:
                raise EOFError
            return line

        console = Console(
            bot,
            standin,
            out,
            live=live,
            place=place,
            files_dir=files_dir,
            read=read,
            keys=TypeAhead(stdin) if live else None,
        )
        if live and stdin is sys.stdin and out is sys.stdout:
            # prompt_toolkit edits the terminal's own standard input and output.
            console.reader = TerminalReader(
                CommandCompleter(bot.tree, console.button_keys),
                settings.data_dir / "console-history",
            )
        try:
            await console.begin()
            while True:
                try:
                    line = await console.ask(console.prompt)
                except EOFError:
                    break
                except KeyboardInterrupt:  # Ctrl-C in the line editor: leave at once
                    console.stopped()
                    break
                if not await console.handle(line):
                    break
        except asyncio.CancelledError:
            # Ctrl-C: asyncio.run cancels this task, then the bot's. A turn being written is
            # cut off before its store, so nothing of it is kept; the next start says so
            # beside its action, with a Retry button (the interrupted-turn notice).
            console.stopped()
            raise
