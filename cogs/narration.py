"""Showing a turn in Discord.

The interaction's own response carries the player's action (or the queue position while it
waits); the narration streams into ordinary channel messages owned by the bot, so a long turn
never outlives the 15-minute interaction token. The newest narration carries the turn's
buttons; the one before loses them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING

import discord

from cogs.buttons import retry_button, turn_buttons
from cogs.streaming import RatePacer, StreamingMessage
from engine.events import (
    ActionAccepted,
    Queued,
    TextDelta,
    TurnDone,
    TurnEvent,
    TurnFailed,
    TurnInterrupted,
)

if TYPE_CHECKING:
    from bot.discord_bot import CampfireBot
    from engine.turns import TurnResult

log = logging.getLogger(__name__)

#: A script's message under a turn is cut here (the turn's text comes first).
SCRIPT_MESSAGE_MAX = 1500

#: Discord's codes for an interaction whose token can no longer be used.
INTERACTION_GONE = {10015, 50027}  # unknown webhook, invalid webhook token


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


class Narrator:
    def __init__(self, bot: CampfireBot, pacer: RatePacer) -> None:
        self.bot = bot
        self.pacer = pacer
        # The message under which each channel's buttons currently sit.
        self._with_buttons: dict[int, discord.Message] = {}
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
        self, interaction: discord.Interaction, events: AsyncIterator[TurnEvent]
    ) -> None:
        """Render a turn's events; the interaction must already be deferred."""
        self._begin()
        try:
            await self._show(interaction, events)
        finally:
            self._end()

    async def _show(
        self, interaction: discord.Interaction, events: AsyncIterator[TurnEvent]
    ) -> None:
        channel = interaction.channel
        assert isinstance(channel, discord.abc.Messageable)
        stream: StreamingMessage | None = None
        text = ""
        action_line = ""
        async with aclosing(events) as turn:
            async for event in turn:
                if isinstance(event, Queued):
                    ahead = "1 turn" if event.position == 1 else f"{event.position} turns"
                    await self._edit_original(interaction, f"⏳ Queued behind {ahead}.")
                elif isinstance(event, TurnInterrupted):
                    await self.announce_interrupted(channel, event)
                elif isinstance(event, ActionAccepted):
                    action_line = (
                        event.text or f"⏩ *{interaction.user.display_name} lets the story go on.*"
                    )
                    await self._edit_original(interaction, action_line)
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
                        result.adventure_id, result.version, result.narrator_node_id
                    )
                    messages = await stream.finish(
                        result.text, view=view, suffix=turn_suffix(result) or None
                    )
                    # The story's end first; the old buttons go after, when nobody waits.
                    await self._drop_buttons(channel)
                    if messages:
                        self._with_buttons[channel.id] = messages[-1]
                elif isinstance(event, TurnFailed):
                    if stream is not None:
                        await stream.fail("⚠ *The narration stopped here; nothing was saved.*")
                    note = f"⚠ {event.error.message}"
                    view = retry_button(interaction.id) if event.error.retryable else None
                    content = f"{action_line}\n{note}" if action_line else note
                    await self._edit_original(interaction, content, view=view)

    async def post_opening(
        self, channel: discord.abc.Messageable, opening: str, adventure_id: int, version: int
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

    async def announce_interrupted(
        self, channel: discord.abc.Messageable, event: TurnInterrupted
    ) -> None:
        what = f" for “{event.action_text}”" if event.action_text else ""
        view = retry_button(event.request_id) if event.request_id else discord.utils.MISSING
        await self.pacer.acquire(channel.id)
        await channel.send(
            f"⚠ The turn{what} was interrupted when the bot stopped; nothing of it was saved.",
            view=view,
        )

    async def _drop_buttons(self, channel: discord.abc.Messageable) -> None:
        previous = self._with_buttons.pop(channel.id, None)
        if previous is None:
            return
        try:
            await self.pacer.acquire(channel.id)
            await previous.edit(view=None)
        except discord.HTTPException:
            log.debug("could not remove old buttons in %s", channel.id, exc_info=True)

    async def _edit_original(
        self,
        interaction: discord.Interaction,
        content: str,
        *,
        view: discord.ui.View | None = None,
    ) -> None:
        try:
            if view is None:
                await interaction.edit_original_response(content=content)
            else:
                await interaction.edit_original_response(content=content, view=view)
            return
        except discord.HTTPException as error:
            if error.code not in INTERACTION_GONE:
                # Anything else (a hiccup, a 5xx) only costs this line; the story goes on.
                log.warning("could not edit the response to %s: %s", interaction.id, error)
                return
        # The interaction's token expired (a long wait in the queue): say it in the channel.
        log.info("interaction %s expired; posting to the channel", interaction.id)
        channel = interaction.channel
        if isinstance(channel, discord.abc.Messageable):
            try:
                await self.pacer.acquire(channel.id)
                await channel.send(content, view=view or discord.utils.MISSING)
            except discord.HTTPException:
                log.warning("could not post to channel %s", channel.id, exc_info=True)
