"""Drawing the console's view of a Discord channel: each message as a block of text.

On a terminal the newest block is redrawn in place as the bot edits it, so narration is seen
typing itself out: the cursor goes back up the rows the block took and draws it again. That
works only while the block's first row is in the window and nothing was printed below it, so a
block still changing is kept within the window (its end shown, below an ellipsis, until it is
final), the prompt ends the redrawing of the block above it, and keys typed during a turn are
not echoed (``keys.py``). Otherwise (a pipe, a file) each message is printed once, final. A
message changed where it can no longer be redrawn is shown again, marked ✎, once final.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TextIO

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from bot.console.commands import button_keys
from bot.console.markup import plain, styled, timestamps, visible
from bot.standin import MessageRecord
from bot.standin.records import FLAG_LOADING

_CHANNEL_MENTION = re.compile(r"<#(\d+)>")
_USER_MENTION = re.compile(r"<@!?(\d+)>")


class Names(Protocol):
    """Who and where, by name: given when several people share the screen (a server)."""

    def name_of(self, user_id: int) -> str: ...

    def channel_name(self, channel_id: int) -> str | None: ...


def render(
    message: MessageRecord,
    files: dict[int, str] | None = None,
    names: Names | None = None,
    *,
    shared: bool = True,
    panels: int | None = None,
) -> str:
    """``message`` as text, its marks and timestamps as the bot sent them (the screen styles
    or strips the marks and reads the timestamps as it draws). ``shared``: several people use
    the screen (a server), so a private answer says whom it is for; alone (a DM) it is
    "you". ``panels``: drawn for a terminal that many columns wide instead, marks as styles
    and each embed a panel, as Discord's client draws it a card."""
    content = message.content.strip()
    parts = [content] if content else []
    parts.extend(_embed(embed) for embed in message.embeds)
    if names is not None:
        # Mentions as Discord's client shows them: a channel's name, a person's @name.
        parts = [_named(part, names) for part in parts]
    text = "\n".join(part for part in parts if _shows(part))
    if panels is not None:

        def look(part: str) -> str:
            return styled(timestamps(_named(part, names) if names is not None else part))

        drawn = [look(content)] if _shows(content) else []
        drawn.extend(_panel(embed, panels, look) for embed in message.embeds)
        parts = drawn
    for attachment in message.attachments:
        where = (files or {}).get(attachment.id, "")
        parts.append(f"📎 {attachment.filename}" + (f" → {where}" if where else ""))
    said = text  # as written, to find what it says of itself
    text = "\n".join(part for part in parts if _shows(part)) or "…"
    if message.ephemeral:
        who = "you"
        if shared and names is not None and message.visible_to is not None:
            who = names.name_of(message.visible_to)
        # Said once: some answers say it themselves (/recap's footer).
        if f"only {who} can see this" not in said.casefold():
            text += f"\n  (only {who} can see this)"
    labels = button_labels(message)
    if labels:
        keys = button_keys(labels)
        text += "\n  " + "  ".join(
            f"[{n} {_button(label, key)}{' (disabled)' if disabled else ''}]"
            for n, (label, key, (_, _, disabled)) in enumerate(
                zip(labels, keys, message.buttons, strict=True), 1
            )
        )
    return text


def button_labels(message: MessageRecord) -> list[str | None]:
    """What each button shows: its label, else its emoji (Discord draws either or both)."""
    return [
        component.get("label") or (component.get("emoji") or {}).get("name")
        for component in message.button_components()
    ]


def _button(label: str | None, key: str) -> str:
    """A button as ``Continue !continue``: what it shows, and the key that presses it; the
    key alone where it is the label in other letters."""
    shown = (label or "").strip()
    if not shown or shown.casefold() == key:
        return f"!{key}"
    return f"{shown} !{key}"


def _shows(text: str) -> bool:
    """Whether ``text`` has anything to see: an embed field's zero-width space is blank."""
    return bool(text.strip().strip("\u200b\u2060\ufeff").strip())


def _named(text: str, names: Names) -> str:
    text = _CHANNEL_MENTION.sub(lambda m: f"#{names.channel_name(int(m[1])) or m[1]}", text)
    return _USER_MENTION.sub(lambda m: f"@{names.name_of(int(m[1]))}", text)


