"""Reading what the player types at a terminal, with prompt_toolkit: line editing, a history
kept across runs, completion of commands and options as Discord's command picker offers them,
and form fields as Discord's form draws them (a placeholder greyed in the empty box, a
prefilled value to edit, several lines in a paragraph field).

Only on a terminal: a pipe is read a line at a time by ``app.py``, so scripts and tests that
pipe into the console see no prompt_toolkit at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from discord import AppCommandOptionType, app_commands
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, InMemoryHistory

#: The console's own commands, beside Campfire's (``commands.py``).
OWN_COMMANDS = {"as": "type as another member (with --server)", "quit": "leave the console"}
#: The style of a field's placeholder: greyed, as Discord draws it.
PLACEHOLDER_STYLE = "fg:ansibrightblack italic"


class CommandCompleter(Completer):
    """What Discord's picker offers while a command is typed: the commands, then a group's
    subcommands, then the options not given yet (``name:``), and an option's choices; after
    ``!``, the keys of the newest buttons (``buttons``)."""

    def __init__(
        self, tree: app_commands.CommandTree, buttons: Callable[[], list[str]] | None = None
    ) -> None:
        self.tree = tree
        self.buttons = buttons or (lambda: [])

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        text = document.text_before_cursor
        if text.startswith("!") and " " not in text:
            for key in self.buttons():
                if key.startswith(text[1:].casefold()):
                    yield Completion(f"!{key}", start_position=-len(text))
            return
        if not text.startswith("/"):
            return
        words = text[1:].split(" ")
        if len(words) == 1:
            yield from self._named(words[0], self._top(), prefix="/")
            return
        node: Any = self.tree.get_command(words[0])
        used = 1
        while isinstance(node, app_commands.Group) and used < len(words):
            if used == len(words) - 1:
                yield from self._named(words[used], {c.name: c.description for c in node.commands})
                return
            node, used = node.get_command(words[used]), used + 1
        if isinstance(node, app_commands.Command):
            yield from self._options(node, " ".join(words[used:]), words[-1])

    def _top(self) -> dict[str, str]:
        found = {
            c.name: c.description
            for c in self.tree.get_commands()
            if isinstance(c, app_commands.Command | app_commands.Group)  # no context menus
        }
        return found | OWN_COMMANDS

    @staticmethod
    def _named(typed: str, names: dict[str, str], prefix: str = "") -> Iterable[Completion]:
        for name in sorted(names):
            if name.startswith(typed.casefold()):
                yield Completion(
                    f"{prefix}{name}",
                    start_position=-len(typed) - len(prefix),
                    display_meta=names[name],
                )

    @staticmethod
    def _options(command: app_commands.Command, rest: str, word: str) -> Iterable[Completion]:
        parameters = {p.display_name: p for p in command.parameters}
        name, colon, value = word.partition(":")
        if colon and name in parameters:
            parameter = parameters[name]
            choices = [str(choice.name) for choice in parameter.choices]
            if parameter.type is AppCommandOptionType.boolean:
                choices = ["true", "false"]
            for choice in choices:
                if choice.casefold().startswith(value.casefold()):
                    shown = f'"{choice}"' if " " in choice else choice
                    yield Completion(shown, start_position=-len(value))
            return
        given = {part.split(":", 1)[0] for part in rest.split(" ") if ":" in part}
        for parameter in command.parameters:
            option = parameter.display_name
            if option not in given and option.startswith(word.casefold()):
                yield Completion(
                    f"{option}:",
                    start_position=-len(word),
                    display_meta=("required · " if parameter.required else "")
                    + (parameter.description or ""),
                )


class TerminalReader:
    """Lines and form fields typed at the terminal, through one prompt_toolkit session."""

    def __init__(self, completer: Completer, history: Path | None) -> None:
        self._commands = PromptSession[str](
            history=FileHistory(str(history)) if history is not None else InMemoryHistory(),
            completer=completer,
            complete_while_typing=True,
        )
        # A form's fields have no history of their own (Discord's form keeps none).
        self._fields = PromptSession[str]()

    async def line(self, prompt: str) -> str:
        """A command typed after ``prompt``: EOFError on Ctrl-D, KeyboardInterrupt on Ctrl-C."""
        return await self._commands.prompt_async(prompt)

    async def field(self, prompt: str, *, held: str, placeholder: str, paragraph: bool) -> str:
        """A form field: ``held`` to edit, ``placeholder`` greyed while the box is empty,
        several lines in a ``paragraph`` field (Esc then Enter sends it)."""
        return await self._fields.prompt_async(
            prompt,
            default=held,
            placeholder=FormattedText([(PLACEHOLDER_STYLE, placeholder)]) if placeholder else None,
            multiline=paragraph,
        )
