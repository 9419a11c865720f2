"""Rounds in Discord (``/host mode rounds|host``): the round panel, its Close button, and the
round's timeout.

The panel is one message in the adventure's place, posted when a round's first action comes and
edited as players act: the party, and who has acted. Close (host and managers, refereed by the
engine) ends the round; in ``rounds`` mode the round also ends when everyone has acted (the
engine closes it under the last player's request) or when it has waited the round timeout. The
timeout is a timer in the process that saw the round open; whether the round is due, and that
it closes once, the engine decides in the database, so a timer that fires late, twice, or in
the wrong process closes nothing it should not. Which rounds are open and where their panels
are is in the database (``engine.play.round_panels``): a restarted process shows the same
panels again and times their rounds out (``RoundPanels.restore``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import discord

from cogs.ui import bot_of
from cogs.ui.earlier_messages import Edited
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.preflight import Preflighted
from engine.people.access.rules import Actor
from engine.platform.sanitise import ROW_ID_MAX, row_id
from engine.story.characters import SOLO_ACTOR
from engine.story.rounds import RoundState, TurnMode
from engine.turns.events import ActionAccepted, RoundSubmitted, TurnEvent

if TYPE_CHECKING:
    import re

    from discord.abc import MessageableChannel

    from cogs.ui import CampfireBot

log = logging.getLogger(__name__)

#: A closed round's panel when how it stood was shown by a process before a restart.
CLOSED = "🎲 **Round closed**: the narrator answers it."
#: Names on the panel quote players; nothing in them pings anyone.
NO_PINGS = discord.AllowedMentions.none()


def _name(text: str) -> str:
    return discord.utils.escape_markdown(text)


def panel_text(state: RoundState, timeout_s: float, *, closed: bool = False) -> str:
    """The round panel: how the round ends, then each player and whether they have acted."""
    if closed:
        head = CLOSED
    elif state.mode is TurnMode.ROUNDS:
        head = (
            f"🎲 **Round** ({state.acted}/{len(state.players)} acted): it closes when everyone "
            f"has acted, when the host presses Close, or {timeout_s:g} s after its first action."
        )
    else:
        head = (
            f"🎲 **Round** ({state.acted}/{len(state.players)} acted): the host closes it. "
            "Act with /do, /say, /story or the buttons; acting again changes your action."
        )
    lines = [head]
    for player in state.players:
        mark = "✅" if player.acted else "⏳"
        lines.append(f"{mark} {_name(player.name)}")
    return "\n".join(lines)


def round_notice(state: RoundState, user_id: int, display_name: str, replaced: bool) -> str:
    """The answer to a player's action for the round, naming them as the panel does (the name
    their action is written with: their character's, "You" in a DM), read with the round's
    state, so no other read is made; their display name if the round no longer lists them."""
    named = next((p.name for p in state.players if p.user_id == user_id), None)
    count = f"({state.acted}/{len(state.players)})"
    if named == SOLO_ACTOR:
        did = "changed your action" if replaced else "have acted"
        return f"✋ *You {did} for this round {count}.*"
    who = _name(named or display_name)
    did = "changed their action" if replaced else "has acted"
    return f"✋ *{who} {did} for this round {count}.*"


def _request_id() -> int:
    """A request id for a close that no interaction asked for (the timeout): a snowflake of
    now with random low bits, in the range of the interactions' own."""
    return discord.utils.time_snowflake(discord.utils.utcnow()) + random.randrange(1 << 22)


