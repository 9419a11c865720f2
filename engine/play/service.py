"""What a front end calls to play: start an adventure in a place, act in it, list scenarios.

Each front-end command is one call here. Turns of one adventure run one at a time: in this
process through the adventure queue (so actions that arrive together are played in order and
told their place in line), across processes through the turn lease. Every action is recorded
as a request before it runs (``engine.turns.requests``), so a turn that fails, or
dies with its process, can be retried, and a request delivered twice is played once. This module
decides what a request plays and who may; ``engine.turns.intake`` carries it through.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import replace

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import (
    CampfireError,
    InvalidInput,
    NotFound,
    StoryMovedOn,
)
from engine.library.scenarios.lookup import resolve_scenario, visible_scenarios
from engine.library.scenarios.start import (
    openings_offered,
    options_offered,
    scenario_questions_of,
    scenario_script_names,
    start_adventure,
)
from engine.people.access.checks import (
    PLAYED_AGAIN,
    check_may_act,
    check_may_close_round,
    check_may_press,
    check_may_retry,
    check_may_retry_request,
    check_may_rewrite_for,
    check_may_start_with_scripts,
)
from engine.people.access.rules import Actor, active_adventure, adventure_here
from engine.people.accounts import touch_actor
from engine.people.adventure_caps import AdventureCaps, check_may_begin
from engine.people.content import (
    ContentPolicy,
    banned_words,
    check_scenario_here,
    note_place,
    rating_for,
)
from engine.people.limits import UsageLimits
from engine.people.party import back_on_act
from engine.platform.coordination.leases import TurnLeases
from engine.platform.queue import AdventureQueue
from engine.play.answers import AdventureRef, StartedAdventure, StartPlan, ThreadAdventure
from engine.storage.coordination_models import RequestRecord
from engine.storage.database import Database
from engine.storage.models import ActionType, Adventure, StoryNode, TurnMode, User, utcnow
from engine.story.actions import PlayerAction, format_action
from engine.story.characters import acting_as
from engine.story.line.read import line_tail
from engine.story.place_hints import PlaceHints
from engine.story.rounds import (
    NOTHING_TO_CLOSE,
    ROUND_CLOSED,
    RoundState,
    due_for_timeout,
    put_back,
    round_state,
    submit_to_round,
    take_round,
)
from engine.turns.engine import TurnEngine
from engine.turns.events import RoundSubmitted, TurnEvent, TurnFailed, TurnInterrupted
from engine.turns.intake import Asked, RequestCheck, Turn, TurnIntake
from engine.turns.moderation import Moderator
from engine.turns.plan import Fence
from engine.turns.requests import RETRY_PAYLOAD, RequestLog

log = logging.getLogger(__name__)


#: How many of a channel's thread adventures ``adventures_from`` names at most.
THREAD_ADVENTURES_SHOWN = 5


#: Actions written into the story with their player's name (a Retry plays them as theirs).
WRITTEN = frozenset({ActionType.DO, ActionType.SAY, ActionType.STORY})


class _PlaysInRounds(Exception):
    """An action for an adventure that plays in rounds: ``act`` takes it into the round."""


class PlayService:
    def __init__(
        self,
        db: Database,
        turns: TurnEngine,
        leases: TurnLeases,
        queue: AdventureQueue,
        *,
        caps: AdventureCaps | None = None,
        limits: UsageLimits | None = None,
        round_timeout_s: float = 120.0,
        content: ContentPolicy | None = None,
        moderator: Moderator | None = None,
    ) -> None:
        self.db = db
        #: The operator's moderation check of actions (checks nothing when unset).
        self.moderator = moderator or Moderator()
        #: The operator's content rules: a scenario's rating at start, banned words in actions.
        self.content = content or ContentPolicy()
        #: How long a round in ``rounds`` mode waits for its late players (``close_late``).
        self.round_timeout_s = round_timeout_s
        self.turns = turns
        self.leases = leases
        self.queue = queue
        #: The operator's caps on adventures per player (None: none, for tools and tests).
        self.caps = caps
        self.requests = RequestLog(db)
        #: What this process last saw running in each place (a hint: ``engine.story.place_hints``).
        self.places = PlaceHints()
        #: Carries each request to play through: recorded, queued, its events forwarded.
        #: The rate limits and the operator's budget, asked by every request to play (None:
        #: none, for tools and tests).
        self.limits = limits
        self.intake = TurnIntake(
            db, leases, queue, self.requests, self.places, limits=limits, providers=turns.providers
        )

    # --- scenarios and adventures -------------------------------------------------------------

    async def scenario_choices(
        self, actor: Actor, typed: str, *, limit: int = 25
    ) -> list[tuple[str, str]]:
        """(label, value) pairs for autocomplete: titles containing what was typed."""
        async with self.db.session() as session:
            scenarios = await visible_scenarios(session, actor.server_id, actor.user_id)
        typed = typed.casefold().strip()
        return [
            (f"{s.icon} {s.title}".strip()[:100], str(s.id))
            for s in scenarios
            if typed in s.title.casefold()
        ][:limit]

    async def start_plan(self, actor: Actor, query: str | None, place: int | None) -> StartPlan:
        """The scenario ``query`` names, with the options and questions it needs at /start.

        ``place`` is where the adventure will run (None: a thread not opened yet). Whatever
        would refuse the start there (the adventure running there, the caps, the scenario's
        scripts and rating) refuses it now, before a question is asked or a thread opened; ``start``
        checks again as it writes."""
        async with self.db.session() as session:
            scenario = await resolve_scenario(
                session, query, server_id=actor.server_id, user_id=actor.user_id
            )
            running = await check_may_begin(session, actor, place, self.caps)
            await check_scenario_here(session, scenario.content_rating, actor, self.content)
            assert scenario.id is not None
            check_may_start_with_scripts(
                scenario, actor, await scenario_script_names(session, scenario.id)
            )
            group = actor.server_id is not None
            return StartPlan(
                scenario.id,
                scenario.title,
                scenario.icon,
                scenario.prompt,
                await options_offered(session, scenario.id),
                # All of them, five to a form (a Discord form holds five inputs).
                await scenario_questions_of(session, scenario, group=group),
                replaces=running.title if running is not None else None,
                openings=await openings_offered(session, scenario, group=group),
            )

    async def start(
        self,
        actor: Actor,
        channel_id: int,
        query: str | None,
        answers: dict[str, str] | None = None,
        *,
        opened_from: int | None = None,
        opening: int = 0,
    ) -> StartedAdventure:
        """Start an adventure in a channel, thread or DM; one already running there ends, if
        ``actor`` may end it (``check_may_begin``, with the caps).

        ``answers`` fill the scenario's ``${placeholders}``; ``opened_from`` is the channel a
        thread was opened from for it (``adventures_from`` finds it there)."""
        async with self.db.transaction() as session:
            # First: the user's row lock queues this player's starts (see adventure_caps).
            await touch_actor(session, actor)
            scenario = await resolve_scenario(
                session, query, server_id=actor.server_id, user_id=actor.user_id
            )
            running = await check_may_begin(session, actor, channel_id, self.caps)
            await check_scenario_here(session, scenario.content_rating, actor, self.content)
            assert scenario.id is not None
            check_may_start_with_scripts(
                scenario, actor, await scenario_script_names(session, scenario.id)
            )
            if running is not None:
                running.ended_at = utcnow()
            adventure = await start_adventure(
                session,
                scenario.id,
                channel_id=channel_id,
                server_id=actor.server_id,
                host_id=actor.user_id,
                answers=answers,
                opening=opening,
            )
            adventure.parent_channel_id = opened_from
            note_place(adventure, actor)
            assert adventure.id is not None
            self.places.seen(channel_id, adventure.id, adventure.version)
            return StartedAdventure(
                adventure.id,
                adventure.title,
                adventure.icon,
                adventure.prompt,
                adventure.version,
                adventure.head_node_id,
            )

    async def check_list(self, channel_id: int, drawn_for: int | None = None) -> int:
        """The adventure running here, whose lists a list command shows (anyone may read
        them); raises the reason when there is none, or when it is not ``drawn_for``, the one
        a pager's button was drawn for (an ended one's, or another place's)."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            check_may_press(adventure, drawn_for)
            assert adventure.id is not None
            return adventure.id

    async def adventure_in(self, channel_id: int) -> AdventureRef | None:
        async with self.db.session() as session:
            adventure = await active_adventure(session, channel_id)
            if adventure is None:
                self.places.seen(channel_id, None)
                return None
            assert adventure.id is not None
            self.places.seen(channel_id, adventure.id, adventure.version)
            return AdventureRef(adventure.id, adventure.title, adventure.version)

    async def adventures_from(self, channel_id: int) -> list[ThreadAdventure]:
        """The adventures running in threads opened from this channel, newest first (at most
        ``THREAD_ADVENTURES_SHOWN``): what an action or /start there points the player to,
        since a thread drops out of the channel's list once archived."""
        async with self.db.session() as session:
            adventures = await session.scalars(
                select(Adventure)
                .where(
                    col(Adventure.parent_channel_id) == channel_id,
                    col(Adventure.ended_at).is_(None),
                )
                .order_by(col(Adventure.id).desc())
                .limit(THREAD_ADVENTURES_SHOWN)
            )
            return [
                ThreadAdventure(a.id, a.title, a.icon, a.channel_id)
                for a in adventures
                if a.id is not None and a.channel_id is not None
            ]

    async def recent_story(self, channel_id: int, entries: int = 4) -> list[str]:
        """The newest entries of the story running in a channel (for a returning reader)."""
        async with self.db.session() as session:
            adventure = await active_adventure(session, channel_id)
            if adventure is None or adventure.head_node_id is None:
                return []
            nodes = await line_tail(session, adventure.head_node_id, entries)
        return [node.text for node in nodes if node.text.strip()]

    # --- turns --------------------------------------------------------------------------------

    async def act(
        self,
        actor: Actor,
        channel_id: int,
        action: PlayerAction,
        *,
        request_id: int,
        seen_version: int | None = None,
        drawn_for: int | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Play an action in the adventure running in ``channel_id``.

        A button's press names the story it was drawn for: ``drawn_for`` (the adventure) and
        ``seen_version``; it acts on nothing else.

        Yields ``Queued`` when other turns are ahead, then the turn's events. Ends with
        ``TurnDone`` or ``TurnFailed``; or is only ``AlreadyHandled`` when ``request_id`` was
        played before (a repeated delivery of the same interaction).
        """
        # Free play unless the adventure, as read to record the request, plays in rounds.
        played = self._play(actor, channel_id, action, request_id, seen_version, drawn_for)
        try:
            async with aclosing(played) as events:
                async for event in events:
                    yield event
        except _PlaysInRounds:
            submitted = self._submit(actor, channel_id, action, request_id, drawn_for)
            async with aclosing(submitted) as events:
                async for event in events:
                    yield event

    async def retry_turn(
        self,
        actor: Actor,
        channel_id: int,
        *,
        request_id: int,
        seen_version: int | None = None,
        drawn_for: int | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Write the newest narrator turn again as another take (``TurnEngine.retry``).

        Who may: the author of the turn's action, the host, server managers. Queued like any
        turn; a button press acts once per story version, on its own adventure only.
        """
        retaken = self._retake(actor, channel_id, request_id, seen_version, drawn_for)
        async with aclosing(retaken) as events:
            async for event in events:
                yield event

    async def retry_request(
        self, actor: Actor, channel_id: int, request_id: int, *, new_request_id: int
    ) -> AsyncGenerator[TurnEvent, None]:
        """Play again the action of a request of the adventure here that failed, was refused
        or was interrupted (``check_may_retry_request``, asked in the new request's own
        transaction), once; a request of another adventure, or one played already, is
        refused."""
        asked = await self.requests.asked_of(request_id)
        if asked is None:
            yield TurnFailed(NotFound("That action is no longer available to retry."))
            return
        payload, asker = asked
        plays_as = actor
        if asker is not None and asker != actor.user_id and payload.get("type") in WRITTEN:
            # Someone else's action plays again as theirs (their character, their turn), and
            # only for one who may rewrite their turns; their own rights to act still hold.
            plays_as = Actor(
                asker,
                await self._user_name(asker),
                server_id=actor.server_id,
                server_name=actor.server_name,
            )

        async def unplayed(session: AsyncSession, adventure: Adventure) -> None:
            check_may_retry_request(adventure, await session.get(RequestRecord, request_id))
            if plays_as is not actor:
                await check_may_rewrite_for(session, adventure, asker, actor)
            # A Retry button plays its action once: a second press (a double click) that
            # raced this one past the check above is refused here.
            if not await self.requests.take_for_retry(session, request_id):
                raise StoryMovedOn(PLAYED_AGAIN)

        if payload.get("type") == "round":
            # A round whose narration failed: its actions went back to wait; close it again.
            replayed = self._close(actor, channel_id, new_request_id, None, unplayed)
        elif payload == RETRY_PAYLOAD:
            # A retry of a turn that failed: write the newest turn again once more.
            replayed = self._retake(actor, channel_id, new_request_id, None, None, unplayed)
        else:
            action = PlayerAction(
                ActionType(payload["type"]), payload.get("text", ""), plays_as.user_id
            )
            replayed = self._play(
                plays_as, channel_id, action, new_request_id, None, None, unplayed, to_round=False
            )
        async with aclosing(replayed) as events:
            async for event in events:
                yield event

    async def _user_name(self, user_id: int) -> str:
        async with self.db.session() as session:
            return await session.scalar(select(col(User.name)).where(col(User.id) == user_id)) or ""

    async def _play(
        self,
        actor: Actor,
        channel_id: int,
        action: PlayerAction,
        request_id: int,
        seen_version: int | None,
        drawn_for: int | None,
        check: RequestCheck | None = None,
        *,
        to_round: bool = True,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Play ``action`` as a turn. ``to_round``: an adventure that plays in rounds takes it
        into its round instead (``act``); a Retry of a failed action plays it all the same."""
        try:
            format_action(action, max_chars=self.turns.max_action_chars)  # fail fast
        except CampfireError as error:
            yield TurnFailed(error)
            return
        payload = {"type": str(action.type), "text": action.text}

        async def prepare(session: AsyncSession, adventure: Adventure) -> Turn:
            if to_round and adventure.turn_mode != TurnMode.FREE:
                # Decided on the adventure read to record the request: the record rolls back,
                # and the action goes to the round instead (``act``).
                raise _PlaysInRounds()
            # The host's lock, mutes and closed party, asked before anything of the request is
            # kept; a player who had left the party is back in by acting.
            await check_may_act(session, adventure, actor)
            (await banned_words(session, adventure, self.content)).check_action(action.text)
            await back_on_act(session, adventure, actor.user_id)
            if check is not None:
                await check(session, adventure)
            # Who the action is written as, read where it is recorded: a character set later
            # names the next action, not this one waiting in the queue.
            name, pronouns = await acting_as(session, adventure, actor)
            named = replace(action, actor=name, pronouns=pronouns)
            return lambda adventure_id, fence: self.turns.play(adventure_id, named, fence=fence)

        asked = Asked(actor, channel_id, payload, request_id, seen_version, drawn_for)
        entered = self.intake.enter(asked, prepare)
        async with aclosing(entered) as events:
            async for event in events:
                yield event

    async def _moderate(self, actor: Actor, action: PlayerAction) -> None:
        """The operator's moderation check of an action submitted to a round, for the rating
        where it is played, before it is kept (no transaction is held open for the checker's
        answer). A turn's own actions are checked as the turn runs, once recorded, so that a
        check that could not run offers Retry (``TurnEngine.play``)."""
        if not self.moderator or not action.text.strip():
            return
        async with self.db.session() as session:
            here = await rating_for(session, actor, self.content)
        # Nothing is recorded to retry yet: a check that could not run asks to send it again.
        await self.moderator.check_action(action.text, here.rating, recorded=False)

    # --- rounds (engine.story.rounds) -------------------------------------------------------------

    async def round_here(self, channel_id: int) -> RoundState | None:
        """The round open in the adventure here (None: none runs, or it plays free)."""
        async with self.db.session() as session:
            adventure = await active_adventure(session, channel_id)
            if adventure is None or adventure.turn_mode == TurnMode.FREE:
                return None
            return await round_state(session, adventure)

    async def _submit(
        self,
        actor: Actor,
        channel_id: int,
        action: PlayerAction,
        request_id: int,
        drawn_for: int | None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """An action for the round: kept (or replacing the player's), then, when it was the
        last the round waited for, the round closed and narrated under this request."""
        try:
            if action.type is ActionType.CONTINUE:
                raise InvalidInput(
                    "This adventure plays in rounds: the story goes on when the round closes "
                    "(the host's Close), so there is nothing to continue now."
                )
            format_action(action, max_chars=self.turns.max_action_chars)  # fail fast
            await self._moderate(actor, action)
            async with self.db.transaction() as session:
                await touch_actor(session, actor)
                adventure = await adventure_here(session, channel_id, for_update=True)
                check_may_press(adventure, drawn_for)
                await check_may_act(session, adventure, actor)
                (await banned_words(session, adventure, self.content)).check_action(action.text)
                note_place(adventure, actor)
                await back_on_act(session, adventure, actor.user_id)
                name, pronouns = await acting_as(session, adventure, actor)
                named = replace(action, actor=name, pronouns=pronouns)
                replaced = await submit_to_round(session, adventure, named)
                state = await round_state(session, adventure)
        except CampfireError as error:
            yield TurnFailed(error)
            return
        self.places.seen(channel_id, state.adventure_id)
        yield RoundSubmitted(state, replaced)
        if state.complete:
            closed = self._close(actor, channel_id, request_id, None, None)
            async with aclosing(closed) as events:
                async for event in events:
                    yield event

    def close_round(
        self, actor: Actor, channel_id: int, *, request_id: int, drawn_for: int | None = None
    ) -> AsyncGenerator[TurnEvent, None]:
        """The host's Close: the round here ends now and is narrated (whoever has acted)."""

        async def allowed(session: AsyncSession, adventure: Adventure) -> None:
            await check_may_close_round(session, adventure, actor)

        return self._close(actor, channel_id, request_id, drawn_for, allowed)

    def close_late(
        self, actor: Actor, channel_id: int, *, request_id: int
    ) -> AsyncGenerator[TurnEvent, None]:
        """The round's timeout (``rounds`` mode): it closes once it has waited
        ``round_timeout_s`` since its first action; ``actor`` is the one who opened it."""

        async def due(session: AsyncSession, adventure: Adventure) -> None:
            assert adventure.id is not None
            if adventure.turn_mode != TurnMode.ROUNDS or not await due_for_timeout(
                session, adventure.id, self.round_timeout_s
            ):
                raise StoryMovedOn("This round is not due to close yet.")

        return self._close(actor, channel_id, request_id, None, due)

    async def _close(
        self,
        actor: Actor,
        channel_id: int,
        request_id: int,
        drawn_for: int | None,
        check: RequestCheck | None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Close the round here, once (``take_round`` in the request's own transaction: a
        second closer takes nothing and is refused), and narrate its actions as one turn. A
        turn that fails puts them back to wait for the next close."""

        async def prepare(session: AsyncSession, adventure: Adventure) -> Turn:
            if check is not None:
                await check(session, adventure)
            assert adventure.id is not None
            taken = await take_round(session, adventure.id)
            if not taken:
                raise StoryMovedOn(ROUND_CLOSED if check is None else NOTHING_TO_CLOSE)
            return lambda adventure_id, fence: self._narrate_round(adventure_id, taken, fence)

        asked = Asked(actor, channel_id, {"type": "round"}, request_id, None, drawn_for)
        entered = self.intake.enter(asked, prepare)
        async with aclosing(entered) as events:
            async for event in events:
                yield event

    async def _narrate_round(
        self, adventure_id: int, taken: list[PlayerAction], fence: Fence
    ) -> AsyncGenerator[TurnEvent, None]:
        """A closed round's actions narrated as one turn; a turn that fails puts them back."""
        async with aclosing(self.turns.play_actions(adventure_id, taken, fence=fence)) as run:
            async for event in run:
                if isinstance(event, TurnFailed):
                    async with self.db.transaction() as session:
                        await put_back(session, adventure_id, taken)
                yield event

    async def _retake(
        self,
        actor: Actor,
        channel_id: int,
        request_id: int,
        seen_version: int | None,
        drawn_for: int | None,
        check: RequestCheck | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:

        async def prepare(session: AsyncSession, adventure: Adventure) -> Turn:
            if check is not None:
                await check(session, adventure)
            head_id = adventure.head_node_id
            assert head_id is not None
            head = await session.get(StoryNode, head_id)
            assert head is not None
            await check_may_retry(session, adventure, head, actor)
            # The turn retried is the newest one now, even if the retry waits in the queue.
            return lambda adventure_id, fence: self.turns.retry(
                adventure_id, node_id=head_id, fence=fence
            )

        asked = Asked(actor, channel_id, RETRY_PAYLOAD, request_id, seen_version, drawn_for)
        entered = self.intake.enter(asked, prepare)
        async with aclosing(entered) as events:
            async for event in events:
                yield event

    async def reap_interrupted(self) -> list[tuple[int, TurnInterrupted]]:
        """Expired leases (their process died): each adventure's cut-off turn, by channel."""
        found = []
        for adventure_id in await self.leases.reap_expired():
            event = await self.requests.cut_off(adventure_id)
            if event is None:
                continue
            async with self.db.session() as session:
                adventure = await session.get(Adventure, adventure_id)
            if adventure is not None and adventure.channel_id is not None:
                found.append((adventure.channel_id, event))
        return found
