"""Editing messages the bot showed earlier: marking undone turns, moving the story buttons.

Such a message may be hours old and its interaction long gone, so it is edited as a channel
message, by channel and message id (``PATCH /channels/{channel}/messages/{message}``), never
through an interaction's token, which answers for 15 minutes only (discord-api-docs,
"Receiving and Responding": "Interaction tokens are valid for 15 minutes"; past that, 401 with
code 50027). That route lets "the original message author" edit content, embeds and components
(discord-api-docs, Message, "Edit Message"), and the author of an interaction's response is
the bot user, so the line an interaction answered with can be marked later the same way, as
long as it is not ephemeral (an ephemeral message is unknown to that route: 10008). The channel
may not be in discord.py's cache (a DM after a restart, an archived thread the gateway has not
synced): then a partial messageable stands for it, which needs only the id.

Every edit waits for the channel's slot in the ``RatePacer``, and a refusal is final for what
it concerns: nothing here retries in a loop, and nothing is an error in the log.

* 10008 Unknown Message: the message was deleted; its link is forgotten.
* 30046 (too many edits of messages older than an hour), 50083 (an archived thread), a
  403 (the bot may no longer see or post there) and 10003 (the channel is gone): every other
  edit of this round in that channel would be refused as well, so the round stops there. After
  30046 a new message is still taken (the buttons go on one); after the others, nothing is.

Edits of messages older than an hour are few on Discord (30046), and its 429 for them carries
the rate-limit headers, so discord.py would sleep its ``retry_after`` and try again up to five
times, each try one more invalid request: an undo in a story left for an hour would stall for
minutes. So Campfire gives up early, twice over: it keeps under a budget of its own for such
edits (``OldEdits``: an hour-old message is known by its id, a snowflake holding its time),
and an edit that waits longer than ``EDIT_PATIENCE_S`` (discord.py sleeping on a 429, past
the channel window's own reset) is given up as a 30046 would be. discord.py's
``max_ratelimit_timeout`` cannot do this: it has a floor of 30 s and holds for every route.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

import discord

from cogs.ui.bot_permissions import PLACE_GONE, is_final_refusal
from cogs.ui.narration_routes import INTERACTION_GONE, RecentFollowups
from cogs.ui.pacing import interaction_window
from engine.play.message_links import MessageLink, MessageLinks

if TYPE_CHECKING:
    from cogs.ui import ChannelsClient
    from cogs.ui.pacing import RatePacer

log = logging.getLogger(__name__)

UNKNOWN_MESSAGE = 10008
OLD_MESSAGE_EDITS = 30046

#: The longest an edit of an earlier message may take, waits on rate limits included. An edit
#: that spends its channel's window returns only once the window resets (discord.py sleeps
#: ``X-RateLimit-Reset-After`` before it gives the answer back, up to the 5 s of a channel's
#: message window), so a landed edit may take that long; only discord.py sleeping on a 429 and
#: trying again takes longer. Past it the edit is given up, as after a 30046.
EDIT_PATIENCE_S = 10.0

#: A message older than this is "older than 1 hour" to Discord's 30046.
OLD_MESSAGE_AGE_S = 3600.0
#: Campfire's own budget for edits of such messages, per channel. Discord documents neither
#: the number nor the window ("We dont put rate limit details in our documentation",
#: discord-api-docs issue 4413); bot authors report about three per channel in 20 s
#: (starboard-4 issue 118). Three in any 60 s keeps well under that.
OLD_EDITS = 3
OLD_EDITS_PERIOD_S = 60.0

#: Channels discord.py caches whose messages can be named by id (``get_partial_message``).
_WITH_MESSAGES = (
    discord.TextChannel,
    discord.Thread,
    discord.DMChannel,
    discord.VoiceChannel,
    discord.StageChannel,
)


class Edited(Enum):
    DONE = "done"
    #: The message is gone (a story message's link is forgotten).
    GONE = "gone"
    #: Discord takes no more edits of old messages there for now (30046); a new message would
    #: still be taken. No more edits there this round.
    TOO_OLD = "too old"
    #: The channel refuses the bot (archived and locked, no access, gone): nothing more there
    #: this round, a new message included.
    CHANNEL_REFUSED = "channel refused"
    #: This edit failed (a server error past discord.py's own retries); the next may land.
    FAILED = "failed"


def message_at(bot: ChannelsClient, channel_id: int, message_id: int) -> discord.PartialMessage:
    """The message by its ids alone, through the cached channel when there is one."""
    channel = bot.get_channel(channel_id)
    if isinstance(channel, _WITH_MESSAGES):
        return channel.get_partial_message(message_id)
    return bot.get_partial_messageable(channel_id).get_partial_message(message_id)


class OldEdits:
    """Campfire's budget for edits of messages older than an hour, per channel.

    Per process, and safe so: a channel is in one server, a server on one shard, and a shard
    in one process, so no other process edits in this channel (DMs excepted, where edits of
    old messages are rare: an undo in a DM story left for an hour)."""

    def __init__(self) -> None:
        self._edits: dict[int, deque[float]] = {}

    def take(self, channel_id: int, message_id: int, now: datetime, clock: float) -> bool:
        """May the bot edit ``message_id`` now? A message under an hour old always; an older
        one while the channel's budget lasts (counting it)."""
        age = (now - discord.utils.snowflake_time(message_id)).total_seconds()
        if age < OLD_MESSAGE_AGE_S:
            return True
        edits = self._edits.setdefault(channel_id, deque())
        while edits and clock - edits[0] >= OLD_EDITS_PERIOD_S:
            edits.popleft()
        if len(edits) >= OLD_EDITS:
            return False
        edits.append(clock)
        return True


