"""The operator's budget and the rate limits: the one module that decides them.

What is limited, and where it is counted:

* **tokens per UTC day**, per player and per server, on the operator's own model only
  (``ProviderResolver.is_operator_default``): checked in the transaction that records a
  request to play (``engine.turns.intake``), before anything of it is stored; counted from the
  provider's reported usage in the transaction that stores the turn, so a turn that fails
  costs nothing and counting costs no transaction of its own (``token_use`` rows);
* **turns per minute**, per player and per adventure: counted over the requests recorded in
  the last minute (``request_records``), in the same transaction. The player's row is
  locked first there (``touch_actor``), so one player's requests from several processes
  count each other; an adventure's may overshoot by one per process at worst, which a
  per-minute limit tolerates;
* **story entries per adventure**, in the same transaction (every request to play passes
  there: an action, a continue, a retry, a round's close, which counts against whoever closes
  it; a round's actions before it closes cost no model and are not counted);
* **/script test per minute, imports per day**: one ``limit_events`` row per use, counted and
  written in a transaction of their own (``use``), under the player's row lock;
* **scenarios per library**: counted where a scenario is saved (``check_library``); **cards and
  memories per player**, over the adventures they host, where a player adds one
  (``check_host_room``).

A refusal by a rate limit is a strike: a second one within ``STRIKE_WINDOW`` of the first
makes the player wait ``cooldown`` at least, and each further one doubles it (up to
``cooldown_max``), whatever they try that is rate-limited; every answer says until when
(``limit_cooldowns``, one row per player). Nothing is decided in a process's memory: several
processes on one database see the same counts. The adventure caps per player are
``engine.people.adventure_caps``'s (they guard the start of an adventure, not its turns).

Times in messages are Discord timestamps (``<t:…:R>``), which both front ends render in the
reader's own time zone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import NotAllowed
from engine.people.access.rules import Actor
from engine.people.accounts import lock_users, touch_user
from engine.platform.coordination.leases import as_utc
from engine.platform.events import Usage
from engine.storage.coordination_models import RequestRecord
from engine.storage.database import Database
from engine.storage.dialect import insert_for, locked_read
from engine.storage.limit_models import Cooldown, LimitEvent, TokenUse
from engine.storage.memory_models import Memory
from engine.storage.models import Adventure, AdventureCard, Scenario, StoryNode, utcnow

MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)
#: Refusals closer together than this are "in a row": each doubles the wait.
STRIKE_WINDOW = timedelta(minutes=10)
#: What a player who reached a token cap is told they can do about it.
OWN_MODEL = (
    "To play on now, bring your own model with `/model set` (in a DM with Campfire for your "
    "solo adventures; a server manager can set one for the server): Campfire's caps do not "
    "apply to it."
)

_cooldowns = Cooldown.metadata.tables[Cooldown.__tablename__]
_token_use = TokenUse.metadata.tables[TokenUse.__tablename__]


class Kind(StrEnum):
    """What a ``limit_events`` row counts."""

    #: /script test and /script upload (each runs QuickJS in the shared workers).
    SCRIPT_TEST = "script_test"
    IMPORT = "import"
    #: /model set and /model test: each reaches an endpoint a player chose.
    MODEL_CHECK = "model_check"
    #: /card generate: a call of the adventure's model.
    CARD_WRITE = "card_write"


@dataclass(frozen=True, slots=True)
class LimitRules:
    """The operator's limits (``CAMPFIRE_*`` settings, bot/config.py)."""

    #: Tokens per UTC day on the operator's model (0: no cap).
    user_tokens_per_day: int = 0
    server_tokens_per_day: int = 0
    #: The most one turn on the operator's model may cost: its whole window (the prompt and
    #: the reply fit in the context budget). Reserved against the caps as a turn is admitted,
    #: settled to what it cost when its call ends (``settle``).
    turn_reserve_tokens: int = 4096
    turns_per_user_per_minute: int = 12
    turns_per_adventure_per_minute: int = 20
    script_tests_per_minute: int = 6
    model_checks_per_minute: int = 4
    card_writes_per_minute: int = 3
    imports_per_day: int = 30
    scenarios_per_library: int = 200
    actions_per_adventure: int = 20_000
    cooldown_seconds: int = 30
    cooldown_max_seconds: int = 900
    #: Story cards and memories players add (/card add, /memory add) to the adventures one
    #: player hosts, all of them together (each adventure has its own caps besides).
    cards_per_user: int = 10_000
    memories_per_user: int = 10_000


