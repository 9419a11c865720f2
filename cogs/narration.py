"""Showing a turn in Discord.

The interaction's own response carries the player's action (or the queue position while it
waits; an action longer than a message goes on in the next ones, never cut); the narration
streams into ordinary channel messages owned by the bot, so a long turn never outlives the
15-minute interaction token. The newest narration carries the turn's buttons; the one before
loses them.

Head moves (undo, redo, a branch switch, a chosen take) change which messages tell the story:
the narrator remembers, in this process, which messages show which turn, marks the ones taken
out of the story as undone (an embed under the text, so the text itself is never cut), clears
the mark when they come back, and moves the buttons to the turn the story now stands on.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable
from contextlib import aclosing
from typing import TYPE_CHECKING

import discord

from cogs.bot_permissions import (
    STORY_MOVED,
    TURN_SAVED,
    is_final_refusal,
    kind_of_place,
    permissions_now,
    refusal_note,
)
from cogs.buttons import retry_button, turn_buttons
from cogs.content import CONTENT_MAX, fit_text, text_pages
from cogs.replies import reply
from cogs.streaming import RatePacer, StreamingMessage
from engine.coordination.requests import RequestReused
from engine.errors import CampfireError, NotAllowed, NotFound, PlayerDeleted, StoryMovedOn
from engine.events import (
    ActionAccepted,
    AlreadyHandled,
    Queued,
    TextDelta,
    TurnDone,
    TurnEvent,
    TurnFailed,
    TurnInterrupted,
)
from engine.queue import QueueFull
from engine.sanitise import QUOTE_MAX, echo
from engine.story_tree import HeadMove

if TYPE_CHECKING:
    # discord.py's union of the channels a message can be sent to: unlike the Messageable
    # protocol, every one of them has an id.
    from discord.abc import MessageableChannel

    from bot.discord_bot import CampfireBot
    from engine.turns import TurnResult

log = logging.getLogger(__name__)

#: Refusals of a request before it is played, answered to the player alone (a script's answer
#: to a command, or a turn that failed, is the channel's to see).
PRIVATE_REFUSALS = (QueueFull, StoryMovedOn, NotAllowed, NotFound)

#: A script's message under a turn is cut here (the turn's text comes first).
SCRIPT_MESSAGE_MAX = 1500

#: Discord's codes for an interaction whose token can no longer be used.
INTERACTION_GONE = {10015, 50027}  # unknown webhook, invalid webhook token
#: How many turns' messages are remembered (per process) for marking undone turns.
REMEMBERED_TURNS = 500
MESSAGE_MAX = 2000
UNDONE_COLOUR = discord.Colour.dark_grey()


def turn_suffix(result: TurnResult) -> str:
    """What rides under the narration: the scripts' ``state.message`` as a quote, then the
    world-state chip in small text."""
    suffix = ""
    if result.script_message:
        message = result.script_message[:SCRIPT_MESSAGE_MAX]
        suffix += "\n\n" + "\n".join(f"> {line}" for line in message.splitlines())
    if result.state_chip:
        suffix += f"\n-# {result.state_chip}"
    return suffix


def _private(shown: list[tuple[discord.Message, str]]) -> bool:
    """Whether the action is shown to its player alone (the response to a Retry press)."""
    return bool(shown) and shown[0][0].flags.ephemeral


class Narrator:
    def __init__(self, bot: CampfireBot, pacer: RatePacer) -> None:
        self.bot = bot
        self.pacer = pacer
        # The message under which each channel's buttons currently sit.
        self._with_buttons: dict[int, discord.Message] = {}
        # Which messages show which story node, newest last (this process only).
        self._shown: OrderedDict[int, list[discord.Message]] = OrderedDict()
        # Turns being shown right now; the console waits for none before reading on.
        self._showing = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def wait_idle(self) -> None:
        """Until no turn is being shown (every narration has had its final edit)."""
        await self._idle.wait()

    def _begin(self) -> None:
        self._showing += 1
        self._idle.clear()

    def _end(self) -> None:
        self._showing -= 1
        if self._showing == 0:
            self._idle.set()

    async def show(
        self,
        interaction: discord.Interaction,
        events: AsyncGenerator[TurnEvent, None],
        *,
        retrying: bool = False,
    ) -> None:
        """Render a turn's events; the interaction must already be deferred. ``retrying``: the
        events write the newest turn again (its action is already in the story)."""
        self._begin()
        try:
            await self._show(interaction, events, retrying)
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
        text = ""
        action_line = ""
        # The messages showing the action, with what each shows (the response first).
        action_shown: list[tuple[discord.Message, str]] = []
        answered = False  # the response shows something (the queue, the action): not a refusal
        async with aclosing(events) as turn:
            async for event in turn:
                if isinstance(event, Queued | ActionAccepted):
                    answered = True
                if isinstance(event, Queued):
                    ahead = "1 turn" if event.position == 1 else f"{event.position} turns"
                    await self._edit_original(interaction, f"⏳ Queued behind {ahead}.")
                elif isinstance(event, TurnInterrupted):
                    await self.announce_interrupted(channel, event)
                elif isinstance(event, ActionAccepted):
                    who = interaction.user.display_name
                    if retrying:
                        action_line = f"🔁 *{who} asks for another take of the newest turn.*"
                    else:
                        action_line = event.text or f"⏩ *{who} lets the story go on.*"
                    action_shown = await self._show_action(interaction, action_line)
                elif isinstance(event, TextDelta):
                    if stream is None:
                        stream = StreamingMessage(channel, self.pacer)
                    text += event.text
                    stream.update(text)
                elif isinstance(event, TurnDone):
                    result = event.result
                    if stream is None:
                        stream = StreamingMessage(channel, self.pacer)
                    view = turn_buttons(
                        result.adventure_id,
                        result.version,
                        result.narrator_node_id,
                        take=result.take,
                        takes=result.take_count,
                    )
                    messages = await stream.finish(
                        result.text, view=view, suffix=turn_suffix(result) or None
                    )
                    refused = stream.refused
                    try:
                        if refused is None:
                            # The story's end first; the old buttons go after, when nobody
                            # waits.
                            await self._drop_buttons(channel)
                        if messages:
                            self._with_buttons[channel.id] = messages[-1]
                        if refused is None and (
                            result.take > 1 or result.replaced_node_id is not None
                        ):
                            # A retry: the earlier take's messages say where the story went.
                            earlier = result.replaced_node_id or result.narrator_node_id
                            await self._mark(
                                channel, [earlier], "🔁 Retried: the new take is below."
                            )
                    except discord.HTTPException as error:
                        refused = error  # only final refusals get here
                    if refused is not None:
                        # Discord refuses the bot this channel now: nothing more is asked of
                        # it there, and the player hears it once, through the interaction's
                        # token, which needs no permission in the channel.
                        await reply(interaction, self._refusal_note(interaction, refused))
                    self._remember(result.narrator_node_id, messages)
                    if result.action_node_id is not None and not retrying:
                        # The player's action is marked with its turn when undone.
                        self._remember(result.action_node_id, [m for m, _ in action_shown])
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
        finally:
            self._end()
        if messages:
            self._with_buttons[messages[-1].channel.id] = messages[-1]
            if node_id is not None:
                self._remember(node_id, messages)

    # --- head moves -------------------------------------------------------------------------

    async def head_move(
        self, interaction: discord.Interaction, move: Awaitable[HeadMove], note: str
    ) -> None:
        """Run a head move and show it: a public line saying who did what, undone turns
        marked, returning ones unmarked, the buttons on the turn the story now stands on.
        A refused move (stale button, no permission) is answered to the presser alone."""
        try:
            result = await move
        except CampfireError as error:
            await reply(interaction, f"⚠ {error.message}")
            return
        await interaction.response.send_message(
            note.format(
                who=discord.utils.escape_markdown(interaction.user.display_name),
                branch=discord.utils.escape_markdown(result.branch),
            )
        )
        channel = interaction.channel
        if isinstance(channel, discord.abc.Messageable):
            refused = await self.show_head(channel, result)
            if refused is not None:
                await reply(interaction, self._refusal_note(interaction, refused, STORY_MOVED))

    async def show_head(
        self, channel: MessageableChannel, move: HeadMove
    ) -> discord.HTTPException | None:
        """Mark, unmark and move the buttons; returns Discord's refusal if it refused the bot
        this channel (after which nothing more is asked there)."""
        self._begin()
        try:
            await self._mark(channel, move.removed, "↩️ Undone. /redo (or ↪️ Redo) brings it back.")
            await self._unmark(move.restored)
            view = turn_buttons(
                move.adventure_id,
                move.version,
                move.head_node_id if move.head_index > 0 else None,
                take=move.take,
                takes=move.take_count,
                can_undo=move.head_index > 0,
                can_redo=move.can_redo,
            )
            await self._drop_buttons(channel)
            shown = self._shown.get(move.head_node_id)
            target = shown[-1] if shown else None
            try:
                await self.pacer.acquire(channel.id)
                if target is not None:
                    await target.edit(view=view)
                else:
                    # A turn this process never showed: say where the story stands.
                    target = await channel.send(
                        f"-# The story now stands here:\n{echo(move.head_text, MESSAGE_MAX - 40)}",
                        view=view,
                    )
                self._with_buttons[channel.id] = target
            except discord.HTTPException as error:
                if is_final_refusal(error):
                    raise
                log.warning("could not place the buttons in %s", channel.id, exc_info=True)
        except discord.HTTPException as error:  # a final refusal: stop at the first
            log.warning("head move in %s not shown: %s", channel.id, error)
            return error
        finally:
            self._end()
        return None

    async def show_edit(self, channel: MessageableChannel, move: HeadMove) -> None:
        """A corrected turn: its message shows the new text, with the pager."""
        shown = self._shown.get(move.head_node_id)
        if not shown:
            await self.show_head(channel, move)
            return
        view = turn_buttons(
            move.adventure_id,
            move.version,
            move.head_node_id,
            take=move.take,
            takes=move.take_count,
            can_redo=move.can_redo,
        )
        try:
            await self._drop_buttons(channel)
            await self.pacer.acquire(channel.id)
            # A take longer than a message is cut here; it stays whole in the story and Insights.
            await shown[-1].edit(content=echo(move.head_text, MESSAGE_MAX), view=view)
            self._with_buttons[channel.id] = shown[-1]
        except discord.HTTPException:
            # A final refusal included: one request refused, none after it.
            log.warning("could not show the edit in %s", channel.id, exc_info=True)

    async def show_take(self, interaction: discord.Interaction, move: Awaitable[HeadMove]) -> None:
        """The take pager: the chosen take replaces the text of the pressed message, in place."""
        try:
            result = await move
        except CampfireError as error:
            await reply(interaction, f"⚠ {error.message}")
            return
        view = turn_buttons(
            result.adventure_id,
            result.version,
            result.head_node_id,
            take=result.take,
            takes=result.take_count,
            can_redo=result.can_redo,
        )
        await interaction.response.edit_message(
            content=echo(result.head_text, MESSAGE_MAX), view=view
        )
        if interaction.message is not None and interaction.channel_id is not None:
            self._with_buttons[interaction.channel_id] = interaction.message
            self._remember(result.head_node_id, [interaction.message])

    def _remember(self, node_id: int, messages: list[discord.Message]) -> None:
        if not messages:
            return
        self._shown[node_id] = list(messages)
        self._shown.move_to_end(node_id)
        while len(self._shown) > REMEMBERED_TURNS:
            self._shown.popitem(last=False)

    async def _mark(self, channel: MessageableChannel, nodes, note: str) -> None:
        for node_id in nodes:
            for message in self._shown.get(node_id, []):
                try:
                    await self.pacer.acquire(channel.id)
                    await message.edit(
                        embed=discord.Embed(description=note, colour=UNDONE_COLOUR), view=None
                    )
                except discord.HTTPException as error:
                    if is_final_refusal(error):
                        raise
                    log.debug("could not mark message %s", message.id, exc_info=True)

    async def _unmark(self, nodes) -> None:
        for node_id in nodes:
            for message in self._shown.get(node_id, []):
                try:
                    await self.pacer.acquire(message.channel.id)
                    await message.edit(embeds=[])
                except discord.HTTPException as error:
                    if is_final_refusal(error):
                        raise
                    log.debug("could not unmark message %s", message.id, exc_info=True)

    @staticmethod
    def _refusal_note(
        interaction: discord.Interaction, refused: discord.HTTPException, done: str = TURN_SAVED
    ) -> str:
        place = kind_of_place(interaction)
        return refusal_note(refused, place, permissions_now(interaction), done=done)

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

    async def _drop_buttons(self, channel: MessageableChannel) -> None:
        previous = self._with_buttons.pop(channel.id, None)
        if previous is None:
            return
        try:
            await self.pacer.acquire(channel.id)
            await previous.edit(view=None)
        except discord.HTTPException as error:
            if is_final_refusal(error):
                raise
            log.debug("could not remove old buttons in %s", channel.id, exc_info=True)

    # --- the action line --------------------------------------------------------------------

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
