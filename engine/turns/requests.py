"""Request identity: every action is recorded under its interaction id before it runs.

A request is what a front end asks the engine to play (an action, a retry), named by the
Discord interaction that carried it, with a digest of its payload and the story version the
player saw (DESIGN §6). Its row (``request_records``) is written before the turn runs and
holds what became of it, so:

* the same interaction delivered twice (a gateway replay, two processes given one event) plays
  once: the second delivery's INSERT conflicts with the first's row and it gets the stored
  outcome (``AlreadyHandled``), or, while the first is still queued or running, says so. The
  database decides, so this holds across processes;
* the same id with another payload is refused (``RequestReused``): an id names one request;
* a button acts once per story version (``button_pressed``);
* a turn that failed, or died with its process, can be played again from its stored payload.

Why the front end cannot tell a repeat by itself: Discord lets an interaction be acknowledged
once (a second initial response fails with error 40060, "Interaction has already been
acknowledged"), while its token sends followups and edits the original response for 15
minutes after any acknowledgement (discord-api-docs: "Receiving and Responding", Interaction
Callback and Followup Messages; "Opcodes and Status Codes", JSON error codes). A delivery whose
defer got 40060 may still be the one the database lets play, and it answers through the token.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from engine.errors import CampfireError
from engine.platform.coordination.request_status import (
    DONE,
    FAILED,
    INTERRUPTED,
    NEVER_PLAYED,
    QUEUED,
    RETRIED,
    RUNNING,
)
from engine.storage.changes import rows_changed
from engine.storage.coordination_models import RequestRecord
from engine.storage.database import Database
from engine.storage.dialect import insert_for
from engine.storage.models import utcnow
from engine.turns.events import AlreadyHandled, TurnFailed, TurnInterrupted

if TYPE_CHECKING:
    from engine.turns.result import TurnResult

#: A request to write the newest turn again (stored so a failed retry can be retried).
RETRY_PAYLOAD = {"type": "retry", "text": ""}


# Core statements: the INSERT must be able to conflict. The table is looked up in the metadata
# by name, where it is typed as a Table (SQLModel does not declare ``__table__`` to type
# checkers).
_requests = RequestRecord.metadata.tables[RequestRecord.__tablename__]


class RequestReused(CampfireError):
    """An interaction id arrived again carrying a different action (or from someone else)."""

    retryable = False

    def __init__(self) -> None:
        super().__init__(
            "This arrived as a repeat of an earlier action but asks for something else, so it "
            "was not played. Send your action again."
        )


def payload_digest(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class NewRequest:
    request_id: int
    user_id: int
    payload: dict[str, Any]
    #: The story version the request was made against (the button's, or the current one).
    version: int | None
    #: Pressed on a button drawn for ``version`` (which acts once), not typed as a command.
    from_button: bool = False


class RequestLog:
    """The ``request_records`` table: what was asked under which interaction, and its end."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def open(
        self, session: AsyncSession, request: NewRequest, adventure_id: int | None
    ) -> AlreadyHandled | None:
        """Store a new request as queued, in the caller's transaction; or, if its id is stored
        already, return that request's outcome (same payload and user) or raise
        ``RequestReused``.

        Call it before any other check of the request: a repeat must get its first delivery's
        outcome, not a refusal that the first delivery caused (the version it moved on). The
        caller's checks that fail after it roll the row back with the transaction.
        """
        digest = payload_digest(request.payload)
        statement = insert_for(session, _requests).values(
            interaction_id=request.request_id,
            adventure_id=adventure_id,
            user_id=request.user_id,
            payload_digest=digest,
            payload=request.payload,
            seen_version=request.version,
            from_button=request.from_button,
            status=QUEUED,
            created_at=utcnow(),
        )
        # On PostgreSQL a concurrent first delivery's uncommitted row makes this wait for that
        # transaction, then conflict (it committed) or insert (it rolled back).
        inserted = await session.scalar(
            statement.on_conflict_do_nothing(index_elements=[_requests.c.interaction_id]).returning(
                _requests.c.interaction_id
            )
        )
        if inserted is not None:
            return None
        stored = (
            await session.execute(
                select(
                    _requests.c.payload_digest,
                    _requests.c.user_id,
                    _requests.c.status,
                    _requests.c.result,
                ).where(_requests.c.interaction_id == request.request_id)
            )
        ).one()
        if stored.payload_digest != digest or stored.user_id != request.user_id:
            raise RequestReused()
        result = stored.result or {}
        return AlreadyHandled(
            request.request_id,
            stored.status,
            version=result.get("version"),
            node_id=result.get("node"),
            error=result.get("error", ""),
        )

    async def asked_of(self, request_id: int) -> tuple[dict[str, Any], int | None] | None:
        """What a stored request asked for, and who asked (None: their data went), to play it
        again; None when no such request is kept."""
        async with self.db.session() as session:
            row = (
                await session.execute(
                    select(_requests.c.payload, _requests.c.user_id).where(
                        _requests.c.interaction_id == request_id
                    )
                )
            ).first()
        return None if row is None or not row.payload else (row.payload, row.user_id)

    @staticmethod
    async def start(session: AsyncSession, request_id: int) -> bool:
        """Mark the request running, in the caller's transaction (the one that claims the turn's
        lease); False if its record is gone (it went with its player's data:
        ``engine.people.profiles``), and then it must not run."""
        started = await rows_changed(
            session,
            update(_requests)
            .where(_requests.c.interaction_id == request_id)
            .values(status=RUNNING),
        )
        return started == 1

    async def fail(self, request_id: int, event: TurnFailed, *, status: str = FAILED) -> None:
        """Store that the request ended without a turn (``failed`` unless ``status`` says
        else), in a transaction of its own; ``failed`` does it in the caller's."""
        async with self.db.transaction() as session:
            await self.failed(session, request_id, event, status=status)

    @staticmethod
    async def failed(
        session: AsyncSession, request_id: int, event: TurnFailed, *, status: str = FAILED
    ) -> None:
        """Store that the request ended without a turn, in the caller's transaction (the one
        that releases the turn's lease). One that played is recorded by its turn's own
        transaction (``stored``)."""
        await session.execute(
            update(_requests)
            .where(_requests.c.interaction_id == request_id)
            .values(status=status, result={"error": event.error.message})
        )

    @staticmethod
    async def stored(session: AsyncSession, request_id: int, result: TurnResult) -> None:
        """Mark a running request done with its turn's result, in the transaction that stores
        the turn, so the two commit together: a process killed after that commit leaves no
        stored turn whose request says "running"."""
        await session.execute(
            update(_requests)
            .where(_requests.c.interaction_id == request_id, _requests.c.status == RUNNING)
            .values(
                status=DONE, result={"version": result.version, "node": result.narrator_node_id}
            )
        )

    @staticmethod
    async def take_for_retry(session: AsyncSession, request_id: int) -> bool:
        """Mark a request never played as played again, in the caller's transaction; False if
        it was played, or taken by another Retry press already. The UPDATE decides: on
        PostgreSQL a second press's waits for the first's transaction, then finds the status
        changed."""
        taken = await session.scalar(
            update(_requests)
            .where(
                _requests.c.interaction_id == request_id,
                _requests.c.status.in_(NEVER_PLAYED),
            )
            .values(status=RETRIED)
            .returning(_requests.c.interaction_id)
        )
        return taken is not None

    @staticmethod
    async def button_pressed(
        session: AsyncSession, adventure_id: int, version: int, *, besides: int
    ) -> bool:
        """Whether a button drawn for ``version`` was already pressed (a double click) by a
        request other than ``besides``: a button acts once, even while its first press is
        still being written."""
        taken = await session.scalar(
            select(_requests.c.interaction_id)
            .where(
                _requests.c.adventure_id == adventure_id,
                _requests.c.seen_version == version,
                _requests.c.from_button.is_(True),
                _requests.c.status.in_((QUEUED, RUNNING, DONE)),
                _requests.c.interaction_id != besides,
            )
            .limit(1)
        )
        return taken is not None

    async def cut_off(self, adventure_id: int, *, besides: int = 0) -> TurnInterrupted | None:
        """``interrupted`` in a transaction of its own."""
        async with self.db.transaction() as session:
            return await self.interrupted(session, adventure_id, besides=besides)

    @staticmethod
    async def interrupted(
        session: AsyncSession, adventure_id: int, *, besides: int = 0
    ) -> TurnInterrupted | None:
        """A dead process held this adventure's turn lease: its running request (other than
        ``besides``, the one taking the lease over) was cut off; mark it interrupted, in the
        caller's transaction (the one taking the lease over). None when no request was running:
        the process died before its turn began, or after the turn was stored (which marks its
        request done), and no turn was lost."""
        record = await session.scalar(
            select(RequestRecord)
            .where(
                _requests.c.adventure_id == adventure_id,
                _requests.c.status == RUNNING,
                _requests.c.interaction_id != besides,
            )
            .order_by(_requests.c.created_at.desc())
            .limit(1)
        )
        if record is None:
            return None
        record.status = INTERRUPTED
        # The words the player typed, not the action line: that is written with the name
        # of whoever acted (their character), which the request does not keep.
        text = (record.payload or {}).get("text", "")
        return TurnInterrupted(record.interaction_id, text if isinstance(text, str) else "")
