"""The console's screen on a terminal: blocks redrawn in place as the bot edits them, within a
window of a given size, read back through a small terminal of the tests' own; and the keys
typed during a turn, on a real pseudo-terminal."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import termios

from bot.console.keys import TypeAhead
from bot.console.screen import Screen
from bot.standin import MessageRecord
from tests.fakes.openai_server import Reply
from tests.test_console_pty import Player

_CONTROL = re.compile(r"\x1b\[(\d*)([A-Za-z])")


class Terminal(io.StringIO):
    """A terminal window, as far as the console draws on it: text wraps at its width (the
    cursor waits at the last column until the next character), a line feed on its bottom row
    scrolls its top row away into the scrollback, ``ESC[nF`` goes up n rows to the first
    column and never above the top row, ``ESC[J`` clears to the end of the window, and styles
    (``ESC[…m``) are not drawn. Given as the screen's output, it says it is a terminal."""

    def __init__(self, columns: int, rows: int) -> None:
        super().__init__()
        self.columns, self.rows = columns, rows
        self.scrollback: list[list[str]] = []
        self.window: list[list[str]] = [[] for _ in range(rows)]
        self.row = self.column = 0

    def size(self) -> os.terminal_size:
        return os.terminal_size((self.columns, self.rows))

    def isatty(self) -> bool:
        return True

    def flush(self) -> None:
        pass

    def write(self, data: str, /) -> int:
        at = 0
        while at < len(data):
            control = _CONTROL.match(data, at)
            if control is not None:
                self._control(int(control[1] or 1), control[2])
                at = control.end()
                continue
            char = data[at]
            at += 1
            if char == "\n":  # a terminal's output turns it into a return and a line feed
                self._line_feed()
                self.column = 0
                continue
            if self.column >= self.columns:
                self._line_feed()
                self.column = 0
            line = self.window[self.row]
            line.extend(" " * (self.column - len(line)))
            line[self.column : self.column + 1] = [char]
            self.column += 1
        return len(data)

    def _line_feed(self) -> None:
        if self.row == self.rows - 1:
            self.scrollback.append(self.window.pop(0))
            self.window.append([])
        else:
            self.row += 1

    def _control(self, count: int, kind: str) -> None:
        if kind == "F":
            self.row, self.column = max(0, self.row - count), 0
        elif kind == "J":
            del self.window[self.row][self.column :]
            for row in range(self.row + 1, self.rows):
                self.window[row] = []

    def lines(self) -> list[str]:
        """Everything shown, scrolled away or in the window, a row a line."""
        return ["".join(row).rstrip() for row in self.scrollback + self.window]


def message(content: str, message_id: int = 1) -> MessageRecord:
    return MessageRecord(id=message_id, channel_id=5, author_id=7, content=content)


def stream(screen: Screen, text: str, pieces: list[str], message_id: int = 1) -> None:
    """``pieces`` streamed into one message as the bot does (its cursor mark while it
    writes), then the final text, then the console's final look once the bot is idle."""
    for end in range(1, len(pieces) + 1):
        screen.update([message(text.join(pieces[:end]) + " ▌", message_id)], final=False)
    screen.update([message(text.join(pieces), message_id)], final=False)
    screen.update([message(text.join(pieces), message_id)], final=True)


def test_a_reply_taller_than_the_window_is_shown_once(tmp_path):
    terminal = Terminal(40, 12)
    screen = Screen(terminal, live=True, size=terminal.size)
    screen.note("› /do listen")
    lines = [f"Line {n:02} of a reply taller than the window." for n in range(1, 31)]
    stream(screen, "\n", lines)
    shown = terminal.lines()
    for line in lines:
        # Each line wraps onto two rows: its start is found once, whole.
        assert sum(row.startswith(line[:20]) for row in shown) == 1, (line, shown)
    assert not any("▌" in row or row == "…" for row in shown), shown
    assert shown.index("› /do listen") < next(i for i, r in enumerate(shown) if "Line 01" in r)


def test_one_paragraph_taller_than_the_window_is_shown_once(tmp_path):
    terminal = Terminal(30, 8)
    screen = Screen(terminal, live=True, size=terminal.size)
    words = [f"w{n:03}" for n in range(1, 121)]
    stream(screen, " ", words)
    shown = "".join(terminal.lines())
    for word in words:
        assert shown.count(word) == 1, (word, terminal.lines())
    assert "▌" not in shown


def test_while_it_streams_a_tall_reply_shows_its_end_within_the_window(tmp_path):
    terminal = Terminal(40, 10)
    screen = Screen(terminal, live=True, size=terminal.size)
    lines = [f"Line {n:02}" for n in range(1, 21)]
    for end in range(1, len(lines) + 1):
        screen.update([message("\n".join(lines[:end]) + " ▌")], final=False)
    window = ["".join(row).rstrip() for row in terminal.window]
    assert "Line 20 ▌" in window and "…" in window
    assert "Line 01" not in window
    assert not any("Line 01" in row for row in terminal.scrollback)


def test_a_reply_in_two_messages_shows_the_first_whole_once_the_second_begins(tmp_path):
    """A narration longer than a message goes on in a second one while the console still
    waits for the bot: the first, drawn cut to fit the window, is drawn whole before it."""
    terminal = Terminal(40, 10)
    screen = Screen(terminal, live=True, size=terminal.size)
    first = [f"First {n:02}" for n in range(1, 21)]
    for end in range(1, len(first) + 1):
        screen.update([message("\n".join(first[:end]) + " ▌")], final=False)
    whole = message("\n".join(first))
    screen.update([whole, message("Second 01 ▌", 2)], final=False)
    screen.update([whole, message("Second 01", 2)], final=True)
    shown = terminal.lines()
    for line in [*first, "Second 01"]:
        assert shown.count(line) == 1, (line, shown)
    assert "…" not in shown and not any("▌" in row for row in shown), shown


def test_a_block_is_not_redrawn_over_the_prompt_below_it(tmp_path):
    terminal = Terminal(60, 20)
    screen = Screen(terminal, live=True, size=terminal.size)
    screen.update([message("The heron watches you.")], final=True)
    screen.detach()
    terminal.write("› /undo\n")  # the prompt and the line typed, echoed by the terminal
    undone = message("The heron watches you.\n-# This turn was undone.")
    screen.update([undone], final=False)
    screen.update([undone], final=True)
    shown = [row for row in terminal.lines() if row]
    assert shown == [
        "The heron watches you.",
        "› /undo",
        "✎ The heron watches you.",
        "This turn was undone.",  # subtext, dimmed
    ], shown


def test_a_change_seen_while_the_bot_works_is_shown_once_it_is_done(tmp_path):
    """/redo unmarks the turn it brings back while the bot is still busy: the change is seen
    by a refresh that shows nothing in a pipe, and must still be shown by the final one."""
    out = Terminal(80, 40)
    screen = Screen(out, live=False, size=out.size)
    screen.update([message("The heron watches you.\n-# This turn was undone.")], final=True)
    back = message("The heron watches you.")
    screen.update([back], final=False)
    screen.update([back], final=True)
    shown = [row for row in out.lines() if row]
    assert shown[-1] == "✎ The heron watches you.", shown


def test_keys_typed_during_a_turn_are_not_echoed_and_are_shown_after_the_prompt():
    main, side = pty.openpty()
    try:
        with os.fdopen(side, "r", closefd=False) as terminal_in:
            keys = TypeAhead(terminal_in)
            with keys.quiet():
                os.write(main, b"look around\n")
                assert not select.select([main], [], [], 0.3)[0]  # nothing echoed
            assert termios.tcgetattr(side)[3] & termios.ECHO  # echo is back
            line = terminal_in.readline()
            assert line == "look around\n"
            assert keys.unseen(line.rstrip("\n"))
            os.write(main, b"wait\n")
            assert select.select([main], [], [], 2)[0]
            assert b"wait" in os.read(main, 100)  # echoed as usual
            assert not keys.unseen(terminal_in.readline().rstrip("\n"))
    finally:
        os.close(main)
        os.close(side)


def test_on_a_terminal_a_tall_reply_shows_once_and_a_line_typed_meanwhile_after_it(
    tmp_path, fake_model
):
    """The console on a pseudo-terminal 60×14, read back through a terminal emulator: a reply
    taller than the window streams and is shown once, and an action typed while it streams
    is not echoed into it, but taken by the next prompt, then played."""
    reply = "\n".join(f"Line {n:02} of a reply much taller than the window." for n in range(1, 26))
    fake_model.queue(Reply(text=reply, delay=0.02), Reply(text="The reeds hush.", delay=0.02))
    player = Player(tmp_path, fake_model, columns=60, rows=14)
    try:
        player.child.send("/do listen\r")
        player.wait_for(lambda: "Line 03" in player.text())
        player.child.send("/do wait\r")  # typed while the reply streams
        player.wait_for(lambda: "The reeds hush." in player.text())
        player.wait_for_prompt()
    finally:
        player.close()
    lines = player.lines()
    for n in range(1, 26):
        assert sum(line.startswith(f"Line {n:02} ") for line in lines) == 1, (n, lines)
    assert not any("▌" in line for line in lines), lines
    order = ["Line 25 ", "› /do wait", "> You wait.", "The reeds hush."]
    at = [next(i for i, line in enumerate(lines) if line.startswith(part)) for part in order]
    assert at == sorted(at), lines
