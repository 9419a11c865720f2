"""The operator's optional moderation check: actions and narrations judged by an
OpenAI-compatible ``/moderations`` endpoint (``CAMPFIRE_MODERATION_URL``) for the place's
content rating (``engine.people.content``).

A flagged action is refused to its player alone, before anything is stored; a flagged narration
is not shown: the turn fails with Retry and nothing is stored. Which flagged categories refuse a
text depends on the rating: at safe, any flag; at moderate, sexual content, hate, threats,
self-harm and graphic violence; at mature, sexual content involving minors only (the category
names are OpenAI's: API reference, "Moderations"). When the checker fails or does not answer,
the operator chooses: let the text through (the default, logged) or refuse it
(``CAMPFIRE_MODERATION_FAIL_CLOSED``), never losing the player's action (Retry).
With no endpoint configured nothing is checked.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from engine.errors import CampfireError, InvalidInput, ModelError
from engine.llm.providers.moderation import ModerationClient, Verdict
from engine.people.content import Rating

log = logging.getLogger(__name__)

#: The flagged categories that refuse a text, by rating (None: every flag refuses).
REFUSED: dict[Rating, frozenset[str] | None] = {
    Rating.SAFE: None,
    Rating.MODERATE: frozenset(
        {
            "sexual",
            "sexual/minors",
            "hate",
            "hate/threatening",
            "harassment/threatening",
            "self-harm",
            "self-harm/intent",
            "self-harm/instructions",
            "violence/graphic",
        }
    ),
    Rating.MATURE: frozenset({"sexual/minors"}),
}


class NarrationHeld(CampfireError):
    """A narration the moderation check refused: not shown, nothing stored; Retry asks for
    another."""


class ModerationUnavailable(CampfireError):
    """The check could not run and the operator refuses what was not checked; Retry."""


class Moderator:
    def __init__(self, client: ModerationClient | None = None, *, fail_closed: bool = False):
        self.client = client
        self.fail_closed = fail_closed

    def __bool__(self) -> bool:
        return self.client is not None

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()

    async def refused(self, text: str, rating: Rating, *, recorded: bool = True) -> frozenset[str]:
        """The categories for which ``text`` is refused at ``rating`` (empty: it passes).
        ``recorded``: the action is kept to Retry; else the player is asked to send it again."""
        if self.client is None or not text.strip():
            return frozenset()
        try:
            (verdict,) = await self.client.check([text])
        except ModelError as error:
            if self.fail_closed:
                unchecked = (
                    "The bot's moderation check could not run, and this bot does not play "
                    f"what was not checked ({error.message})."
                )
                if not recorded:
                    raise InvalidInput(f"{unchecked} Send your action again in a moment.") from None
                raise ModerationUnavailable(f"{unchecked} Press Retry in a moment.") from None
            log.warning("moderation check skipped: %s", error.message)
            return frozenset()
        return _refusing(verdict, rating)

    async def judge(self, texts: Sequence[str], rating: Rating) -> list[frozenset[str]]:
        """For each of ``texts`` (one request), the categories it is refused for at ``rating``.
        Raises ``ModelError`` when the checker fails: what that means is the caller's (an
        import follows ``fail_closed`` as a turn does, in its own words)."""
        if self.client is None or not texts:
            return [frozenset() for _ in texts]
        return [_refusing(verdict, rating) for verdict in await self.client.check(texts)]

    async def check_action(self, text: str, rating: Rating, *, recorded: bool = True) -> None:
        """Refuse an action (``InvalidInput``: no Retry, the player rewords it)."""
        found = await self.refused(text, rating, recorded=recorded)
        if found:
            raise InvalidInput(
                f"Your action was refused by this bot's moderation check ({said(found)}, at "
                f"the {rating.label} rating here), so it was not played. Nothing was stored."
            )

    async def check_narration(self, text: str, rating: Rating) -> None:
        found = await self.refused(text, rating)
        if found:
            raise NarrationHeld(
                f"The narrator's reply was held back by this bot's moderation check "
                f"({said(found)}, at the {rating.label} rating here); nothing was stored. "
                "Press Retry for another."
            )


def _refusing(verdict: Verdict, rating: Rating) -> frozenset[str]:
    if not verdict.flagged:
        return frozenset()
    blocked = REFUSED[rating]
    found = verdict.categories if blocked is None else verdict.categories & blocked
    if blocked is None and not found:
        return frozenset({"flagged"})
    return found


def said(categories: frozenset[str]) -> str:
    """Flagged categories as players are told them."""
    return ", ".join(sorted(categories))