def _requests_since(whose: Any, since: datetime) -> Any:
    return (
        select(func.count())
        .select_from(RequestRecord)
        .where(whose, col(RequestRecord.created_at) >= since)
        .scalar_subquery()
    )


def discord_time(moment: datetime, style: str = "R") -> str:
    """``moment`` as a Discord timestamp, "in 5 minutes" in the reader's own words."""
    return f"<t:{math.ceil(moment.timestamp())}:{style}>"


def next_midnight(now: datetime) -> datetime:
    """When the day's token budget starts again: the next midnight, UTC."""
    return datetime.combine(as_utc(now).date() + DAY, time(), tzinfo=UTC)


class RateLimited(NotAllowed):
    """Too much too fast: tried again after ``retry_at``, it is played. Each one is a strike
    (``UsageLimits.strike``)."""

    retryable = False

    def __init__(self, reason: str, retry_at: datetime, *, strikes: int = 1) -> None:
        self.reason = reason
        self.retry_at = retry_at
        self.strikes = strikes
        message = f"{reason} Please try again {discord_time(retry_at)}."
        if strikes > 1:
            message += (
                f" You have reached a limit {strikes} times in a row, so the wait is longer "
                "each time; it is back to normal once you have waited it out."
            )
        super().__init__(message)


class TokenCapReached(NotAllowed):
    """A player or a server has used the day's tokens on the operator's model."""

    def __init__(self, reason: str, resets_at: datetime) -> None:
        self.resets_at = resets_at
        super().__init__(
            f"{reason} It starts again at midnight UTC, {discord_time(resets_at)}. {OWN_MODEL}"
        )


class LimitReached(NotAllowed):
    """A count cap (story entries, scenarios in a library) is reached; no waiting helps."""


@dataclass(frozen=True, slots=True)
class Charge:
    """Who a turn on the operator's model is counted against, and the tokens reserved for it
    against their caps as it was admitted."""

    #: None: work of an adventure without a host (counted against its server alone).
    user_id: int | None
    server_id: int | None
    reserved: int = 0


@dataclass(frozen=True, slots=True)
class UsageToday:
    """What /usage shows: today's tokens on the operator's model, and the caps (0: none)."""

    user_tokens: int
    user_turns: int
    user_cap: int
    #: None outside a server.
    server_tokens: int | None
    server_turns: int | None
    server_cap: int
    resets_at: datetime


