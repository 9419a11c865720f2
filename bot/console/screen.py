"""Drawing the console's view of a Discord channel: each message as a block of text.

On a terminal the newest block is redrawn in place as the bot edits it, so narration is seen
typing itself out. Otherwise (a pipe, a file) each message is printed once, final.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Protocol, TextIO

from bot.console.markup import styled, timestamps, visible
from bot.standin import MessageRecord

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
) -> str:
    """``message`` as text. ``shared``: several people use the screen (a server), so a private
    answer says whom it is for; alone (a DM) it is "you"."""
    content = message.content.strip()
    parts = [content] if content else []
    parts.extend(_embed(embed) for embed in message.embeds)
    if names is not None:
        # Mentions as Discord's client shows them: a channel's name, a person's @name.
        parts = [_named(part, names) for part in parts]
    for attachment in message.attachments:
        where = (files or {}).get(attachment.id, "")
        parts.append(f"📎 {attachment.filename}" + (f" → {where}" if where else ""))
    text = "\n".join(part for part in parts if part) or "…"
    if message.ephemeral:
        who = "you"
        if shared and names is not None and message.visible_to is not None:
            who = names.name_of(message.visible_to)
        text += f"\n  (only {who} can see this)"
    buttons = [(label, disabled) for label, _, disabled in message.buttons]
    if buttons:
        text += "\n  " + "  ".join(
            f"[{n} {label}{' (disabled)' if disabled else ''}]"
            for n, (label, disabled) in enumerate(buttons, 1)
        )
    return text


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
    ) -> None:
        self.out = out
        self.live = live
        self.names = names
        self.shared = shared
        # Attachments the bot sends are saved here, so the player can open them.
        self.files_dir = files_dir
        self._files: dict[int, str] = {}
        self._shown: dict[int, str] = {}
        self._last: int | None = None
        self._last_lines = 0

    def note(self, text: str) -> None:
        """A line of the console's own (not a Discord message)."""
        self._print(text)
        self._last = None

    def update(self, messages: list[MessageRecord], *, final: bool) -> None:
        """Show what is new or changed. Streaming redraws happen only when ``live``."""
        for message in messages:
            self._save_attachments(message)
            text = timestamps(render(message, self._files, self.names, shared=self.shared))
            if self.live:
                text = styled(text)
            previous = self._shown.get(message.id)
            if previous == text:
                continue
            if previous is None:
                if not (self.live or final):
                    continue  # a pipe gets each message once, when it is final
                self._print(text)
                self._last = message.id
            elif self.live and message.id == self._last:
                self._redraw(text)
            elif final and _content(text) != _content(previous):
                # An older message changed (a take paged, a turn undone, a preview confirmed):
                # a terminal cannot reach back to it, so it is shown again, marked.
                self._print(f"✎ {text}")
                self._last = message.id
            self._shown[message.id] = text

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
        self._last_lines = _lines(text) + 1

    def _redraw(self, text: str) -> None:
        # Up to the start of the newest block, clear to the end of the screen, draw it again.
        self.out.write(f"\x1b[{self._last_lines}F\x1b[J")
        self._print(text)


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


def _lines(text: str) -> int:
    width = max(20, shutil.get_terminal_size((100, 40)).columns)
    return sum(max(1, -(-len(line) // width)) for line in visible(text).split("\n"))