class Screen:
    def __init__(
        self,
        out: TextIO,
        *,
        live: bool,
        files_dir: Path | None = None,
        names: Names | None = None,
        shared: bool = True,
        size: Callable[[], os.terminal_size] | None = None,
    ) -> None:
        """``size``: the terminal's window, columns and rows (asked at each draw: the window
        may be resized)."""
        self.out = out
        self.live = live
        self.names = names
        self.shared = shared
        self.size = size or (lambda: _window(out))
        # Attachments the bot sends are saved here, so the player can open them.
        self.files_dir = files_dir
        self._files: dict[int, str] = {}
        #: What was last shown of each message, as the bot wrote it (marks, buttons and
        #: ``<t:…>`` timestamps unread): a relative time that reads differently a minute
        #: later is the same message, not an edit.
        self._shown: dict[int, str] = {}
        #: The messages first shown since the last prompt, in the order shown.
        self._fresh: list[int] = []
        #: The message drawn last, which a terminal can redraw in place while nothing is
        #: printed below it.
        self._last: int | None = None
        #: The rows the newest block takes, its blank line included.
        self._last_lines = 0
        #: The newest block was drawn without its beginning, to fit the window.
        self._cut = False
        #: The newest block's text, whole, as the bot wrote it.
        self._last_raw = ""
        self._last_message = MessageRecord(id=0, channel_id=0, author_id=0)
        #: A line of the console's own drawn below the newest block while it changes (the
        #: turn still running), so that the block goes on being redrawn above it.
        self._status = ""

    def note(self, text: str) -> None:
        """A line of the console's own (not a Discord message)."""
        self._settle()
        self._print(text)
        self._last = None

    @property
    def drawing(self) -> bool:
        """Whether a block is being drawn in place on a terminal (a status goes below it)."""
        return self.live and self._last is not None and self._reachable()

    @property
    def status_line(self) -> str:
        return self._status

    def status(self, text: str) -> None:
        """Say ``text`` while the newest block goes on changing: on a terminal below the
        block, redrawn with it (and gone once it is final); otherwise as a note."""
        if not self.drawing:
            self.note(text)
            return
        self._status = text
        self._draw(self._last_message, self._last_raw, final=False, again=True)

    def detach(self) -> None:
        """Something else is printed below the newest block (the prompt, the line typed):
        the block can no longer be redrawn in place, only shown again."""
        self._settle()
        self._last = None
        self._fresh = []

    def typed(self, line: str) -> None:
        """A line typed while the keys were not echoed (during a turn), shown after the
        prompt it is read at, as if typed there."""
        self.out.write(line.rstrip("\n") + "\n")
        self.out.flush()

    def update(self, messages: list[MessageRecord], *, final: bool) -> None:
        """Show what is new or changed. Streaming redraws happen only when ``live``.

        Discord shows an edited message in its place; a terminal cannot reach back to it, so
        an older message changed (a take retried, a turn undone or redone, a preview
        confirmed) is shown again, marked ✎, once the bot is done, and the messages of this
        command shown after it are shown again below it: the story reads in Discord's order
        (the retried take, then the new one below it, as its mark says)."""
        replaying = False
        if final:
            self._status = ""
        for message in messages:
            self._save_attachments(message)
            if message.flags & FLAG_LOADING:
                # Discord's "is thinking…" until the answer replaces it: nothing to read yet,
                # and a lone "…" left above the answer if drawn.
                continue
            raw = render(message, self._files, self.names, shared=self.shared)
            previous = self._shown.get(message.id)
            newest = self.live and message.id == self._last
            if previous is None:
                if not (self.live or final):
                    continue  # a pipe gets each message once, when it is final
                self._settle()
                self._draw(message, raw, final=final)
                self._last = message.id
                self._fresh.append(message.id)
            elif previous == raw and not (newest and final and self._cut) and not replaying:
                continue
            elif newest and self._reachable() and not replaying:
                self._draw(message, raw, final=final, again=True)
            elif _content(raw) != _content(previous) or (replaying and message.id in self._fresh):
                if not final:
                    # Kept for the final refresh, which shows it: were it recorded as shown
                    # now, the change (a turn brought back by /redo) would never be seen.
                    continue
                changed = _content(raw) != _content(previous)
                replaying = replaying or changed
                self._settle()
                self._last = None
                self._print(("✎ " if changed else "") + self._look(message, raw))
            self._shown[message.id] = raw

    def _look(self, message: MessageRecord, raw: str) -> str:
        """``message`` (``raw``) as drawn here: timestamps read now; on a terminal styled, its
        embeds as panels; else unmarked."""
        if self.live and message.embeds:
            return self._panelled(message)
        text = timestamps(raw)
        return styled(text) if self.live else plain(text)

    def _panelled(self, message: MessageRecord) -> str:
        return render(
            message, self._files, self.names, shared=self.shared, panels=self._window()[0]
        )

    def _draw(self, message: MessageRecord, raw: str, *, final: bool, again: bool = False) -> None:
        """The newest block, in place of its earlier frame with ``again``. On a terminal a
        block still changing is kept within the window: the terminal cannot move the cursor
        above its top row, so a taller frame could not be redrawn, and its top, scrolled off,
        would be printed a second time. Until final such a block shows its end below an
        ellipsis; the final draw shows it whole, once."""
        self._last_raw, self._last_message = raw, message
        text = timestamps(raw)
        cut = False
        if self.live and message.embeds:
            # Cards as panels, unless a frame still changing is too tall for them: then as
            # text, its end shown, until final.
            panelled = self._panelled(message)
            if not final and self._status:
                panelled += f"\n\n{self._status}"
            if final or _lines(panelled, self._window()[0]) <= self._window()[1] - 2:
                self._show(panelled, final=final, again=again)
                return
        if self.live and not final:
            if self._status:
                text += f"\n\n{self._status}"
            columns, rows = self._window()
            if _lines(plain(text), columns) > rows - 2:
                text, cut = _tail(text, rows - 2, columns), True
        self._show(styled(text) if self.live else plain(text), final=final, again=again, cut=cut)

    def _show(self, text: str, *, final: bool, again: bool, cut: bool = False) -> None:
        if again:
            # Up to the start of the newest block, clear to the end of the screen.
            self.out.write(f"\x1b[{self._last_lines}F\x1b[J")
        self._print(text)
        self._cut = cut or bool(self._status and not final)

    def _settle(self) -> None:
        """The newest block, if drawn cut (or with a status below it), drawn whole and alone
        before anything is printed below it: nothing could redraw it after (a narration
        longer than a message goes on in the next one while the first is still drawn)."""
        if self._last is not None and self._cut and self._reachable():
            self._status = ""
            self._draw(self._last_message, self._last_raw, final=True, again=True)

    def _reachable(self) -> bool:
        """Whether the newest block's first row is still in the window."""
        return self._last_lines <= self._window()[1] - 1

    def _window(self) -> tuple[int, int]:
        size = self.size()
        return max(20, size.columns), max(4, size.lines)

    def _save_attachments(self, message: MessageRecord) -> None:
        if self.files_dir is None:
            return
        for attachment in message.attachments:
            if attachment.id in self._files:
                continue
            self.files_dir.mkdir(parents=True, exist_ok=True)
            path = self.files_dir / f"{attachment.id}-{Path(attachment.filename).name}"
            path.write_bytes(attachment.content)
            self._files[attachment.id] = str(path)

    def _print(self, text: str) -> None:
        self.out.write(text + "\n\n")
        self.out.flush()
        self._last_lines = _lines(text, self._window()[0]) + 1


