"""Discord's rules for application command definitions, checked when a bot registers them.

Everything is from discord-api-docs, "Application Commands": Application Command Naming,
Application Command Structure, Application Command Option Structure and Option Choice Structure,
Registering a Command (how many per scope), Subcommands and Subcommand Groups (the only nesting
allowed), and Slash Commands (the 8,000-character size). Values of ``contexts`` and
``integration_types`` are from "Receiving and Responding" (Interaction Context Types) and
"Application" (Application Integration Types).

A broken definition is answered ``400`` with ``50035 Invalid Form Body`` and Discord's nested
``errors`` object, keyed by the command's index in the request; too many commands in a scope with
``30032 Maximum number of application commands reached``. The docs do not list the inner error
codes (``APPLICATION_COMMAND_INVALID_NAME`` …); the names here follow the style Discord answers
with, and only the JSON code and the field paths are meant to be relied on.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from .limits import FormErrors

CHAT_INPUT, USER, MESSAGE, PRIMARY_ENTRY_POINT = 1, 2, 3, 4
SUB_COMMAND, SUB_COMMAND_GROUP = 1, 2
STRING, INTEGER, NUMBER = 3, 4, 10
OPTION_TYPES = range(1, 12)

NAME_MAX = 32
DESCRIPTION_MAX = 100
OPTIONS_MAX = 25
CHOICES_MAX = 25
CHOICE_NAME_MAX = 100
CHOICE_VALUE_MAX = 100
STRING_LENGTH_MAX = 6000
COMMAND_SIZE_MAX = 8000
# "An app can have the following number of commands: 100 global CHAT_INPUT commands, 15 global
# USER commands, 15 global MESSAGE commands … the same amount of guild-specific commands per
# guild."
COMMANDS_PER_SCOPE = {CHAT_INPUT: 100, USER: 15, MESSAGE: 15, PRIMARY_ENTRY_POINT: 1}
INTERACTION_CONTEXTS = {0, 1, 2}  # GUILD, BOT_DM, PRIVATE_CHANNEL
INTEGRATION_TYPES = {0, 1}  # GUILD_INSTALL, USER_INSTALL
PERMISSIONS_BITS = 64


def _is_name_char(char: str) -> bool:
    """One character of ``^[-_'\\p{L}\\p{N}\\p{sc=Deva}\\p{sc=Thai}]{1,32}$``: Python's ``re``
    has no Unicode properties, so letters and numbers by category, and the two scripts by their
    blocks (their vowel signs are marks, not letters)."""
    if char in "-_'":
        return True
    if unicodedata.category(char)[0] in "LN":
        return True
    return "\u0900" <= char <= "\u097f" or "\u0e00" <= char <= "\u0e7f"


def _chat_input_name_problem(name: str) -> str | None:
    if not all(_is_name_char(c) for c in name):
        return "Command name is invalid"
    # "If there is a lowercase variant of any letters used, you must use those."
    if name.lower() != name:
        return "Command name is invalid: use lowercase letters"
    return None


class _Checker:
    """Walks one command, collecting errors under its index and adding up its size."""

    def __init__(self, errors: FormErrors, index: int, kind: int) -> None:
        self.errors = errors
        self.index = index
        self.kind = kind
        self.size = 0

    def path(self, *keys: str | int) -> list[str | int]:
        return [self.index, *keys]

    def _counted(self, value: Any, localizations: Any) -> int:
        # "When localization fields are present, only the longest localization for each field
        # (including the default value) is counted towards the size limit."
        lengths = [len(value) if isinstance(value, str) else len(str(value))]
        if isinstance(localizations, dict):
            lengths += [len(v) for v in localizations.values() if isinstance(v, str)]
        return max(lengths)

    def name(self, node: dict[str, Any], path: list[str | int], *, chat_input: bool) -> None:
        name = node.get("name")
        localized = node.get("name_localizations")
        for key, value in [("name", name), *_localized("name_localizations", localized)]:
            where = [*path, *key] if isinstance(key, tuple) else [*path, key]
            if not isinstance(value, str):
                self.errors.add(where, "BASE_TYPE_REQUIRED", "This field is required")
                continue
            if not 1 <= len(value) <= NAME_MAX:
                self.errors.length_between(where, value, 1, NAME_MAX)
            elif chat_input and (problem := _chat_input_name_problem(value)) is not None:
                self.errors.add(where, "APPLICATION_COMMAND_INVALID_NAME", problem)
        if isinstance(name, str):
            self.size += self._counted(name, localized)

    def description(self, node: dict[str, Any], path: list[str | int], *, required: bool) -> None:
        description = node.get("description")
        localized = node.get("description_localizations")
        if not required:
            # "Empty string for USER and MESSAGE commands."
            if description not in (None, ""):
                self.errors.add(
                    [*path, "description"],
                    "APPLICATION_COMMAND_DESCRIPTION_INVALID",
                    "Description must be empty for user and message commands",
                )
            return
        for key, value in [
            ("description", description),
            *_localized("description_localizations", localized),
        ]:
            where = [*path, *key] if isinstance(key, tuple) else [*path, key]
            if not isinstance(value, str):
                self.errors.add(where, "BASE_TYPE_REQUIRED", "This field is required")
            else:
                self.errors.length_between(where, value, 1, DESCRIPTION_MAX)
        if isinstance(description, str):
            self.size += self._counted(description, localized)

    def options(self, options: Any, path: list[str | int], level: str) -> None:
        """The options of a command (``level`` "command"), a subcommand group ("group") or a
        subcommand ("subcommand")."""
        if options is None:
            return
        where = [*path, "options"]
        if not isinstance(options, list):
            self.errors.add(where, "LIST_TYPE_CONVERT", "Only iterables may be used in a ListType")
            return
        self.errors.max_length(where, options, OPTIONS_MAX)
        kinds = [o.get("type") for o in options if isinstance(o, dict)]
        subs = [k for k in kinds if k in (SUB_COMMAND, SUB_COMMAND_GROUP)]
        if subs and len(subs) != len(kinds):
            # "Using subcommands or subcommand groups will make your base command unusable":
            # a level holds either subcommands (and groups) or parameters, never both.
            self.errors.add(
                where,
                "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID",
                "Sub-command and sub-command group option types are mutually exclusive to all "
                "other types",
            )
        seen: set[str] = set()
        optional_seen = False
        for j, option in enumerate(options):
            at = [*where, j]
            if not isinstance(option, dict):
                self.errors.add(at, "DICT_TYPE_CONVERT", "Only dictionaries may be used")
                continue
            kind = option.get("type")
            if not isinstance(kind, int) or kind not in OPTION_TYPES:
                self.errors.add(
                    [*at, "type"], "ENUM_TYPE_COERCE", f'Value "{kind}" is not a valid enum value.'
                )
                continue
            self.name(option, at, chat_input=True)
            self.description(option, at, required=True)
            name = option.get("name")
            if isinstance(name, str):
                if name in seen:
                    self.errors.add(
                        [*at, "name"],
                        "APPLICATION_COMMAND_OPTIONS_DUPLICATE_NAME",
                        "Option names must be unique",
                    )
                seen.add(name)
            # "Your top level command can contain subcommand groups, and those groups can
            # contain subcommands. That is the only kind of nesting supported."
            inner = {SUB_COMMAND_GROUP: "group", SUB_COMMAND: "subcommand"}.get(kind)
            allowed = {
                "group": level == "command",
                "subcommand": level in ("command", "group"),
                None: level in ("command", "subcommand"),
            }[inner]
            if not allowed:
                self.errors.add(
                    [*at, "type"],
                    "APPLICATION_COMMAND_OPTION_TYPE_INVALID",
                    "Nesting goes command → sub-command group → sub-command → parameters only",
                )
                continue
            if inner is not None:
                self.options(option.get("options"), at, inner)
                continue
            self._parameter(option, at, kind)
            # "Required options must be listed before optional options."
            if option.get("required"):
                if optional_seen:
                    self.errors.add(
                        [*at, "required"],
                        "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID",
                        "Required options must be placed before non-required options",
                    )
            else:
                optional_seen = True

    def _parameter(self, option: dict[str, Any], at: list[str | int], kind: int) -> None:
        choices = option.get("choices")
        if choices:
            if kind not in (STRING, INTEGER, NUMBER):
                self.errors.add(
                    [*at, "choices"],
                    "APPLICATION_COMMAND_OPTION_CHOICES_INVALID",
                    "Choices are only for string, integer and number options",
                )
            if option.get("autocomplete"):
                # "autocomplete may not be set to true if choices are present."
                self.errors.add(
                    [*at, "autocomplete"],
                    "APPLICATION_COMMAND_AUTOCOMPLETE_INVALID",
                    "Autocomplete cannot be used with choices",
                )
            self.errors.max_length([*at, "choices"], choices, CHOICES_MAX)
            for k, choice in enumerate(choices):
                self._choice(choice, [*at, "choices", k], kind)
        for key, low in (("min_length", 0), ("max_length", 1)):
            self.errors.number_between([*at, key], option.get(key), low, STRING_LENGTH_MAX)

    def _choice(self, choice: Any, at: list[str | int], kind: int) -> None:
        if not isinstance(choice, dict):
            self.errors.add(at, "DICT_TYPE_CONVERT", "Only dictionaries may be used")
            return
        name = choice.get("name")
        localized = choice.get("name_localizations")
        for key, value in [("name", name), *_localized("name_localizations", localized)]:
            where = [*at, *key] if isinstance(key, tuple) else [*at, key]
            if not isinstance(value, str):
                self.errors.add(where, "BASE_TYPE_REQUIRED", "This field is required")
            else:
                self.errors.length_between(where, value, 1, CHOICE_NAME_MAX)
        value = choice.get("value")
        if kind == STRING:
            if not isinstance(value, str):
                self.errors.add([*at, "value"], "BASE_TYPE_REQUIRED", "This field is required")
            else:
                self.errors.max_length([*at, "value"], value, CHOICE_VALUE_MAX)
        if isinstance(name, str):
            self.size += self._counted(name, localized)
        if value is not None:
            self.size += len(str(value))


def _localized(field: str, localizations: Any) -> list[tuple[tuple[str, str], Any]]:
    if not isinstance(localizations, dict):
        return []
    return [((field, locale), value) for locale, value in localizations.items()]


def _check_permissions(errors: FormErrors, path: list[str | int], value: Any) -> None:
    """``default_member_permissions``: "?string … set of permissions represented as a bit
    set", e.g. ``"0"`` or ``str(1 << 5)``. Discord also takes the number itself, as discord.py
    sends it (``app_commands.Group.to_dict``: ``default_permissions.value``)."""
    if value is None:
        return
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.isdigit() or int(value) >= 1 << PERMISSIONS_BITS:
        errors.add(path, "NUMBER_TYPE_COERCE", f'Value "{value}" is not snowflake.')


def _check_enum_list(
    errors: FormErrors, path: list[str | int], value: Any, allowed: set[int]
) -> None:
    if value is None:
        return
    if not isinstance(value, list):
        errors.add(path, "LIST_TYPE_CONVERT", "Only iterables may be used in a ListType")
        return
    for i, item in enumerate(value):
        if isinstance(item, bool) or item not in allowed:
            errors.add([*path, i], "ENUM_TYPE_COERCE", f'Value "{item}" is not a valid enum value.')


def check_commands(body: Any) -> tuple[int, dict[str, Any]] | None:
    """Validate a bulk overwrite's list of commands; returns (status, error body) or None."""
    errors = FormErrors()
    if not isinstance(body, list):
        errors.add([], "LIST_TYPE_CONVERT", "Only iterables may be used in a ListType")
        return 400, errors.body() or {}
    counts: dict[int, int] = {}
    names: set[tuple[str, int]] = set()
    for i, command in enumerate(body):
        if not isinstance(command, dict):
            errors.add([i], "DICT_TYPE_CONVERT", "Only dictionaries may be used")
            continue
        kind = command.get("type", CHAT_INPUT)
        if kind not in COMMANDS_PER_SCOPE:
            errors.add(
                [i, "type"], "ENUM_TYPE_COERCE", f'Value "{kind}" is not a valid enum value.'
            )
            continue
        counts[kind] = counts.get(kind, 0) + 1
        checker = _Checker(errors, i, kind)
        checker.name(command, [i], chat_input=kind == CHAT_INPUT)
        checker.description(command, [i], required=kind == CHAT_INPUT)
        if kind == CHAT_INPUT:
            checker.options(command.get("options"), [i], "command")
        elif command.get("options"):
            # "options can only be set for application commands of type CHAT_INPUT."
            errors.add(
                [i, "options"],
                "APPLICATION_COMMAND_OPTIONS_INVALID",
                "Only chat input commands take options",
            )
        if kind == CHAT_INPUT and checker.size > COMMAND_SIZE_MAX:
            errors.add(
                [i],
                "APPLICATION_COMMAND_TOO_LARGE",
                f"Command exceeds maximum size ({COMMAND_SIZE_MAX})",
            )
        _check_permissions(
            errors, [i, "default_member_permissions"], command.get("default_member_permissions")
        )
        _check_enum_list(errors, [i, "contexts"], command.get("contexts"), INTERACTION_CONTEXTS)
        _check_enum_list(
            errors, [i, "integration_types"], command.get("integration_types"), INTEGRATION_TYPES
        )
        # "Command names are unique per application, per type, within each scope."
        name = command.get("name")
        if isinstance(name, str):
            if (name, kind) in names:
                errors.add(
                    [i, "name"],
                    "APPLICATION_COMMANDS_DUPLICATE_NAME",
                    "Application command names must be unique",
                )
            names.add((name, kind))
    body_errors = errors.body()
    if body_errors is not None:
        return 400, body_errors
    for kind, count in counts.items():
        if count > COMMANDS_PER_SCOPE[kind]:
            return 400, {"code": 30032, "message": "Maximum number of application commands reached"}
    return None
