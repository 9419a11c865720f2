"""The console in a pseudo-terminal, read back through a terminal emulator (pyte): what the
player sees after each command, as Discord would show it (issue: the console misdrew turns).

The console runs as a player starts it (``python -m bot``, no token) in a pty driven by
pexpect, against the fake model server; each screen is read from pyte's window and scrollback.
"""

from __future__ import annotations

import sys
import time

import pexpect
import pyte
import pytest

from bot.console.screen import Screen
from bot.standin import MessageRecord
from tests.fakes.openai_server import Reply
from tests.test_console import console_env

COLUMNS, ROWS = 110, 40
PROMPT = "› "


class Player:
    """A player at a terminal ``COLUMNS``×``ROWS`` with the console open."""

    def __init__(self, tmp_path, fake_model, columns: int = COLUMNS, rows: int = ROWS) -> None:
        self.columns = columns
        self.screen = pyte.HistoryScreen(columns, rows, history=5000, ratio=1)
        self.stream = pyte.Stream(self.screen)
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "bot"],
            # No cursor-position reports: the emulator here does not answer them.
            env=console_env(tmp_path, fake_model)
            | {"TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1"},
            cwd=str(tmp_path),
            dimensions=(rows, columns),
            encoding="utf-8",
            timeout=90,
        )
        self.wait_for_prompt()

    def lines(self) -> list[str]:
        """Every row shown, scrolled away or in the window, without trailing blanks."""
        scrolled = [
            "".join(line[x].data for x in range(self.columns)).rstrip()
            for line in self.screen.history.top
        ]
        rows = [row.rstrip() for row in self.screen.display]
        while rows and not rows[-1]:
            rows.pop()
        return scrolled + rows

    def text(self) -> str:
        return "\n".join(self.lines())

    def wait_for(self, done, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, self.text()
            self._pump(0.1)

    def _pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                self.stream.feed(self.child.read_nonblocking(65536, timeout=0.05))
            except pexpect.TIMEOUT:
                continue

    def wait_for_prompt(self, prompt: str = PROMPT, timeout: float = 90) -> None:
        """Until the console waits at ``prompt``, idle (nothing drawn for a moment)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._pump(0.3)
            if self._at(prompt):
                self._pump(0.5)  # nothing more comes: the bot is done
                if self._at(prompt):
                    return
        raise AssertionError(self.text())

    def _at(self, prompt: str) -> bool:
        rows = [row for row in self.lines() if row.strip()]
        return bool(rows) and rows[-1].rstrip() == prompt.rstrip()

    def row_at(self, start: str) -> int:
        """The window's last row that starts with ``start``."""
        return max(y for y, row in enumerate(self.screen.display) if row.startswith(start))

    def type(self, line: str, prompt: str = PROMPT) -> str:
        """Type ``line``; what was drawn after it, once the console waits at ``prompt``."""
        before = len(self.lines())
        self.child.send(line + "\r")
        self.wait_for_prompt(prompt)
        return "\n".join(self.lines()[before - 1 :])

    def close(self) -> None:
        self.child.sendline("/quit")
        self.child.expect(pexpect.EOF, timeout=30)
        self.child.close()


@pytest.mark.usefixtures("installed_data_dir")
def test_the_console_draws_each_turn_as_discord_would_show_it(tmp_path, fake_model):
    fake_model.queue(
        # Streamed slowly enough to be drawn in several frames.
        Reply(text="You're **really** glad the lamp is lit. The road runs on.", delay=0.05),
        Reply(text="A second take: the lamp gutters, then holds.", delay=0.05),
        "The reeds answer your wave.",
    )
    player = Player(tmp_path, fake_model)
    try:
        # The prompt comes back after the turn's final edit: all of it, marks drawn as styles,
        # no cursor mark, and the buttons with their keys.
        turn = player.type("/do look")
        assert "You're really glad the lamp is lit. The road runs on." in turn, turn
        assert "▌" not in turn and "**" not in turn
        assert "[1 !continue]  [2 !retry]  [3 !undo]  [4 !insights]  [5 !do]" in turn, turn

        # Commands complete as Discord's picker offers them (Tab takes the first offered).
        player.child.send("/adventure l")
        player._pump(1.0)
        player.child.send("\t")
        player._pump(1.0)
        assert player.screen.display[player.row_at(PROMPT)].startswith("› /adventure list")
        # A relative time ("last played 3 seconds ago") is no edit: nothing is shown again.
        listed = player.type("")
        assert "last played" in listed
        # An embed is a card, as in Discord: a panel with its title on the border.
        assert "╭─ Adventures here ─" in listed and "╰─" in listed, listed
        recap = player.type("/recap")
        assert "✎" not in recap and "last played" not in recap, recap
        # Private answers: said once, and no lone "…" line before them.
        assert recap.count("only you can see this") == 1, recap
        assert not any(line.strip() == "…" for line in player.lines()), player.text()

        # A retry: the old take, marked, comes above the new one, as its mark says.
        retried = player.type("!retry")
        old = retried.index("🔁 Retried: the new take is below.")
        new = retried.rindex("A second take: the lamp gutters, then holds.")
        assert old < new, retried
        assert "✎" in retried[:old]
        # The pager came with the second take; the keys stay what they were.
        assert "[5 ‹ !prev]" in retried and "!do]" in retried and "[5 !do]" not in retried

        # The Do form: its placeholder greyed in the empty box, as Discord draws it, and gone
        # once typing starts; what is typed is sent, never the placeholder.
        hint = "draw your sword and step into the light"
        player.child.send("!do\r")
        deadline = time.monotonic() + 60
        while not any(row.startswith("What do you do?: ") for row in player.screen.display):
            assert time.monotonic() < deadline, player.text()
            player._pump(0.3)
        player._pump(0.5)
        y = player.row_at("What do you do?: ")
        field = player.screen.buffer[y]
        at = len("What do you do?: ")
        assert "".join(field[x].data for x in range(at, at + len(hint))) == hint
        assert all(field[x].italics and field[x].fg != "default" for x in range(at, at + 5))
        waved = player.type("wave")
        assert hint not in waved
        assert "> You wave." in waved and "The reeds answer your wave." in waved, waved
    finally:
        player.close()


def test_live_text_keeps_flowing_below_the_still_running_note():
    """The "still running" note is drawn below the turn's text, which goes on being redrawn
    above it, and goes once the turn is final (it once froze the text until a ✎ reprint)."""
    screen = pyte.Screen(60, 20)
    stream = pyte.ByteStream(screen)

    class Out:
        def write(self, text: str) -> int:
            stream.feed(text.replace("\n", "\r\n").encode())
            return len(text)

        def flush(self) -> None:
            pass

        def isatty(self) -> bool:
            return True

    import os

    drawn = Screen(Out(), live=True, size=lambda: os.terminal_size((60, 20)))  # type: ignore[arg-type]

    def message(text: str) -> MessageRecord:
        return MessageRecord(id=1, channel_id=5, author_id=7, content=text)

    def rows() -> list[str]:
        return [row.rstrip() for row in screen.display if row.strip()]

    drawn.update([message("The heron ▌")], final=False)
    drawn.status("(The turn is still running: 15 s so far.)")
    drawn.update([message("The heron wades closer ▌")], final=False)
    assert rows() == ["The heron wades closer ▌", "(The turn is still running: 15 s so far.)"]
    drawn.update([message("The heron wades closer, and bows.")], final=True)
    assert rows() == ["The heron wades closer, and bows."]
    assert "✎" not in "".join(screen.display)