class UsageLimits:
    def __init__(
        self,
        db: Database,
        rules: LimitRules,
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.db = db
        self.rules = rules
        #: Now, for every window and day here (tests move it instead of sleeping).
        self.clock = clock

    # --- turns -------------------------------------------------------------------------------

    async def check_turn(
        self,
        session: AsyncSession,
        actor: Actor,
        adventure: Adventure,
        *,
        on_operator_model: bool,
    ) -> Charge | None:
        """In the transaction that records a request to play, after the request's row and the
        player's: raise the refusal when a limit stops it; else whom its tokens are counted
        against (None: not the operator's model, nothing counted).

        Every count is read in one statement: this runs on every turn's path."""
        assert adventure.id is not None
        now = self.clock()
        rules, user_id, server_id = self.rules, actor.user_id, adventure.server_id
        by_user = col(RequestRecord.user_id) == user_id
        by_adventure = col(RequestRecord.adventure_id) == adventure.id
        row = (
            await session.execute(
                select(
                    select(_cooldowns.c.until)
                    .where(_cooldowns.c.user_id == user_id)
                    .scalar_subquery(),
                    _requests_since(by_user, now - MINUTE),
                    _requests_since(by_adventure, now - MINUTE),
                    select(func.count())
                    .select_from(StoryNode)
                    .where(col(StoryNode.adventure_id) == adventure.id)
                    .scalar_subquery(),
                )
            )
        ).one()
        until, by_user_count, by_adventure_count, entries = row
        if until is not None and as_utc(until) > now:
            raise RateLimited(
                "You are slowed down after reaching a limit several times.", as_utc(until)
            )
        if by_user_count > rules.turns_per_user_per_minute:
            raise await self._rate_refusal(
                session,
                by_user,
                rules.turns_per_user_per_minute,
                now,
                f"You are playing fast: at most {rules.turns_per_user_per_minute} turns a minute "
                "each.",
            )
        if by_adventure_count > rules.turns_per_adventure_per_minute:
            raise await self._rate_refusal(
                session,
                by_adventure,
                rules.turns_per_adventure_per_minute,
                now,
                "This adventure is moving fast: at most "
                f"{rules.turns_per_adventure_per_minute} turns a minute here.",
            )
        if entries >= rules.actions_per_adventure:
            raise LimitReached(
                f"This adventure holds {entries:,} story entries, as many as one adventure "
                "may. Export it (`/adventure export`) and start a new one to go on."
            )
        if not on_operator_model:
            return None
        charge = Charge(user_id, server_id, reserved=rules.turn_reserve_tokens)
        # Reserved now, in the transaction that admits the turn, and the total read back from
        # the same statement: two turns admitted at once (other processes included) each see
        # the other's reservation (the upsert's row lock orders them), so together they cannot
        # pass a cap that each alone would not. A refusal rolls its reservation back.
        totals = await self._add(session, charge, charge.reserved, turns=0)
        resets = next_midnight(as_utc(now))
        for scope, cap, whose in (
            ("user", rules.user_tokens_per_day, "You have"),
            ("server", rules.server_tokens_per_day, "This server has"),
        ):
            total = totals.get(scope)
            if not cap or total is None or total <= cap:
                continue
            used = total - charge.reserved
            if used >= cap:
                raise TokenCapReached(
                    f"{whose} used today's {cap:,} tokens on Campfire's model.", resets
                )
            raise TokenCapReached(
                f"{whose} used {used:,} of today's {cap:,} tokens on Campfire's model, too few "
                f"for another turn (one may take up to {charge.reserved:,}).",
                resets,
            )
        return charge

    async def settle_in(
        self, session: AsyncSession, charge: Charge, usage: Usage | None, *, played: bool
    ) -> None:
        """The turn's reservation settled to what its model call cost, for its player and
        server (one statement), in ``session``: the transaction that stores the turn
        (``played``: counted as a turn too) or records its failure. ``usage``: the provider's
        count, or Campfire's own where it gave none; None when the model was never asked, or
        refused at once, which costs nothing."""
        spent = 0 if usage is None else usage.prompt_tokens + usage.completion_tokens
        await self._add(session, charge, spent - charge.reserved, turns=1 if played else 0)

    async def settle(self, charge: Charge, usage: Usage | None) -> None:
        """``settle_in`` a transaction of its own, for a turn that failed or never ran."""
        async with self.db.transaction() as session:
            await self.settle_in(session, charge, usage, played=False)

    async def _add(
        self, session: AsyncSession, charge: Charge, tokens: int, *, turns: int
    ) -> dict[str, int]:
        """``tokens`` (and ``turns``) added to today's use of the charge's player and server;
        their totals after, by scope."""
        today = as_utc(self.clock()).date()
        rows = []
        if charge.user_id is not None:
            rows.append({"scope": "user", "subject_id": charge.user_id})
        if charge.server_id is not None:
            rows.append({"scope": "server", "subject_id": charge.server_id})
        if not rows:
            return {}
        insert = insert_for(session, _token_use).values(
            [row | {"day": today, "tokens": tokens, "turns": turns} for row in rows]
        )
        result = await session.execute(
            insert.on_conflict_do_update(
                index_elements=["scope", "subject_id", "day"],
                set_={
                    "tokens": _token_use.c.tokens + insert.excluded.tokens,
                    "turns": _token_use.c.turns + insert.excluded.turns,
                },
            ).returning(_token_use.c.scope, _token_use.c.tokens)
        )
        return {scope: int(tokens) for scope, tokens in result.all()}

    async def background_allowed(self, charge: Charge) -> bool:
        """Whether work the players did not ask for may spend today: neither the host nor the
        server has used the day's tokens (``engine.story.background_spend``)."""
        today = as_utc(self.clock()).date()
        async with self.db.session() as session:
            for scope, subject, cap in (
                ("user", charge.user_id, self.rules.user_tokens_per_day),
                ("server", charge.server_id, self.rules.server_tokens_per_day),
            ):
                if (
                    subject is not None
                    and cap
                    and (await self._used(session, scope, subject, today))[0] >= cap
                ):
                    return False
        return True

    async def count_background(self, charge: Charge, usage: Usage) -> None:
        """What a call of background work cost, added to the day's use (not a turn)."""
        async with self.db.transaction() as session:
            await self._add(session, charge, usage.prompt_tokens + usage.completion_tokens, turns=0)

    async def _used(
        self, session: AsyncSession, scope: str, subject_id: int, day: date
    ) -> tuple[int, int]:
        row = (
            await session.execute(
                select(_token_use.c.tokens, _token_use.c.turns).where(
                    _token_use.c.scope == scope,
                    _token_use.c.subject_id == subject_id,
                    _token_use.c.day == day,
                )
            )
        ).first()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def usage(self, actor: Actor) -> UsageToday:
        """Today's use of the operator's model by ``actor`` and, in a server, by the server."""
        now = as_utc(self.clock())
        today = now.date()
        async with self.db.session() as session:
            user_tokens, user_turns = await self._used(session, "user", actor.user_id, today)
            server: tuple[int | None, int | None] = (None, None)
            if actor.server_id is not None:
                server = await self._used(session, "server", actor.server_id, today)
        return UsageToday(
            user_tokens,
            user_turns,
            self.rules.user_tokens_per_day,
            server[0],
            server[1],
            self.rules.server_tokens_per_day,
            next_midnight(now),
        )

    async def forget_old_days(self) -> int:
        """Drop the days before yesterday (the caps read today only); how many rows went."""
        before = as_utc(self.clock()).date() - DAY
        async with self.db.transaction() as session:
            result = await session.execute(delete(_token_use).where(_token_use.c.day < before))
        return int(getattr(result, "rowcount", 0) or 0)

    # --- rates -------------------------------------------------------------------------------

    async def _rate_refusal(
        self, session: AsyncSession, whose, limit: int, now: datetime, reason: str
    ) -> RateLimited:
        """The refusal of a request past ``limit`` in the last minute (this one included, as
        the newest): it says when the request ``limit`` places before it leaves the minute,
        so that the request tried again then is the ``limit``-th."""
        recent = col(RequestRecord.created_at) >= now - MINUTE
        times = list(
            await session.scalars(
                select(col(RequestRecord.created_at))
                .where(whose, recent)
                .order_by(col(RequestRecord.created_at).desc())
                .limit(limit + 1)
            )
        )
        return RateLimited(reason, as_utc(times[-1]) + MINUTE if times else now + MINUTE)

    async def use(self, kind: Kind, actor: Actor, *, asked: bool = True) -> None:
        """Count one use of ``kind`` by ``actor``, in a transaction of its own; or refuse it
        (a strike) when the player has used it as often as the window allows. ``asked``
        False: work done for the player that they did not ask for just now (a card proposed
        every few turns): it is no contact of theirs, and a refusal is no strike."""
        try:
            async with self.db.transaction() as session:
                # The player's row lock queues their uses from several processes.
                if asked:
                    await touch_user(session, actor.user_id, actor.user_name)
                else:
                    await lock_users(session, [actor.user_id])
                now = self.clock()
                await self._check_cooldown(session, actor.user_id, now)
                limit, window, reason = self._event_rule(kind)
                mine = (col(LimitEvent.user_id) == actor.user_id, col(LimitEvent.kind) == kind)
                await session.execute(
                    delete(LimitEvent).where(*mine, col(LimitEvent.at) < now - window)
                )
                times = list(
                    await session.scalars(
                        select(col(LimitEvent.at))
                        .where(*mine, col(LimitEvent.at) >= now - window)
                        .order_by(col(LimitEvent.at))
                    )
                )
                if len(times) >= limit:
                    raise RateLimited(reason, as_utc(times[len(times) - limit]) + window)
                session.add(LimitEvent(kind=str(kind), user_id=actor.user_id, at=now))
        except RateLimited as refusal:
            if not asked:
                raise
            raise await self.strike(actor.user_id, refusal) from None

    def _event_rule(self, kind: Kind) -> tuple[int, timedelta, str]:
        rules = self.rules
        if kind is Kind.SCRIPT_TEST:
            limit = rules.script_tests_per_minute
            times = "once" if limit == 1 else f"{limit} times"
            return limit, MINUTE, f"You can test or upload scripts {times} a minute."
        if kind is Kind.MODEL_CHECK:
            limit = rules.model_checks_per_minute
            times = "once" if limit == 1 else f"{limit} times"
            return limit, MINUTE, f"You can set or test a model {times} a minute."
        if kind is Kind.CARD_WRITE:
            limit = rules.card_writes_per_minute
            times = "one card" if limit == 1 else f"{limit} cards"
            return limit, MINUTE, f"You can have the model write {times} a minute."
        limit = rules.imports_per_day
        files = "one file" if limit == 1 else f"{limit} files"
        return limit, DAY, f"You can import {files} a day."

    # --- cool-down ---------------------------------------------------------------------------

    async def _check_cooldown(self, session: AsyncSession, user_id: int, now: datetime) -> None:
        until = await session.scalar(
            select(_cooldowns.c.until).where(_cooldowns.c.user_id == user_id)
        )
        if until is not None and as_utc(until) > now:
            raise RateLimited(
                "You are slowed down after reaching a limit several times.", as_utc(until)
            )

    async def strike(self, user_id: int, refusal: RateLimited) -> RateLimited:
        """Record a refusal by a rate limit, in a transaction of its own; the refusal to give,
        its wait lengthened when others came shortly before it."""
        now = self.clock()
        async with self.db.transaction() as session:
            insert = insert_for(session, _cooldowns).values(
                user_id=user_id, strikes=0, last_strike_at=now, until=now
            )
            await session.execute(insert.on_conflict_do_nothing(index_elements=["user_id"]))
            row = (
                await session.execute(
                    locked_read(
                        session,
                        _cooldowns,
                        (_cooldowns.c.strikes, _cooldowns.c.last_strike_at, _cooldowns.c.until),
                        _cooldowns.c.user_id == user_id,
                    )
                )
            ).one()
            in_a_row = row.strikes > 0 and as_utc(row.last_strike_at) >= now - STRIKE_WINDOW
            strikes = row.strikes + 1 if in_a_row else 1
            until = as_utc(refusal.retry_at)
            if strikes > 1:
                penalty = min(
                    self.rules.cooldown_max_seconds,
                    self.rules.cooldown_seconds * 2 ** (strikes - 2),
                )
                until = max(until, now + timedelta(seconds=penalty), as_utc(row.until))
            await session.execute(
                update(_cooldowns)
                .where(_cooldowns.c.user_id == user_id)
                .values(strikes=strikes, last_strike_at=now, until=until)
            )
        return RateLimited(refusal.reason, until, strikes=strikes)

    # --- what players add to adventures ------------------------------------------------------

    async def check_host_room(self, session: AsyncSession, adventure: Adventure, kind: str) -> None:
        """In the transaction that adds a story card (``kind`` "cards") or a memory
        ("memories") to ``adventure``: refuse when the adventures its host runs (ended ones
        too: they keep their rows) hold as many as one player's may. Forgotten memories do
        not count (the bank forgets on its own past each adventure's capacity)."""
        held = await self._host_held(session, adventure, kind)
        cap, what, room = self._host_rule(kind)
        if held is not None and held >= cap:
            raise LimitReached(
                f"The adventures this adventure's host runs hold {held:,} {what}, as many as "
                f"one player's may. Make room with {room} (here or in another of them)."
            )

    async def host_room(self, session: AsyncSession, adventure: Adventure, kind: str) -> int | None:
        """How many more story cards (``kind`` "cards") or memories the adventures of
        ``adventure``'s host may hold (0 when full); None when it has no host to count for."""
        held = await self._host_held(session, adventure, kind)
        return None if held is None else max(0, self._host_rule(kind)[0] - held)

    async def _host_held(
        self, session: AsyncSession, adventure: Adventure, kind: str
    ) -> int | None:
        if adventure.host_id is None:
            return None
        hosted = col(Adventure.host_id) == adventure.host_id
        if kind == "cards":
            count = (
                select(func.count())
                .select_from(AdventureCard)
                .join(Adventure, col(Adventure.id) == col(AdventureCard.adventure_id))
                .where(hosted)
            )
        else:
            count = (
                select(func.count())
                .select_from(Memory)
                .join(Adventure, col(Adventure.id) == col(Memory.adventure_id))
                .where(hosted, col(Memory.forgotten).is_(False))
            )
        return await session.scalar(count) or 0

    def _host_rule(self, kind: str) -> tuple[int, str, str]:
        """The cap on ``kind`` per host, what it counts, and the command that makes room."""
        if kind == "cards":
            return self.rules.cards_per_user, "story cards", "`/card remove`"
        return self.rules.memories_per_user, "memories", "`/memory forget`"

    # --- libraries -----------------------------------------------------------------------------

    async def check_library(
        self, session: AsyncSession, server_id: int | None, owner_id: int | None, *, adding: int = 1
    ) -> None:
        """In the transaction that saves scenarios (``adding`` of them, a file may hold
        several): refuse when their library would hold more than it may."""
        where = (
            col(Scenario.server_id) == server_id
            if server_id is not None
            else col(Scenario.owner_id) == owner_id
        )
        held = (
            await session.scalar(
                select(func.count())
                .select_from(Scenario)
                .where(where, col(Scenario.parent_id).is_(None))
            )
            or 0
        )
        cap = self.rules.scenarios_per_library
        if held + adding <= cap:
            return
        whose = "This server's library" if server_id is not None else "Your library"
        if held >= cap:
            said = f"{whose} holds {held:,} scenarios, as many as one library may."
        else:
            said = (
                f"{whose} holds {held:,} scenarios and this file brings {adding:,}: one library "
                f"holds {cap:,} at most."
            )
        raise LimitReached(f"{said} Delete one (`/scenario delete`) to make room.")
