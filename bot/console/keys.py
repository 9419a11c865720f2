"""Keys typed on the console's terminal while a turn is shown: kept, but not echoed over it.

The terminal echoes what is typed wherever its cursor is, and during a turn that is below the
block being redrawn in place: the echoed line shifts the screen, the redraw goes up the rows it
drew and no further, and a frame of the turn (``You ▌``) stays behind above it. So echo is off
while a turn is followed (``termios``; Ctrl-C still works), and a whole line typed meanwhile,
which the terminal holds for the next read, is taken by the next prompt: the line editor
(``reader.py``) reads it and shows it there itself; a plain ``input()`` does not, so then the
console shows it after its prompt.
"""

from __future__ import annotations

import array
import contextlib
from collections.abc import Iterator
from typing import TextIO

try:
    import fcntl
    import termios
except ImportError:  # not a POSIX terminal: echo is left as it is
    fcntl = termios = None  # type: ignore[assignment]


class TypeAhead:
    """The keys of the terminal ``stream`` reads (nothing happens if it is not one)."""

    def __init__(self, stream: TextIO) -> None:
        self._fd: int | None = None
        try:
            if termios is not None and stream.isatty():
                self._fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None
        #: Bytes of whole lines typed while quiet and not read yet.
        self._unseen = 0

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """No echo within; afterwards, what was typed meanwhile is known."""
        fd = self._fd
        if fd is None or termios is None:
            yield
            return
        try:
            before = termios.tcgetattr(fd)
        except termios.error:
            yield
            return
        after = list(before)
        after[3] &= ~termios.ECHO  # the local modes
        termios.tcsetattr(fd, termios.TCSANOW, after)
        try:
            yield
        finally:
            self._unseen = _waiting(fd)  # every line waiting, those of earlier turns too
            termios.tcsetattr(fd, termios.TCSANOW, before)

    def unseen(self, line: str) -> bool:
        """Whether ``line``, just read (without its newline), was typed while quiet, so that
        the terminal never showed it."""
        if self._unseen <= 0:
            return False
        self._unseen = max(0, self._unseen - len(line.encode()) - 1)
        return True


def _waiting(fd: int) -> int:
    """Bytes the terminal holds for the next read: in its usual (canonical) mode, those of
    whole lines, Enter pressed (Linux, ``n_tty``: FIONREAD counts complete lines only)."""
    assert fcntl is not None and termios is not None
    count = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, count, True)
    except OSError:
        return 0
    return count[0]
