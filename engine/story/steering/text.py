"""The adventure's steering texts: its author's note, plot essentials and AI instructions."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from engine.errors import InvalidInput
from engine.people.access.checks import check_may_steer
from engine.people.access.rules import adventure_here
from engine.platform.sanitise import sanitise

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
    from engine.storage.database import Database

#: The longest steering text (author's note, plot essentials, AI instructions): what one
#: Discord text input holds, so that whatever is stored can be edited in a form again.
TEXT_MAX_CHARS = 4000


class SteeringField(StrEnum):
    AUTHORS_NOTE = "authors_note"
    PLOT_ESSENTIALS = "plot_essentials"
    AI_INSTRUCTIONS = "ai_instructions"

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    SteeringField.AUTHORS_NOTE: "Author's note",
    SteeringField.PLOT_ESSENTIALS: "Plot essentials",
    SteeringField.AI_INSTRUCTIONS: "AI instructions",
}


@dataclass(frozen=True, slots=True)
class Steering:
    """One steering text as it stands, for a form prefilled with it."""

    adventure_id: int
    adventure_title: str
    field: SteeringField
    text: str

    @property
    def label(self) -> str:
        return self.field.label


@dataclass(frozen=True, slots=True)
class SteeringChange:
    adventure_id: int
    field: SteeringField
    text: str
    previous: str

    @property
    def cleared(self) -> bool:
        return not self.text

    @property
    def unchanged(self) -> bool:
        return self.text == self.previous

    @property
    def message(self) -> str:
        label = self.field.label
        if self.cleared:
            if not self.previous:
                return f"{label} was already empty; nothing changed."
            return f"{label} cleared; it applies from the next turn."
        if self.unchanged:
            return f"{label} unchanged."
        return f"{label} updated; it applies from the next turn."


def clean_text(text: str) -> str:
    """Sanitised; trailing spaces and blank edges go; a text of only whitespace is empty."""
    return "\n".join(line.rstrip() for line in sanitise(text).strip().splitlines())


class SteeringText:
    """What the front end calls for /note, /essentials and /instructions."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, channel_id: int, actor: Actor, field: SteeringField | str) -> Steering:
        """One steering text of the adventure here, for someone about to change it.

        Refuses (``NotAllowed``) whoever may not change it, so no one fills a form for nothing.
        """
        field = _field(field)
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            await check_may_steer(session, adventure, actor)
            assert adventure.id is not None
            return Steering(adventure.id, adventure.title, field, getattr(adventure, field.value))

    async def set(
        self,
        channel_id: int,
        actor: Actor,
        field: SteeringField | str,
        text: str,
        *,
        adventure_id: int | None = None,
    ) -> SteeringChange:
        """Set (or, with blank text, clear) one steering text of the adventure here.

        ``adventure_id``: the adventure a form was opened for; if another one has started in
        the channel since, nothing is saved.
        """
        field = _field(field)
        text = clean_text(text)
        if len(text) > TEXT_MAX_CHARS:
            raise InvalidInput(
                f"{field.label} can be at most {TEXT_MAX_CHARS:,} characters; "
                f"this one has {len(text):,}."
            )
        async with self.db.transaction() as session:
            adventure = await adventure_here(
                session, channel_id, for_update=True, expect=adventure_id
            )
            await check_may_steer(session, adventure, actor)
            assert adventure.id is not None
            previous = getattr(adventure, field.value)
            if text != previous:
                setattr(adventure, field.value, text)
            return SteeringChange(adventure.id, field, text, previous)


def _field(field: SteeringField | str) -> SteeringField:
    try:
        return SteeringField(field)
    except ValueError:
        raise InvalidInput(f"There is no steering field called {field!r}.") from None