class RoundPanels:
    """Each open round's panel and timeout timer.

    The timers, and how each round stood when last shown, are this process's, and safely so:
    a channel's rounds are played in the process of its server's shard (a server's events,
    its interactions included, reach one shard), and a restarted process takes them up from
    the database (``restore``), where each panel's message is kept."""

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot
        #: How each panel's round stood when last shown.
        self._states: dict[int, RoundState] = {}
        self._timers: dict[int, asyncio.Task[None]] = {}

    @property
    def timeout_s(self) -> float:
        return self.bot.services.play.round_timeout_s

    def watch(
        self,
        channel: MessageableChannel,
        events: AsyncGenerator[TurnEvent, None],
        *,
        interaction: discord.Interaction | None = None,
        actor: Actor | None = None,
        adventure_id: int = 0,
    ) -> AsyncGenerator[TurnEvent, None]:
        """A request's events with the round's part taken out and shown here: a submission
        answers the player and updates the panel (starting the timeout); a closed round's
        turn marks the panel closed. The rest goes on to the narrator."""

        async def watched() -> AsyncGenerator[TurnEvent, None]:
            adventure = adventure_id
            async with aclosing(events) as stream:
                async for event in stream:
                    if isinstance(event, RoundSubmitted):
                        adventure = event.state.adventure_id
                        if interaction is not None:
                            await self._answer(interaction, event)
                        await self.update(channel, event.state)
                        if actor is not None and event.state.mode is TurnMode.ROUNDS:
                            self._start_timer(channel, event.state.adventure_id, actor)
                        continue
                    if isinstance(event, ActionAccepted) and adventure:
                        await self.close_panel(channel.id, adventure)
                    yield event

        return watched()

    async def _answer(self, interaction: discord.Interaction, event: RoundSubmitted) -> None:
        note = round_notice(
            event.state, interaction.user.id, interaction.user.display_name, event.replaced
        )
        try:
            await interaction.edit_original_response(content=note, allowed_mentions=NO_PINGS)
        except discord.HTTPException:
            log.warning("could not answer interaction %s", interaction.id, exc_info=True)

    async def update(self, channel: MessageableChannel, state: RoundState) -> None:
        """Post the round's panel, or edit it to how the round stands. Edits go the way of
        every earlier message's (``cogs.ui.earlier_messages``: paced, never waiting on a rate
        limit); a panel that cannot be edited any more is replaced by a new one."""
        text = panel_text(state, self.timeout_s)
        view = discord.ui.View(timeout=None)
        view.add_item(CloseButton(state.adventure_id))
        self._states[state.adventure_id] = state
        records = self.bot.services.round_panels
        panel = await records.panel_of(state.adventure_id)
        earlier = self.bot.narrator.earlier
        if panel is not None:
            edited = await earlier.edit_message(channel.id, panel, content=text, view=view)
            if edited is Edited.DONE or edited is Edited.CHANNEL_REFUSED:
                return
            log.info("round panel %s cannot be edited (%s); posting another", panel, edited)
        try:
            await self.bot.narrator.pacer.acquire(channel.id)
            sent = await channel.send(text, view=view, allowed_mentions=NO_PINGS)
        except discord.HTTPException:
            log.warning("could not post the round panel", exc_info=True)
            return
        await records.shown(state.adventure_id, sent.id)

    async def close_panel(
        self, channel_id: int, adventure_id: int, *, dropped: bool = False
    ) -> None:
        """The round closed (``dropped``: the adventure went back to free play, and the round
        with it): its panel says so, without its button; the next round's first action posts
        a new one."""
        records = self.bot.services.round_panels
        panel = await records.panel_of(adventure_id)
        state = self._states.pop(adventure_id, None)
        if panel is None:
            return
        await records.shown(adventure_id, None)
        if dropped:
            text = "🎲 **Round dropped**: the adventure plays free again; act once more."
        elif state is not None:
            text = panel_text(state, self.timeout_s, closed=True)
        else:  # shown before a restart: who acted is gone with the round
            text = CLOSED
        await self.bot.narrator.earlier.edit_message(channel_id, panel, content=text, view=None)

    async def restore(self, ours: Callable[[int | None], bool]) -> None:
        """After a restart: each open round of this process's servers (``ours``) shows how it
        stands on its panel again, and one in ``rounds`` mode is timed out as its lost timer
        would have, in its opener's name."""
        try:
            rounds = await self.bot.services.round_panels.open_rounds(ours)
        except Exception:
            log.warning("could not find the open rounds", exc_info=True)
            return
        play = self.bot.services.play
        for opened in rounds:
            channel = self.bot.get_channel(opened.channel_id)
            if not isinstance(channel, discord.abc.Messageable) or isinstance(
                channel, discord.ForumChannel | discord.CategoryChannel
            ):
                continue  # out of sight (an archived thread): its next action shows it again
            state = await play.round_here(opened.channel_id)
            if state is None or state.adventure_id != opened.adventure_id:
                continue
            await self.update(channel, state)
            if state.mode is TurnMode.ROUNDS:
                opener = Actor(opened.opener_id, opened.opener_name, opened.server_id)
                self._start_timer(channel, opened.adventure_id, opener)
        if rounds:
            log.info("open rounds shown again: %d", len(rounds))

    def _start_timer(self, channel: MessageableChannel, adventure_id: int, actor: Actor) -> None:
        timer = self._timers.get(adventure_id)
        if timer is not None and not timer.done():
            return
        self._timers[adventure_id] = asyncio.create_task(
            self._time_out(channel, adventure_id, actor)
        )

    async def _time_out(self, channel: MessageableChannel, adventure_id: int, actor: Actor) -> None:
        """Sleep until the open round is due, then close it (the engine checks it is due)."""
        play = self.bot.services.play
        channel_id = channel.id
        try:
            while True:
                state = await play.round_here(channel_id)
                if (
                    state is None
                    or state.adventure_id != adventure_id
                    or state.mode is not TurnMode.ROUNDS
                    or state.opened_at is None
                ):
                    return
                left = self.timeout_s - (discord.utils.utcnow() - state.opened_at).total_seconds()
                if left > 0:
                    await asyncio.sleep(left)
                    continue
                events = play.close_late(actor, channel_id, request_id=_request_id())
                watched = self.watch(channel, events, adventure_id=adventure_id)
                narrator = self.bot.narrator
                # A round another closer took is theirs to show.
                await narrator.show_unasked(
                    channel,
                    watched,
                    functools.partial(narrator.post, channel),
                    post_actions=True,
                    tell_moved_on=False,
                )
                return
        except Exception:
            log.exception("the round timer of adventure %s failed", adventure_id)
        finally:
            self._timers.pop(adventure_id, None)

    def cancel(self) -> None:
        """Stop the timers (the bot is closing); a restart starts them again (``restore``)."""
        for timer in self._timers.values():
            timer.cancel()