def _panel(embed: dict, columns: int, look: Callable[[str], str]) -> str:
    """An embed as a panel (rich), its title on the border, drawn ``columns`` wide at most and
    returned as styled text; ``look`` styles each text of it (marks, timestamps, mentions)."""
    body: list[RenderableType] = []
    if embed.get("description"):
        body.append(Text.from_ansi(look(embed["description"])))
    for field in embed.get("fields") or []:
        name, value = field.get("name", ""), field.get("value", "")
        if _shows(name):
            body.append(Text.from_ansi(look(f"**{name}**")))
        if _shows(value):
            body.append(Text.from_ansi(look(value)))
    footer = (embed.get("footer") or {}).get("text")
    if footer:
        body.append(Text.from_ansi(look(footer), style="dim"))
    title = embed.get("title")
    drawn = Console(
        file=io.StringIO(),
        width=columns,
        force_terminal=True,
        color_system="standard",
        highlight=False,
        emoji=False,
        markup=False,
    )
    drawn.print(
        Panel(
            Group(*body),
            title=Text.from_ansi(look(f"**{title}**")) if title else None,
            title_align="left",
            expand=False,
            box=box.ROUNDED,
        )
    )
    return drawn.file.getvalue().rstrip("\n")  # type: ignore[attr-defined]


def _embed(embed: dict) -> str:
    """An embed as plain text: title, description, then each field."""
    lines = []
    if embed.get("title"):
        lines.append(f"── {embed['title']} ──")
    if embed.get("description"):
        lines.append(embed["description"])
    for field in embed.get("fields") or []:
        lines.append(f"{field.get('name', '')}:\n{field.get('value', '')}")
    footer = (embed.get("footer") or {}).get("text")
    if footer:
        lines.append(footer)
    return "\n".join(lines)


def _content(rendered: str) -> str:
    return rendered.split("\n  ", 1)[0].strip()


def _window(out: TextIO) -> os.terminal_size:
    """The window ``out`` draws in, asked of the terminal itself: COLUMNS and LINES, which
    ``shutil.get_terminal_size`` prefers, may be inherited, stale after a resize."""
    try:
        return os.get_terminal_size(out.fileno())
    except (AttributeError, OSError, ValueError):
        return shutil.get_terminal_size((100, 40))


def _lines(text: str, columns: int) -> int:
    """The rows ``text`` takes in a window ``columns`` wide (styles take no room)."""
    return sum(_height(line, columns) for line in visible(text).split("\n"))


def _height(line: str, columns: int) -> int:
    return max(1, -(-_width(line) // columns))


def _width(text: str) -> int:
    """Columns a terminal gives ``text``: two for a wide character (CJK, most emoji)."""
    return sum(
        0 if unicodedata.combining(char) else 2 if unicodedata.east_asian_width(char) in "WF" else 1
        for char in text
    )


def _tail(text: str, rows: int, columns: int) -> str:
    """The end of ``text`` that fits in ``rows`` rows, below a row of its own saying that
    the beginning is above."""
    room = rows - 1
    kept: list[str] = []
    for line in reversed(text.split("\n")):
        height = _height(line, columns)
        if height <= room:
            kept.append(line)
            room -= height
            continue
        if room > 0:
            # The end of a line too tall for what is left; a column spare on each row, for a
            # wide character wrapped early.
            end: list[str] = []
            left = room * (columns - 1)
            for char in reversed(line):
                left -= _width(char)
                if left < 0:
                    break
                end.append(char)
            kept.append("".join(reversed(end)))
        break
    return "\n".join(["…", *reversed(kept)])
