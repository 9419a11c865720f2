"""Reading what the console's player types, the way Discord's client would send it.

/do open the door                      the rest of the line fills the main text option
/start scenario:"The Lantern Road"     options as name:value, quoted when they hold spaces
/scenario import file:@story.json      an attachment, read from a file
!retry   !Retry   !2                    press a button on the newest message that has it: by
                                       its key (shown beside its number, the same however the
                                       buttons move), its label, or its number
open the door                          plain text is /do
/as ann                                (with --server) type as the member ann from now on
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from discord import AppCommandOptionType, app_commands

_OPTION = re.compile(r'(?<!\S)(?P<name>[a-z0-9_-]+):(?P<value>"(?:[^"\\]|\\.)*"|\S*)')


class ConsoleInputError(Exception):
    """What the player typed cannot be sent; the message says why."""


@dataclass(frozen=True)
class SlashInput:
    path: str  # "start", "branch new"
    options: dict[str, Any] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class PressInput:
    target: str | int  # the button's label, or its position counted from 1


@dataclass(frozen=True)
class QuitInput:
    pass


@dataclass(frozen=True)
class AsInput:
    name: str | None  # the member to type as; None lists the members


ConsoleInput = SlashInput | PressInput | QuitInput | AsInput | None


#: Keys for buttons that show a symbol and no word (the pager's arrows, emoji-only buttons).
_SYMBOL_KEYS = {
    "‹": "prev",
    "◀": "prev",
    "◀️": "prev",
    "⬅️": "prev",
    "«": "first",
    "›": "next",
    "▶": "next",
    "▶️": "next",
    "➡️": "next",
    "»": "last",
    "⏩": "continue",
    "🔁": "retry",
    "↩️": "undo",
    "↪️": "redo",
}
_PAGE_COUNTER = re.compile(r"(?:page\s+)?\d+\s*/\s*\d+", re.IGNORECASE)
#: A key is at most this many characters, cut at a word.
_KEY_LONGEST = 24


def button_keys(labels: Sequence[str | None]) -> list[str]:
    """A key for each button of a message, typed as ``!key``: its label's words (``!continue``,
    ``!keep-playing``), or a name for a symbol (the pager's ``!prev``, ``!next``, ``!page``).
    A key depends on the button alone, never on where it stands, so it stays the same when a
    retry adds the pager and the numbers move; two alike in one message are told apart by
    ``-2``."""
    keys: list[str] = []
    for label in labels:
        key = _key(label or "")
        if key in keys:
            n = 2
            while f"{key}-{n}" in keys:
                n += 1
            key = f"{key}-{n}"
        keys.append(key)
    return keys


def _key(label: str) -> str:
    label = label.strip()
    if label in _SYMBOL_KEYS:
        return _SYMBOL_KEYS[label]
    if _PAGE_COUNTER.fullmatch(label):
        return "page"
    words = re.findall(r"[^\W_]+", label.casefold())
    key = ""
    for word in words:
        joined = f"{key}-{word}" if key else word
        if len(joined) > _KEY_LONGEST and key:
            break
        key = joined[:_KEY_LONGEST]
    return key or "button"


def parse_line(
    line: str,
    tree: app_commands.CommandTree,
    people: Callable[[str], int | None] = lambda _name: None,
) -> ConsoleInput:
    """``people``: the id of the person a name names, for a user option (``player:bob``)."""
    line = line.strip()
    if not line:
        return None
    if line in ("/quit", "/exit"):
        return QuitInput()
    if line == "/as" or line.startswith("/as "):
        # The console's own: Campfire has no /as command for it to hide.
        return AsInput(line[len("/as") :].strip() or None)
    if line.startswith("!"):
        target = line[1:].strip()
        if not target:
            raise ConsoleInputError("Say which button: !Continue, or !1 for the first one.")
        return PressInput(int(target) if target.isdigit() else target)
    if not line.startswith("/"):
        line = f"/do {line}"
    command, rest = _find_command(line[1:], tree)
    return _options(command, rest, people)


def _find_command(text: str, tree: app_commands.CommandTree) -> tuple[app_commands.Command, str]:
    words = text.split(" ")
    node: Any = tree.get_command(words[0])
    if node is None:
        names = ", ".join(sorted(f"/{c.name}" for c in tree.get_commands()))
        raise ConsoleInputError(
            f"There is no /{words[0]} command. Commands: {names}; and the console's own: "
            "/as (with --server), /quit."
        )
    used = 1
    while isinstance(node, app_commands.Group):
        if used >= len(words) or not words[used]:
            subs = ", ".join(c.name for c in node.commands)
            raise ConsoleInputError(f"/{node.qualified_name} needs one of: {subs}")
        child = node.get_command(words[used])
        if child is None:
            subs = ", ".join(c.name for c in node.commands)
            raise ConsoleInputError(
                f"/{node.qualified_name} has no '{words[used]}'; it has: {subs}"
            )
        node, used = child, used + 1
    return node, " ".join(words[used:])


def _options(
    command: app_commands.Command, rest: str, people: Callable[[str], int | None]
) -> SlashInput:
    # By the names Discord shows (``app_commands.rename``: /knowledge import's ``class``).
    parameters = {p.display_name: p for p in command.parameters}
    options: dict[str, Any] = {}
    files: dict[str, Path] = {}
    leftover = []
    position = 0
    found = [m for m in _OPTION.finditer(rest) if m["name"] in parameters]
    for at, match in enumerate(found):
        name = match["name"]
        leftover.append(rest[position : match.start()])
        position = match.end()
        value = match["value"]
        parameter = parameters[name]
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        elif parameter.type is AppCommandOptionType.string:
            # As Discord's own box for an option takes spaces: the words up to the next
            # option are this one's (``name:Ann about:A ranger from the north``).
            end = found[at + 1].start() if at + 1 < len(found) else len(rest)
            value = " ".join((value + rest[position:end]).split())
            position = end
        if parameter.type is AppCommandOptionType.attachment:
            if not value.startswith("@"):
                raise ConsoleInputError(f"{name}: give a file as {name}:@path/to/file")
            path = Path(value[1:]).expanduser()
            if not path.is_file():
                raise ConsoleInputError(f"{name}: there is no file at {path}")
            files[name] = path
        else:
            options[name] = _convert(parameter, value, people)
    leftover.append(rest[position:])
    free = " ".join(" ".join(leftover).split())
    if free:
        main = next(
            (
                p
                for p in command.parameters
                if p.type is AppCommandOptionType.string and p.display_name not in options
            ),
            None,
        )
        if main is None:
            given = [name for name in options if isinstance(options[name], str)]
            if given:
                # Most likely a value with spaces: "name:frog key" took "frog" alone.
                raise ConsoleInputError(
                    f"/{command.qualified_name} does not take free text: put a value with "
                    f'spaces in quotes, e.g. {given[-1]}:"{options[given[-1]]} {free}"'
                )
            raise ConsoleInputError(
                f"/{command.qualified_name} does not take free text; options: "
                + (", ".join(f"{p.display_name}:" for p in command.parameters) or "none")
            )
        options[main.display_name] = free
    missing = [
        p.display_name
        for p in command.parameters
        if p.required and p.display_name not in options | files
    ]
    if missing:
        raise ConsoleInputError(
            f"/{command.qualified_name} needs " + ", ".join(f"{name}:…" for name in missing)
        )
    return SlashInput(command.qualified_name, options, files)


def _convert(
    parameter: app_commands.Parameter, value: str, people: Callable[[str], int | None]
) -> Any:
    kind = parameter.type
    if kind is AppCommandOptionType.user:
        # As Discord's picker would: a person, here by name (``player:bob`` or ``player:@bob``).
        name = value.removeprefix("@")
        found = int(name) if name.isdigit() else people(name)
        if found is None:
            raise ConsoleInputError(f"{parameter.display_name}: nobody here is called {name}")
        return found
    try:
        if kind is AppCommandOptionType.integer:
            return int(value)
        if kind is AppCommandOptionType.number:
            return float(value)
        if kind is AppCommandOptionType.boolean:
            if value.lower() not in ("true", "false", "yes", "no"):
                raise ValueError
            return value.lower() in ("true", "yes")
    except ValueError:
        raise ConsoleInputError(
            f"{parameter.display_name}: expected a {kind.name}, got '{value}'"
        ) from None
    return value