class CloseButton(
    Preflighted,
    discord.ui.DynamicItem[discord.ui.Button],
    template=r"cf:round:close:(?P<adventure>\d+)",
):
    """Close on the round panel: ``cf:round:close:<adventure>``; the host's (and managers')."""

    def __init__(self, adventure_id: int) -> None:
        self.adventure_id = adventure_id
        button: discord.ui.Button = discord.ui.Button(
            label="Close round",
            emoji="🔔",
            style=discord.ButtonStyle.primary,
            custom_id=f"cf:round:close:{adventure_id}",
        )
        super().__init__(button)  # type: ignore[call-arg]  # object's __init__ to a checker

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> CloseButton:
        return cls(row_id(match["adventure"], ROW_ID_MAX) or 0)

    async def callback(self, interaction: discord.Interaction) -> None:
        from cogs.ui.replies import defer_request

        bot = bot_of(interaction)
        await defer_request(interaction)
        channel = interaction.channel
        assert channel is not None and not isinstance(
            channel, discord.ForumChannel | discord.CategoryChannel
        )
        events = bot.services.play.close_round(
            actor_of(interaction),
            channel_id_of(interaction),
            request_id=interaction.id,
            drawn_for=self.adventure_id,
        )
        watched = bot.round_panels.watch(channel, events, adventure_id=self.adventure_id)
        await bot.narrator.show(interaction, watched)
