"""Errors a player should read.

Everything the engine raises on purpose for a person to see derives from ``CampfireError``; its
message is written for players and shown as-is by every front end. Any other exception is a bug:
front ends log it and answer with a short apology and an id.
"""

from __future__ import annotations

import logging
import secrets

log = logging.getLogger("campfire")


class CampfireError(Exception):
    """Base for errors whose message is written for the player."""

    #: Whether pressing Retry could help (a busy or flaky model) or not (a wrong setting).
    retryable: bool = True

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InternalError(CampfireError):
    """Campfire's own fault; the reference finds the traceback in the logs."""

    def __init__(self, reference: str) -> None:
        super().__init__(
            f"Something went wrong on Campfire's side (reference {reference}). "
            "Nothing was saved; press Retry."
        )
        self.reference = reference


class DatabaseBusy(CampfireError):
    """The database stayed locked by another writer past our wait; nothing was saved.
    ``recorded``: whether the request was recorded (it can be retried with its button) or
    not even that (the player sends it again)."""

    def __init__(self, *, recorded: bool = True) -> None:
        self.retryable = recorded
        super().__init__(
            "The story's database was busy for too long, so nothing was saved. "
            + ("Press Retry in a moment." if recorded else "Send it again in a moment.")
        )


def log_incident(what: str, error: BaseException) -> str:
    """Log an unexpected error with a short reference the player can quote."""
    reference = secrets.token_hex(4)
    log.error("%s (reference %s)", what, reference, exc_info=error)
    return reference


class NotFound(CampfireError):
    retryable = False


class NoAdventureHere(NotFound):
    """An action sent where no adventure runs: a front end may point to where some do."""


class InvalidInput(CampfireError):
    retryable = False


class NotAllowed(CampfireError):
    """The player may not do this here; the message says who can."""

    retryable = False


class StoryMovedOn(CampfireError):
    """Someone else changed the adventure while this request was being handled."""

    # Pressing Retry would not help: the player should look at the newest turn first.
    retryable = False


class PlayerDeleted(CampfireError):
    """Work asked for by someone who has since deleted their data (/profile delete): nothing
    of it is kept."""

    retryable = False

    def __init__(self) -> None:
        super().__init__(
            "Not played: the player who sent this deleted their Campfire data, so nothing of "
            "it was kept."
        )


# --- model providers ---------------------------------------------------------------------------


class ModelError(CampfireError):
    """The language model could not give a usable reply."""


class ModelUnreachable(ModelError):
    pass


class ModelKeyRefused(ModelError):
    """Retryable: once the key is put right (``/model set``, the operator's settings), the
    player's action should not have to be typed again."""


class ModelNotFound(ModelError):
    """Retryable, as a refused key is: a model name is put right in a moment."""


class ModelRateLimited(ModelError):
    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ModelTimedOut(ModelError):
    pass


class ModelServerError(ModelError):
    pass


class ModelBadReply(ModelError):
    """The server answered, but not in a shape Campfire can read (broken stream, bad JSON)."""


class ModelEmptyReply(ModelError):
    pass


class ModelReplyCutOff(ModelError):
    """The reply passed the operator's limit on one reply's time or length and was stopped."""


class ModelYielded(ModelError):
    """Background work on the embedded model stopped so that a narration could have the cores
    (``engine.llm.providers.local``); nothing was written, and the work is due again later."""


class ReasoningExhausted(ModelError):
    """The whole output budget went into a reasoning trace, leaving no story text."""

    retryable = False