class EarlierMessages:
    """Edits of messages shown earlier, by id, paced, giving up gracefully."""

    def __init__(self, bot: ChannelsClient, pacer: RatePacer, links: MessageLinks) -> None:
        self.bot = bot
        self.pacer = pacer
        self.links = links
        self.old_edits = OldEdits()
        self.followups = RecentFollowups()

    def round(self) -> EditRound:
        """A new round of edits (one head move's, one turn's)."""
        return EditRound(self)

    async def edit_message(self, channel_id: int, message_id: int, **fields: Any) -> Edited:
        """An earlier message that shows no story node (a round's panel), by its ids."""
        edited, _ = await self._edit(channel_id, message_id, fields)
        return edited

    async def _edit(
        self, channel_id: int, message_id: int, fields: dict[str, Any]
    ) -> tuple[Edited, discord.HTTPException | None]:
        where = f"message {message_id} in {channel_id}"
        now, clock = discord.utils.utcnow(), self.pacer.clock()
        if not self.old_edits.take(channel_id, message_id, now, clock):
            log.info("holding back an edit of an hour-old message (%s): Campfire's budget", where)
            return Edited.TOO_OLD, None
        interaction = self.followups.token_for(message_id)
        if interaction is not None:
            # A follow-up of a token that still answers: edited through it, off the global
            # budget (cogs.ui.narration_routes); by the bot's token if Discord refuses it.
            await self.pacer.acquire(
                interaction_window(interaction.id), urgent=True, global_budget=False
            )
            try:
                async with asyncio.timeout(EDIT_PATIENCE_S):
                    await interaction.followup.edit_message(message_id, **fields)
                return Edited.DONE, None
            except discord.HTTPException as error:
                if error.code not in INTERACTION_GONE:
                    return self._refused(where, error), error
                self.followups.forget(interaction.id)
            except TimeoutError:
                log.info("gave up an edit of %s after %.0f s", where, EDIT_PATIENCE_S)
                return Edited.TOO_OLD, None
        await self.pacer.acquire(channel_id)
        try:
            async with asyncio.timeout(EDIT_PATIENCE_S):
                await message_at(self.bot, channel_id, message_id).edit(**fields)
        except discord.HTTPException as error:
            return self._refused(where, error), error
        except TimeoutError:
            log.info("gave up an edit of %s after %.0f s (a rate limit)", where, EDIT_PATIENCE_S)
            return Edited.TOO_OLD, None
        return Edited.DONE, None

    @staticmethod
    def _refused(where: str, error: discord.HTTPException) -> Edited:
        if error.code == UNKNOWN_MESSAGE:
            log.info("%s is gone", where)
            return Edited.GONE
        if error.code == OLD_MESSAGE_EDITS:
            log.info("Discord refuses more edits of old messages for now (%s)", where)
            return Edited.TOO_OLD
        if error.code in PLACE_GONE:
            log.info("cannot edit %s: %s %s", where, error.status, error.text)
            return Edited.CHANNEL_REFUSED
        if error.status == 403:
            log.warning("no longer allowed to edit %s: %s %s", where, error.code, error.text)
            return Edited.CHANNEL_REFUSED
        log.warning("could not edit %s: %s %s", where, error.status, error.text)
        return Edited.FAILED


class EditRound:
    """The edits of one head move or one turn: a channel that refuses one (see the module's
    notes) is not asked again in this round, so a refusal is met once, not once a message."""

    def __init__(self, messages: EarlierMessages) -> None:
        self._messages = messages
        self._refused: dict[int, Edited] = {}
        #: The first refusal of the bot's permissions met (403: 50001, 50013, 50007), which
        #: the player is told of once.
        self.refusal: discord.HTTPException | None = None
        #: Edits given up because Discord takes no more edits of hour-old messages for now
        #: (30046, Campfire's own budget or a rate limit's wait), which the player is told of.
        self.held_back = 0

    def refused_by(self, error: discord.HTTPException) -> None:
        """Note a refusal met outside ``edit`` (a new message sent in this round)."""
        if self.refusal is None and is_final_refusal(error):
            self.refusal = error

    async def edit(self, link: MessageLink, **fields: Any) -> Edited:
        """Edit one message (``fields`` as for ``PartialMessage.edit``)."""
        edited = self._refused.get(link.channel_id)
        if edited is None:
            edited, error = await self._messages._edit(link.channel_id, link.message_id, fields)
            if edited is Edited.GONE:
                await self._messages.links.forget([link.message_id])
            if edited in (Edited.TOO_OLD, Edited.CHANNEL_REFUSED):
                self._refused[link.channel_id] = edited
            if error is not None:
                self.refused_by(error)
        if edited is Edited.TOO_OLD:
            self.held_back += 1
        return edited

    async def edit_all(self, links: Iterable[MessageLink], **fields: Any) -> None:
        """The same edit on each message, in order."""
        for link in links:
            await self.edit(link, **fields)
