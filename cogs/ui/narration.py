"""Showing a turn in Discord.

The interaction's own response carries the player's action (or the queue position while it
waits; an action longer than a message goes on in the next ones, never cut); the narration
streams under it, as a follow-up of the interaction, off the bot's global budget, or, where that
is not correct (no interaction, a private response, a token too old), as the bot's channel
messages (``cogs.ui.narration_routes``). The newest narration carries the turn's buttons; the
one before loses them.

Head moves (undo, redo, a branch switch, a save point, a chosen take) change which messages
tell the story. Which messages show which turn, and which carries the buttons, is kept in the
database (``engine.play.message_links``: written once when a turn's messages are final), so any
process, and the bot after a restart, marks the messages taken out of the story as undone (an
embed under the text, so the text itself is never cut), clears the mark when they come back,
and moves the buttons to the turn the story now stands on (``cogs.ui.head_moves``, which this
``Narrator`` builds on). Those messages may be hours old: they are edited by id, paced, and given
up on gracefully (``cogs.ui.earlier_messages``). A head move is acknowledged before it writes,
and one move marks at most ``EDITS_PER_MOVE`` messages, saying so when more were concerned.

Where Discord refuses the bot the channel (403), the narration stays as it stands, nothing more
is asked there for that turn or move, and the player is told once, privately.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING

import discord

from cogs.ui.buttons import retry_button, turn_buttons
from cogs.ui.content import CONTENT_MAX, fit_text, text_pages
from cogs.ui.head_moves import SCRIPT_MESSAGE_MAX, UNDONE_COLOUR, HeadMoveShowing
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.narration_routes import INTERACTION_GONE, ChannelRoute, InteractionRoute
from cogs.ui.pacing import interaction_window
from cogs.ui.replies import reply
from cogs.ui.streaming import StreamingMessage
from engine.errors import (
    InvalidInput,
    NoAdventureHere,
    NotAllowed,
    NotFound,
    PlayerDeleted,
    StoryMovedOn,
)
from engine.platform.events import TextDelta
from engine.platform.queue import QueueFull
from engine.platform.sanitise import QUOTE_MAX, echo
from engine.play.message_links import NARRATION, MessageLink
from engine.story.characters import SOLO_ACTOR
from engine.story.fallback import FALLBACK_REASON_MAX, fallback_note
from engine.turns.events import (
    ActionAccepted,
    AlreadyHandled,
    Queued,
    TurnDone,
    TurnEvent,
    TurnFailed,
    TurnInterrupted,
)
from engine.turns.requests import RequestReused

if TYPE_CHECKING:
    # discord.py's union of the channels a message can be sent to: unlike the Messageable
    # protocol, every one of them has an id.
    from discord.abc import MessageableChannel

    from engine.turns.result import TurnResult

log = logging.getLogger(__name__)

#: Refusals of a request before it is played, answered to the player alone (a script's answer
#: to a command, or a turn that failed, is the channel's to see): they are decided after the
#: interaction was acknowledged, publicly where a turn would follow.
PRIVATE_REFUSALS = (QueueFull, StoryMovedOn, NotAllowed, NotFound, InvalidInput)

RETRIED_NOTE = "🔁 Retried: the new take is below."


def turn_suffix(result: TurnResult) -> str:
    """What rides under the narration: the scripts' ``state.message`` as a quote, then the
    world-state chip in small text."""
    suffix = ""
    if result.script_message:
        message = result.script_message[:SCRIPT_MESSAGE_MAX]
        suffix += "\n\n" + "\n".join(f"> {line}" for line in message.splitlines())
    if result.state_chip:
        suffix += f"\n-# {result.state_chip}"
    if result.chapter_note:
        suffix += f"\n-# {result.chapter_note}"
    if result.fallback_reason:
        # An authored line stands in for the model's (engine.story.fallback): said so, plainly.
        suffix += f"\n-# {fallback_note(result.fallback_reason[:FALLBACK_REASON_MAX])}"
    return suffix


async def _after(
    first: TurnEvent, rest: AsyncGenerator[TurnEvent, None]
) -> AsyncGenerator[TurnEvent, None]:
    """``first``, then the events of ``rest``."""
    yield first
    async for event in rest:
        yield event


def queued_note(event: Queued) -> str:
    ahead = "1 turn" if event.position == 1 else f"{event.position} turns"
    return f"⏳ Queued behind {ahead}."


def _private(shown: list[tuple[discord.Message, str]]) -> bool:
    """Whether the action is shown to its player alone (the response to a Retry press)."""
    return bool(shown) and shown[0][0].flags.ephemeral


def _route(
    interaction: discord.Interaction,
    channel: MessageableChannel,
    action_shown: list[tuple[discord.Message, str]],
) -> ChannelRoute:
    """How the turn's narration reaches Discord (``cogs.ui.narration_routes``): as follow-ups
    of the interaction when its response shows the action publicly (so the narration follows
    it, as a channel message would) and its token is young enough; else as channel messages.
    A response its token could not edit any more was posted in the channel instead (no
    ``InteractionMessage``): the token is done with too."""
    if not action_shown:
        return ChannelRoute(channel)
    response = action_shown[0][0]
    if (
        isinstance(response, discord.InteractionMessage)
        and not response.flags.ephemeral
        and InteractionRoute.fresh(interaction)
    ):
        return InteractionRoute(interaction, channel, after_id=response.id)
    return ChannelRoute(channel)


class Narrator(HeadMoveShowing):
    """Shows turns as they are written, and the story's head as it moves (``HeadMoveShowing``)."""

    async def show(
        self,
        interaction: discord.Interaction,
        events: AsyncGenerator[TurnEvent, None],
        *,
        retrying: bool = False,
        nothing_here: Callable[[discord.Interaction], Awaitable[None]] | None = None,
    ) -> None:
        """Render a turn's events; the interaction must already be deferred. ``retrying``: the
        events write the newest turn again (its action is already in the story).
        ``nothing_here`` answers instead when no adventure runs where it was sent."""
        # What follows the turn in the background may answer through it (a card proposal).
        self.interactions.note(interaction)
        self._begin()
        try:
            async with aclosing(events) as turn:
                first = await anext(turn, None)
                if first is None:
                    return
                if (
                    nothing_here is not None
                    and isinstance(first, TurnFailed)
                    and isinstance(first.error, NoAdventureHere)
                ):
                    await nothing_here(interaction)
                    return
                await self._show(interaction, _after(first, turn), retrying)
        finally:
            self._end()

    async def _show(
        self,
        interaction: discord.Interaction,
        events: AsyncGenerator[TurnEvent, None],
        retrying: bool = False,
    ) -> None:
        channel = interaction.channel
        assert isinstance(channel, discord.abc.Messageable)
        stream: StreamingMessage | None = None
        route: ChannelRoute | None = None
        action_line = ""
        # The messages showing the action, with what each shows (the response first).
        action_shown: list[tuple[discord.Message, str]] = []
        answered = False  # the response shows something (the queue, the action): not a refusal
        async with aclosing(events) as turn:
            async for event in turn:
                if isinstance(event, Queued | ActionAccepted):
                    answered = True
                if isinstance(event, Queued):
                    await self._edit_original(interaction, queued_note(event))
                elif isinstance(event, TurnInterrupted):
                    await self.announce_interrupted(channel, event)
                elif isinstance(event, ActionAccepted):
                    action_line = event.text
                    if retrying or not action_line:
                        action_line = await self._own_move_line(interaction, retrying)
                    action_shown = await self._show_action(interaction, action_line)
                    route = _route(interaction, channel, action_shown)
                elif isinstance(event, TextDelta):
                    stream = self._streamed(channel, stream, event.text, route)
                elif isinstance(event, TurnDone):
                    result = event.result
                    stream, messages = await self._final(channel, stream, result, route)
                    if isinstance(route, InteractionRoute) and route.by_token:
                        # Its buttons come off later through the same token (no global budget).
                        self.earlier.followups.add(interaction, [m.id for m in messages])
                    # The player's action is marked with its turn when undone (not a retry's
                    # line, nor one only its player sees: unknown to an edit by id, 10008).
                    action = (
                        [m.id for m, _ in action_shown if not m.flags.ephemeral]
                        if not retrying
                        else []
                    )
                    refused = await self._turn_shown(
                        channel.id, result, messages, action, refused=stream.refused
                    )
                    if refused is not None:
                        # Discord refuses the bot this channel now: nothing more is asked of
                        # it there, and the player hears it once, through the interaction's
                        # token, which needs no permission in the channel.
                        await reply(interaction, self._refusal_note(interaction, refused))
                elif isinstance(event, AlreadyHandled):
                    # A repeat delivery of this interaction: the first one answers it.
                    log.info("interaction %s: already %s", interaction.id, event.status)
                elif isinstance(event, TurnFailed) and isinstance(event.error, RequestReused):
                    # The response belongs to the request that used this id first.
                    note = fit_text(f"⚠ {event.error.message}")
                    try:
                        await interaction.followup.send(note, ephemeral=True)
                    except discord.HTTPException:
                        log.warning("could not answer interaction %s", interaction.id)
                elif isinstance(event, TurnFailed):
                    if stream is not None:
                        await stream.fail("⚠ *The narration stopped here; nothing was saved.*")
                    view = retry_button(interaction.id) if event.error.retryable else None
                    note = f"⚠ {event.error.message}"
                    if isinstance(event.error, PlayerDeleted):
                        # Their words go with the rest of their data.
                        action_shown = await self._unshow_action(interaction, action_shown)
                    if not answered and isinstance(event.error, PRIVATE_REFUSALS):
                        # Refused before anything was shown (a full queue, a stale button): for
                        # the player alone, even after a public "thinking…".
                        await reply(interaction, note, view=view)
                        continue
                    await self._show_failure(interaction, action_shown, note, view)

    async def show_unasked(
        self,
        channel: MessageableChannel,
        events: AsyncGenerator[TurnEvent, None],
        tell: Callable[[str], Awaitable[object]],
        *,
        post_actions: bool,
        tell_moved_on: bool = True,
    ) -> None:
        """Render a turn no interaction answers for: one a plain message plays
        (``cogs.message_play``: the message itself shows the action, and is never marked undone,
        since the bot cannot edit it), or a round its timeout closed (``cogs.ui.round_panels``: its
        actions are posted, ``post_actions``). The narration streams as for /do; ``tell`` says
        the notices and failures (a reply to the message, a post in the channel). A round
        another closer took is no news (``tell_moved_on`` False)."""
        self._begin()
        try:
            stream: StreamingMessage | None = None
            action_ids: list[int] = []
            async with aclosing(events) as turn:
                async for event in turn:
                    if isinstance(event, Queued):
                        await tell(queued_note(event))
                    elif isinstance(event, TurnInterrupted):
                        await self.announce_interrupted(channel, event)
                    elif isinstance(event, ActionAccepted) and post_actions:
                        for piece in text_pages(event.text):
                            posted = await self.post(channel, piece)
                            if posted is not None:
                                action_ids.append(posted.id)
                    elif isinstance(event, TextDelta):
                        stream = self._streamed(channel, stream, event.text)
                    elif isinstance(event, TurnDone):
                        result = event.result
                        stream, shown = await self._final(channel, stream, result)
                        refused = await self._turn_shown(
                            channel.id, result, shown, action_ids, refused=stream.refused
                        )
                        if refused is not None:
                            log.warning(
                                "channel %s refused the narration: %s", channel.id, refused.text
                            )
                    elif isinstance(event, AlreadyHandled):
                        # The same message delivered again: its first delivery plays it.
                        log.info("a turn in channel %s: already %s", channel.id, event.status)
                    elif isinstance(event, TurnFailed):
                        if stream is not None:
                            await stream.fail("⚠ *The narration stopped here; nothing was saved.*")
                        if tell_moved_on or not isinstance(event.error, StoryMovedOn):
                            await tell(f"⚠ {event.error.message}")
        finally:
            self._end()

    def _streamed(
        self,
        channel: MessageableChannel,
        stream: StreamingMessage | None,
        delta: str,
        route: ChannelRoute | None = None,
    ) -> StreamingMessage:
        """The turn's stream (started with its first text, by ``route``: the channel's
        messages if None) with ``delta`` added."""
        if stream is None:
            stream = StreamingMessage(channel, self.pacer, reserve=False, route=route)
        stream.update(stream.text + delta)
        return stream

    async def _final(
        self,
        channel: MessageableChannel,
        stream: StreamingMessage | None,
        result: TurnResult,
        route: ChannelRoute | None = None,
    ) -> tuple[StreamingMessage, list[discord.Message]]:
        """The turn's final text in its messages (the stream's, or new ones by ``route`` when
        nothing streamed), with the newest turn's buttons on the last."""
        if stream is None:
            stream = StreamingMessage(channel, self.pacer, reserve=False, route=route)
        view = turn_buttons(
            result.adventure_id,
            result.version,
            result.narrator_node_id,
            take=result.take,
            takes=result.take_count,
            suggestions=result.suggestions,
        )
        messages = await stream.finish(result.text, view=view, suffix=turn_suffix(result) or None)
        return stream, list(messages)

    async def post(self, channel: MessageableChannel, content: str) -> discord.Message | None:
        """A message of the bot's own in ``channel``, paced; None if Discord refused it."""
        try:
            await self.pacer.acquire(channel.id)
            return await channel.send(fit_text(content))
        except discord.HTTPException:
            log.warning("could not post to channel %s", channel.id, exc_info=True)
            return None

    async def _turn_shown(
        self,
        channel_id: int,
        result: TurnResult,
        messages: Sequence[discord.Message],
        action_ids: Sequence[int],
        *,
        refused: discord.HTTPException | None = None,
    ) -> discord.HTTPException | None:
        """A turn's messages are final: record them (one small write), take the buttons off
        the message that had them, and mark an earlier take's messages as retried; unless
        Discord refused the bot the channel while it streamed (``refused``): then nothing more
        is asked there. Returns the refusal met, if any."""
        links = self.links
        before = await links.with_buttons(channel_id)
        earlier: list[MessageLink] = []
        if result.take > 1 or result.replaced_node_id is not None:
            # A retry: the earlier take's messages say where the story went.
            replaced = result.replaced_node_id or result.narrator_node_id
            earlier = [link for link in await links.of_nodes([replaced]) if link.kind == NARRATION]
        ids = [message.id for message in messages]
        action = None
        if result.action_node_id is not None and action_ids:
            action = (result.action_node_id, action_ids)
        await links.shown(channel_id, result.narrator_node_id, ids, action=action)
        if refused is not None:
            return refused
        retried = [link for link in earlier if link.message_id not in ids]
        edits = self.earlier.round()
        # The story's end first; the old buttons go after, when nobody waits (a retried
        # take's mark takes them off with it).
        untouched = {*ids, *(link.message_id for link in retried)}
        if before is not None and before.message_id not in untouched:
            await edits.edit(before, view=None)
        embed = discord.Embed(description=RETRIED_NOTE, colour=UNDONE_COLOUR)
        await edits.edit_all(retried, embed=embed, view=None)
        return edits.refusal

    async def post_opening(
        self,
        channel: MessageableChannel,
        opening: str,
        adventure_id: int,
        version: int,
        *,
        node_id: int | None = None,
    ) -> None:
        self._begin()
        try:
            stream = StreamingMessage(channel, self.pacer)
            messages = await stream.finish(
                opening or "*The story begins.*", view=turn_buttons(adventure_id, version)
            )
            before = await self.links.with_buttons(channel.id)
            ids = [message.id for message in messages]
            if node_id is not None:
                await self.links.shown(channel.id, node_id, ids)
            if before is not None and before.message_id not in ids:
                # The adventure that ran here before keeps its story, not its buttons.
                await self.earlier.round().edit(before, view=None)
        finally:
            self._end()

    async def announce_interrupted(
        self, channel: MessageableChannel, event: TurnInterrupted
    ) -> None:
        what = f" for “{echo(event.action_text, QUOTE_MAX)}”" if event.action_text else ""
        view = retry_button(event.request_id)
        await self.pacer.acquire(channel.id)
        await channel.send(
            f"⚠ The turn{what} was interrupted when the bot stopped; nothing of it was saved.",
            view=view,
        )

    # --- the action line --------------------------------------------------------------------

    async def _own_move_line(self, interaction: discord.Interaction, retrying: bool) -> str:
        """The line for a move with no words of its own (a retry, a continue), naming the player
        as the story does: "You" in a DM, their character's name in a group adventure, else
        their display name (read now: the interaction was acknowledged long before)."""
        characters = self.bot.services.characters
        who = await characters.name_here(actor_of(interaction), channel_id_of(interaction))
        if who == SOLO_ACTOR:
            if retrying:
                return "🔁 *You ask for another take of the newest turn.*"
            return "⏩ *You let the story go on.*"
        who = discord.utils.escape_markdown(who)
        if retrying:
            return f"🔁 *{who} asks for another take of the newest turn.*"
        return f"⏩ *{who} lets the story go on.*"

    async def _show_action(
        self, interaction: discord.Interaction, action_line: str
    ) -> list[tuple[discord.Message, str]]:
        """The player's action as the interaction's answer, whole: it is theirs, so it is paged,
        never cut. A 2000-character ``/do`` reads "> You … ." a few characters longer than a
        message holds (and a round of several actions longer still): what does not fit the
        response follows it in the channel. Returns the messages shown, with their text."""
        first, *rest = text_pages(action_line)
        shown: list[tuple[discord.Message, str]] = []
        message = await self._edit_original(interaction, first)
        if message is not None:
            shown.append((message, first))
        private = _private(shown)
        for piece in rest:
            message = await self._post(interaction, piece, private=private)
            if message is not None:
                shown.append((message, piece))
        return shown

    async def _unshow_action(
        self, interaction: discord.Interaction, shown: list[tuple[discord.Message, str]]
    ) -> list[tuple[discord.Message, str]]:
        """Take the action's words down (its author's data was deleted meanwhile); the
        response stays, for the note."""
        for message, _ in shown[1:]:
            try:
                await self.pacer.acquire(message.channel.id)
                await message.delete()
            except discord.HTTPException:
                log.debug("could not delete message %s", message.id, exc_info=True)
        return []

    async def _show_failure(
        self,
        interaction: discord.Interaction,
        action_shown: list[tuple[discord.Message, str]],
        note: str,
        view: discord.ui.View | None,
    ) -> None:
        """The failure note, whole and with its Retry button, under the action: on the
        action's last message when it fits there, else in a message of its own after it (a
        message over 2000 characters would be refused whole, the button with it)."""
        note = fit_text(note)
        if not action_shown:
            await self._edit_original(interaction, note, view=view)
            return
        last, shown = action_shown[-1]
        content = f"{shown}\n{note}"
        private = _private(action_shown)
        if len(content) > CONTENT_MAX:
            await self._post(interaction, note, view=view, private=private)
        elif len(action_shown) == 1:
            await self._edit_original(interaction, content, view=view)
        else:
            try:
                await self.pacer.acquire(last.channel.id)
                await last.edit(content=content, view=view)
            except discord.HTTPException:
                log.warning("could not add the note to message %s", last.id, exc_info=True)
                await self._post(interaction, note, view=view, private=private)

    async def _post(
        self,
        interaction: discord.Interaction,
        content: str,
        *,
        view: discord.ui.View | None = None,
        private: bool = False,
    ) -> discord.Message | None:
        """A message in the interaction's channel, after its response (paced like every
        message there; a channel message outlives the interaction's token); ``private``, after
        a response only its player sees (a Retry's), a follow-up only they see too."""
        if private:
            try:
                return await interaction.followup.send(
                    fit_text(content), view=view or discord.utils.MISSING, ephemeral=True, wait=True
                )
            except discord.HTTPException:
                log.warning("could not follow up interaction %s", interaction.id, exc_info=True)
                return None
        channel = interaction.channel
        if not isinstance(channel, discord.abc.Messageable):
            return None
        try:
            await self.pacer.acquire(channel.id)
            return await channel.send(fit_text(content), view=view or discord.utils.MISSING)
        except discord.HTTPException:
            log.warning("could not post to channel %s", channel.id, exc_info=True)
            return None

    async def _edit_original(
        self,
        interaction: discord.Interaction,
        content: str,
        *,
        view: discord.ui.View | None = None,
    ) -> discord.Message | None:
        """Show ``content`` as the interaction's answer; returns the message that shows it."""
        content = fit_text(content)
        # In the token's window, which its narration's follow-ups share (off the global budget).
        await self.pacer.acquire(
            interaction_window(interaction.id), urgent=True, global_budget=False
        )
        try:
            if view is None:
                return await interaction.edit_original_response(content=content)
            return await interaction.edit_original_response(content=content, view=view)
        except discord.HTTPException as error:
            if error.code not in INTERACTION_GONE:
                # Anything else (a hiccup, a 5xx) only costs this line; the story goes on.
                log.warning("could not edit the response to %s: %s", interaction.id, error)
                return None
        # The interaction's token expired (a long wait in the queue): say it in the channel.
        log.info("interaction %s expired; posting to the channel", interaction.id)
        channel = interaction.channel
        if isinstance(channel, discord.abc.Messageable):
            try:
                await self.pacer.acquire(channel.id)
                return await channel.send(content, view=view or discord.utils.MISSING)
            except discord.HTTPException:
                log.warning("could not post to channel %s", channel.id, exc_info=True)
        return None
