"""Reading fields out of parsed JSON with the path of each value at hand.

Exports in the wild leave fields out, send ``null``, put a number where text belongs or a
comma-separated string where a list belongs. ``Fields`` accepts what is unambiguous (absent or
null is the default; a list of keys or a comma string are both keys) and refuses the rest with
the field's path, e.g. ``storyCards[3].value: expected text, found a list``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from engine.library.reading.errors import ImportRejected

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    return "an object"


class Fields:
    """One JSON object and where it is in the file."""

    def __init__(self, raw: Any, path: str) -> None:
        if not isinstance(raw, dict):
            raise ImportRejected(f"{path or 'The file'}: expected an object, found {kind_of(raw)}.")
        self.raw = raw
        self.path = path

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, *keys: str) -> bool:
        return any(self.raw.get(key) is not None for key in keys)

    def first(self, *keys: str) -> tuple[str, Any]:
        """The first of ``keys`` present and not null, with its name (or the first name)."""
        for key in keys:
            if self.raw.get(key) is not None:
                return key, self.raw[key]
        return keys[0], None

    def text(self, *keys: str, default: str = "") -> str:
        key, value = self.first(*keys)
        if value is None:
            return default
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            # A title of 1984 is still a title.
            return str(value)
        raise ImportRejected(f"{self.at(key)}: expected text, found {kind_of(value)}.")

    def flag(self, *keys: str, default: bool = False) -> bool:
        key, value = self.first(*keys)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ImportRejected(f"{self.at(key)}: expected true or false, found {kind_of(value)}.")

    def words(self, *keys: str) -> list[str]:
        """A list of text, given as a list or as one comma-separated string."""
        key, value = self.first(*keys)
        if value is None:
            return []
        if isinstance(value, str):
            return [part for part in value.split(",") if part.strip()]
        if isinstance(value, list):
            out = []
            for i, item in enumerate(value):
                if isinstance(item, str):
                    out.append(item)
                elif isinstance(item, int | float) and not isinstance(item, bool):
                    out.append(str(item))
                else:
                    raise ImportRejected(
                        f"{self.at(key)}[{i}]: expected text, found {kind_of(item)}."
                    )
            return out
        raise ImportRejected(f"{self.at(key)}: expected a list of text, found {kind_of(value)}.")

    def items(self, *keys: str) -> list[tuple[str, Any]]:
        """A list of entries, each with its path. An object of entries (keyed by id, as
        SillyTavern stores them) counts as a list of its values."""
        key, value = self.first(*keys)
        if value is None:
            return []
        if isinstance(value, list):
            return [(f"{self.at(key)}[{i}]", item) for i, item in enumerate(value)]
        if isinstance(value, dict):
            return [(f"{self.at(key)}.{k}", item) for k, item in value.items()]
        raise ImportRejected(f"{self.at(key)}: expected a list, found {kind_of(value)}.")

    def obj(self, *keys: str) -> Fields | None:
        key, value = self.first(*keys)
        if value is None:
            return None
        return Fields(value, self.at(key))

    def mapping(self, *keys: str) -> dict[str, Any]:
        key, value = self.first(*keys)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ImportRejected(f"{self.at(key)}: expected an object, found {kind_of(value)}.")
        return value

    def integer(
        self, *keys: str, default: int | None = 0, low: int | None = None, high: int = INT32_MAX
    ) -> int | None:
        """A whole number within ``low``..``high`` (by default what a database integer holds)."""
        key, value = self.first(*keys)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise ImportRejected(
                f"{self.at(key)}: expected a whole number, found {kind_of(value)}."
            )
        if (low is not None and value < low) or value > high:
            raise ImportRejected(
                f"{self.at(key)}: {value} is out of range ({low if low is not None else '…'}"
                f" to {high})."
            )
        return value

    def number(self, *keys: str) -> float | None:
        key, value = self.first(*keys)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ImportRejected(f"{self.at(key)}: expected a number, found {kind_of(value)}.")
        return float(value)

    def when(self, *keys: str) -> datetime | None:
        """An ISO 8601 time, or None."""
        key, value = self.first(*keys)
        if value is None:
            return None
        if not isinstance(value, str):
            raise ImportRejected(f"{self.at(key)}: expected a time, found {kind_of(value)}.")
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ImportRejected(
                f"{self.at(key)}: “{value[:40]}” is not an ISO 8601 time."
            ) from None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
