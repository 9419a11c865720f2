"""The two ways a narration reaches Discord: as the bot's channel messages, or through the
interaction that asked for the turn.

A channel message (``POST``/``PATCH /channels/{id}/messages``) spends the bot's global budget,
which Discord counts per bot token across every process (50 requests a second, discord-api-docs,
Rate Limits, "Global Rate Limit"). "Interaction endpoints are not bound to the bot's Global Rate
Limit" (same section): the interaction's follow-ups (``POST /webhooks/{application.id}/{token}``)
and their edits (``PATCH /webhooks/{application.id}/{token}/messages/{message.id}``) are limited
per token only ("webhook_id + webhook_token" is a route's top-level resource, same page). A turn
asked for by a slash command or a button therefore streams its narration as a follow-up of its
interaction (:class:`InteractionRoute`): the player sees what they saw before, the action line
(the response) and the narration under it with its buttons, and the bot's global budget pays
for none of it.

Where that is not correct, the narration goes to the channel (:class:`ChannelRoute`): a turn no
interaction asked for (a plain message, a round its timeout closed), a response only its player
sees (a follow-up would be a public message answering a private one), and anything once the
token is too old. "Interaction tokens are valid for 15 minutes" (discord-api-docs, Receiving
and Responding, "Followup Messages"); a narration starts through the token only while
:data:`START_BY` leaves time for the turn to end, and each request checks the token's age again.
A request the token can no longer make (401 50027 Invalid Webhook Token, 404 10015 Unknown
Webhook) is made by the bot's token instead: the follow-ups are the bot's own messages, which it
may edit and delete in the channel like any other.

Duplicates: a channel send carries a nonce Discord enforces (``cogs.ui.streaming``), a follow-up
cannot (Create Followup Message takes no nonce). A follow-up whose answer was an error that
leaves its fate unknown (a 5xx, a broken connection) is looked for in the channel, after the
interaction's response (the gateway tells the bot of its own messages), before anything is sent
again: found, it is the narration's message; not found, the send failed and may be made again.
Left open: discord.py's webhook adapter itself sends a follow-up again after a 5xx answer
(every 5xx, up to five times), which no check here sees; a channel send's nonce covers that
case, a follow-up's nothing.
"""

from __future__ import annotations

import datetime
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import aiohttp
import discord

from cogs.ui.pacing import Priority, RatePacer, interaction_window

if TYPE_CHECKING:
    from discord.abc import MessageableChannel

log = logging.getLogger(__name__)

#: How long an interaction's token answers (discord-api-docs, Receiving and Responding).
TOKEN_LIFETIME = datetime.timedelta(minutes=15)
#: A narration starts through the token only while this young: a turn's narration then ends
#: well within the token's life (a model reply is bounded far below the five minutes left).
START_BY = datetime.timedelta(minutes=10)
#: No request goes through a token older than this (a request in flight as the token expires
#: would be refused, and 401s count towards Discord's invalid-request limit).
USE_BY = TOKEN_LIFETIME - datetime.timedelta(seconds=30)
#: Discord's codes for an interaction whose token can no longer be used.
INTERACTION_GONE = {10015, 50027}  # unknown webhook, invalid webhook token
#: How far back in the channel a follow-up of unknown fate is looked for, and how long the
#: gateway is given to tell of it.
LANDED_LOOKUP = 25
LANDED_WAIT = 3.0

_UNKNOWN_FATE = (aiohttp.ClientError, OSError, TimeoutError)


def _unknown_fate(exc: BaseException) -> bool:
    """Whether a failed create may have made its message all the same."""
    if isinstance(exc, discord.HTTPException):
        return exc.status >= 500
    return isinstance(exc, _UNKNOWN_FATE)


class ChannelRoute:
    """The bot's own messages in the channel, by its token: on the global budget and the
    channel's window."""

    def __init__(self, channel: MessageableChannel) -> None:
        self.channel = channel
        self.id = channel.id

    @property
    def global_budget(self) -> bool:
        """Whether the next request spends the bot's global budget."""
        return True

    async def acquire(
        self, pacer: RatePacer, *, urgent: bool = False, priority: Priority | None = None
    ) -> None:
        await pacer.acquire(self.id, urgent=urgent, priority=priority)

    async def send(self, content: str, nonce: str, **kwargs: Any) -> discord.Message:
        return await self.channel.send(content=content, nonce=nonce, **kwargs)

    async def edit(self, message: discord.Message, **kwargs: Any) -> discord.Message | None:
        return await message.edit(**kwargs)

    async def delete(self, message: discord.Message) -> None:
        await message.delete()


