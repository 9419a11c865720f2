"""``/adventure import`` under the content rules: an imported story goes through the checks the
model's words do, and the importer is told what they did.

The archive (``engine.library.archive``) reads the file and writes it, masking the words banned
where it will run. The operator's moderation check (``engine.turns.moderation``) sits above the
library's floor, with the turns it was made for, so the import's check runs here, on the play
floor that offers the import: before a thread is opened for it and before anything is written.
Moving the check down instead would pull the moderation client and its rules under the library
for this one caller.

The check reads the passages as they will be stored (masked), newest first, since those are what
the model reads first, in batches of at most ``BATCH_TEXTS`` texts or ``BATCH_CHARS`` characters,
and at most ``MAX_REQUESTS`` requests: a longer story has its newest passages checked, and the
importer is told how many. A flagged passage refuses the whole import, naming its turns; a
checker that fails follows the operator's choice for turns (``CAMPFIRE_MODERATION_FAIL_CLOSED``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.errors import InvalidInput, ModelError
from engine.library.archive import NOT_ASKED, AdventureArchive, NotAsked, RestoredAdventure
from engine.library.formats.adventure import ParsedAdventure
from engine.library.formats.adventure_content import (
    Passage,
    banned_here,
    masked_story,
    newest_passages,
)
from engine.people.access.rules import Actor
from engine.people.content import ContentPolicy, Rating, rating_for
from engine.storage.database import Database
from engine.turns.moderation import Moderator, said

log = logging.getLogger(__name__)

#: One moderation request holds at most this many texts, or this many characters in all (a
#: longer passage is checked in pieces of this size).
BATCH_TEXTS = 32
BATCH_CHARS = 32_000
#: The most requests one import's check makes: about a million characters of the newest story,
#: a few seconds of the checker's time, whatever the file holds.
MAX_REQUESTS = 32


@dataclass(frozen=True, slots=True)
class ImportCheck:
    """What the moderation check did to an import about to be written (said to the importer)."""

    #: Passages checked, and of how many (0 of 0: no check is configured).
    checked: int = 0
    passages: int = 0
    #: The checker could not run and the operator lets unchecked text through.
    skipped: str = ""

    def note(self) -> str:
        if self.skipped:
            return (
                "This bot's moderation check could not run, so the story came in unchecked "
                f"({self.skipped})."
            )
        if not self.passages:
            return ""
        if self.checked == self.passages:
            return f"All {self.passages:,} of its passages passed this bot's moderation check."
        return (
            f"Its newest {self.checked:,} passages of {self.passages:,} passed this bot's "
            "moderation check (at most that many are checked)."
        )


@dataclass(frozen=True, slots=True)
class ImportedAdventure:
    restored: RestoredAdventure
    check: ImportCheck

    def notes(self) -> str:
        """What the content checks did, in words, for the import's answer ("" when nothing)."""
        lines = []
        masked = self.restored.masked
        if masked:
            lines.append(f"{masked:,} passage{'s' if masked != 1 else ''} had banned words masked.")
        if note := self.check.note():
            lines.append(note)
        return " ".join(lines)


class AdventureImports:
    """Imports through the archive, with the operator's moderation check before the write."""

    def __init__(
        self,
        db: Database,
        archive: AdventureArchive,
        moderator: Moderator | None = None,
        content: ContentPolicy | None = None,
    ) -> None:
        self.db = db
        self.archive = archive
        self.moderator = moderator or Moderator()
        self.content = content or ContentPolicy()

    async def check(self, actor: Actor, parsed: ParsedAdventure) -> ImportCheck:
        """The moderation check of ``parsed`` as it would be stored where ``actor`` imports it;
        raises ``InvalidInput`` (nothing stored, no thread opened) when it refuses."""
        if not self.moderator:
            return ImportCheck()
        async with self.db.session() as session:
            banned = await banned_here(session, actor, parsed, self.content)
            rating = (await rating_for(session, actor, self.content)).rating
        masked, _ = masked_story(parsed, banned)
        passages = newest_passages(masked)
        batches, checked = check_batches(passages)
        flagged: dict[int, set[str]] = {}
        try:
            for batch in batches:
                verdicts = await self.moderator.judge([text for _, text in batch], rating)
                for (turn, _), found in zip(batch, verdicts, strict=True):
                    if found:
                        flagged.setdefault(turn, set()).update(found)
        except ModelError as error:
            if self.moderator.fail_closed:
                raise InvalidInput(
                    "This bot's moderation check could not run, and this bot does not import "
                    f"what was not checked ({error.message}). Nothing was stored; import the "
                    "file again in a moment."
                ) from None
            log.warning("moderation check of an import skipped: %s", error.message)
            return ImportCheck(passages=len(passages), skipped=error.message)
        if flagged:
            raise InvalidInput(_refusal(flagged, rating))
        return ImportCheck(checked, len(passages))

    async def restore(
        self,
        actor: Actor,
        channel_id: int,
        parsed: ParsedAdventure,
        check: ImportCheck,
        *,
        opened_from: int | None = None,
        replaces: int | None | NotAsked = NOT_ASKED,
    ) -> ImportedAdventure:
        """Write a checked import (``AdventureArchive.restore``, which masks banned words and
        refuses when what runs there is no longer ``replaces``)."""
        restored = await self.archive.restore(
            actor, channel_id, parsed, opened_from=opened_from, replaces=replaces
        )
        return ImportedAdventure(restored, check)


def check_batches(passages: list[Passage]) -> tuple[list[list[tuple[int, str]]], int]:
    """The requests that check the newest passages within the bounds, each a list of (turn,
    text); and how many passages they check whole."""
    batches: list[list[tuple[int, str]]] = []
    batch: list[tuple[int, str]] = []
    size = checked = 0
    for passage in passages:
        text = passage.text
        pieces = [text[at : at + BATCH_CHARS] for at in range(0, len(text), BATCH_CHARS)]
        for piece in pieces:
            if batch and (len(batch) >= BATCH_TEXTS or size + len(piece) > BATCH_CHARS):
                batches.append(batch)
                batch, size = [], 0
            if len(batches) >= MAX_REQUESTS:
                return batches, checked
            batch.append((passage.turn, piece))
            size += len(piece)
        checked += 1
    if batch:
        batches.append(batch)
    return batches, checked


def _refusal(flagged: dict[int, set[str]], rating: Rating) -> str:
    turns = sorted(flagged)
    named = ", ".join("the opening" if turn == 0 else f"turn {turn}" for turn in turns[:10])
    if len(turns) > 10:
        named += f" and {len(turns) - 10} more"
    categories = said(frozenset().union(*flagged.values()))
    return (
        f"This adventure was not imported: this bot's moderation check refused {named} "
        f"({categories}, at the {rating.label} rating here). Nothing was stored."
    )
