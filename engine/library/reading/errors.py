"""The one error an import or export gives a player."""

from __future__ import annotations

from engine.errors import InvalidInput


class ImportRejected(InvalidInput):
    """A file that cannot be imported; the message names what is wrong and where."""