class InteractionRoute(ChannelRoute):
    """Follow-ups of one interaction and their edits, through its token, off the global budget;
    the channel's route (inherited) once the token is too old or refused.

    ``after_id``: the interaction's response (the action line), after which its follow-ups are
    looked for when a send's fate is unknown."""

    def __init__(
        self, interaction: discord.Interaction, channel: MessageableChannel, after_id: int
    ) -> None:
        super().__init__(channel)
        self.interaction = interaction
        self.after_id = after_id
        self._gone = False  # Discord refused the token: the channel's route from now on
        self._made: set[int] = {after_id}  # the messages this route knows it made

    @staticmethod
    def fresh(interaction: discord.Interaction) -> bool:
        """Whether a narration may start through this interaction's token now."""
        return discord.utils.utcnow() - interaction.created_at < START_BY

    @property
    def by_token(self) -> bool:
        """Whether the next request goes through the interaction's token."""
        if self._gone:
            return False
        return discord.utils.utcnow() - self.interaction.created_at < USE_BY

    @property
    def global_budget(self) -> bool:
        return not self.by_token

    def _refused(self, exc: discord.HTTPException) -> bool:
        """Whether Discord refused the token itself (the request may be made by the bot's)."""
        if exc.code in INTERACTION_GONE:
            log.info("interaction %s: token refused (%s); on by channel", self.interaction.id, exc)
            self._gone = True
            return True
        return False

    async def acquire(
        self, pacer: RatePacer, *, urgent: bool = False, priority: Priority | None = None
    ) -> None:
        if not self.by_token:
            await super().acquire(pacer, urgent=urgent, priority=priority)
            return
        window = interaction_window(self.interaction.id)
        await pacer.acquire(window, urgent=urgent, priority=priority, global_budget=False)

    async def send(self, content: str, nonce: str, **kwargs: Any) -> discord.Message:
        if not self.by_token:
            return await super().send(content, nonce, **kwargs)
        try:
            message = await self.interaction.followup.send(content=content, wait=True, **kwargs)
        except discord.HTTPException as exc:
            if self._refused(exc):
                return await super().send(content, nonce, **kwargs)
            if not _unknown_fate(exc):
                raise
            message = await self._landed(exc)
        except _UNKNOWN_FATE as exc:
            message = await self._landed(exc)
        self._made.add(message.id)
        return message

    def _ours(self, message: discord.Message) -> bool:
        """Whether ``message`` is a follow-up of this interaction this route does not know."""
        meta = message.interaction_metadata
        return (
            meta is not None
            and meta.id == self.interaction.id
            and message.id not in self._made
            and not message.flags.ephemeral
        )

    async def _landed(self, failure: BaseException) -> discord.Message:
        """The follow-up a failed send made all the same, if Discord made it; else the failure
        is raised again (the send may then be made again without a duplicate).

        Where the bot hears the channel's messages (the message intents), the gateway tells it
        of every message made there, its own too, with no request and no permission: seen
        already, or within :data:`LANDED_WAIT`. Elsewhere the channel's newest messages are
        read (a DM needs no permission for it; in a server it takes Read Message History,
        which the bot may lack: then nothing is known, and the failure stands)."""
        client = self.interaction.client
        if client.intents.guild_messages or client.intents.dm_messages:
            # The cache read and the listener's start share one step of the event loop: a
            # message heard between them is not missed.
            seen = [m for m in client.cached_messages if self._ours(m)]
            try:
                message = (
                    seen[0]
                    if seen
                    else await client.wait_for("message", check=self._ours, timeout=LANDED_WAIT)
                )
            except TimeoutError:
                raise failure from None
            log.info("interaction %s: a follow-up landed unanswered", self.interaction.id)
            return message
        try:
            async for message in self.channel.history(
                limit=LANDED_LOOKUP, after=discord.Object(self.after_id), oldest_first=True
            ):
                if self._ours(message):
                    log.info("interaction %s: a follow-up landed unanswered", self.interaction.id)
                    return message
        except (discord.HTTPException, *_UNKNOWN_FATE) as exc:
            log.warning("interaction %s: no follow-up found: %s", self.interaction.id, exc)
        raise failure

    async def edit(self, message: discord.Message, **kwargs: Any) -> discord.Message | None:
        if self.by_token:
            try:
                return await self.interaction.followup.edit_message(message.id, **kwargs)
            except discord.HTTPException as exc:
                if not self._refused(exc):
                    raise
        return await self.channel.get_partial_message(message.id).edit(**kwargs)  # type: ignore[union-attr]

    async def delete(self, message: discord.Message) -> None:
        if self.by_token:
            try:
                await self.interaction.followup.delete_message(message.id)
                return
            except discord.HTTPException as exc:
                if not self._refused(exc):
                    raise
        await self.channel.get_partial_message(message.id).delete()  # type: ignore[union-attr]


class RecentFollowups:
    """This process's narrations sent as follow-ups, by message id, with the interaction whose
    token made them, while that token answers: a later change to one of them (its buttons taken
    off when the next turn is shown, an undone mark) goes through the same token, off the global
    budget, as any follow-up's edit may ("Edit Followup Message", discord-api-docs, Receiving
    and Responding). Past the token's :data:`USE_BY`, or unknown here (another process, a
    restart), a message is edited by the bot's token as before. At most ``limit`` are kept."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._by_message: OrderedDict[int, discord.Interaction] = OrderedDict()

    def add(self, interaction: discord.Interaction, message_ids: list[int]) -> None:
        for message_id in message_ids:
            self._by_message[message_id] = interaction
            self._by_message.move_to_end(message_id)
        now = discord.utils.utcnow()
        while self._by_message:
            oldest = next(iter(self._by_message.values()))
            if len(self._by_message) <= self.limit and now - oldest.created_at < USE_BY:
                break
            self._by_message.popitem(last=False)

    def token_for(self, message_id: int) -> discord.Interaction | None:
        """The interaction whose token may edit ``message_id`` now, if this process knows one."""
        interaction = self._by_message.get(message_id)
        if interaction is None or discord.utils.utcnow() - interaction.created_at >= USE_BY:
            return None
        return interaction

    def forget(self, interaction_id: int) -> None:
        """Discord refused this interaction's token: none of its messages goes through it."""
        for message_id in [m for m, i in self._by_message.items() if i.id == interaction_id]:
            del self._by_message[message_id]
