"""Playing by plain messages: in an adventure's thread or DM whose host turned it on
(``/adventure settings messages:on``), a message typed there plays as that player's action.

The convention is ``engine.play.message_actions``: text is a do, text in quotes a say, ``+`` a story
line, ``//`` or ``(`` out of character. The bot's own messages and other bots' never play. A
message plays through the same engine path as /do, with its own id as the request id, so a
message delivered twice plays once.

Discord sends a message's content to a bot without the Message Content intent only in DMs and
in messages that mention it (discord-api-docs, Change Log 2022-09-01, "Message Content is a
Privileged Intent"; Gateway, Message Content Intent). Without the intent
(``CAMPFIRE_MESSAGE_CONTENT``), a server message arrives with empty content and plays nothing;
one that mentions the bot plays, the mention taken out. A refusal (muted, locked, no adventure)
is a brief reply to the message; chat in a place with no adventure, or with message play off,
is left alone unless it names the bot.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import discord
from discord.ext import commands

from cogs.ui.bot_permissions import Does, Place, missing
from cogs.ui.gate import message_blocked
from cogs.ui.interaction import age_restricted
from engine.people.access.rules import Actor
from engine.play.message_actions import message_action
from engine.story.actions import PlayerAction

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

log = logging.getLogger(__name__)

#: Messages people type (a reply is one too); not joins, pins or other system messages.
PLAYED_TYPES = (discord.MessageType.default, discord.MessageType.reply)
MESSAGE_PLAY_OFF = (
    "Playing by plain messages is off in this adventure; its host can turn it on with "
    "`/adventure settings messages:on`."
)
NO_ADVENTURE = "There is no adventure running here. Start one with `/start`."


def without_mention(content: str, user_id: int) -> str:
    """``content`` with its mentions of ``user_id`` (``<@id>`` or ``<@!id>``) taken out."""
    return re.sub(rf"<@!?{user_id}>", " ", content).strip()


def actor_of_message(message: discord.Message) -> Actor:
    """Who plays a message: as ``cogs.ui.interaction.actor_of`` for an interaction, with the
    author's permissions in the channel worked out from the cache (a message carries none)."""
    author = message.author
    guild = message.guild
    if guild is None or not isinstance(author, discord.Member):
        return Actor(user_id=author.id, user_name=author.display_name)
    channel = message.channel
    permissions = (
        channel.permissions_for(author)
        if isinstance(channel, discord.abc.GuildChannel | discord.Thread)
        else discord.Permissions.none()
    )
    admin = permissions.administrator
    return Actor(
        user_id=author.id,
        user_name=author.display_name,
        server_id=guild.id,
        server_name=guild.name,
        manages_server=admin or permissions.manage_guild,
        manages_messages=admin or permissions.manage_messages,
        role_ids=frozenset(role.id for role in author.roles),
        age_restricted=age_restricted(channel),
    )


class MessagePlayCog(commands.Cog):
    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        me = self.bot.user
        if me is None or message.author.bot or message.webhook_id is not None:
            return
        if message.type not in PLAYED_TYPES:
            return
        if await message_blocked(self.bot, message):
            return
        direct = message.guild is None
        addressed = direct or me in message.mentions
        played = message_action(without_mention(message.content, me.id))
        if played is None:
            return
        channel_id = message.channel.id
        play = self.bot.services.play
        where_adventures_run = isinstance(message.channel, discord.Thread | discord.DMChannel)
        if not addressed and not play.places.expects_adventure(
            channel_id, unknown=where_adventures_run
        ):
            return
        on = await self.bot.services.generation_settings.message_play_here(channel_id)
        if not on:
            if addressed:
                await self.refuse(message, NO_ADVENTURE if on is None else MESSAGE_PLAY_OFF)
            return
        kind, text = played
        if not self._may_narrate(message):
            # Nothing the bot could show: nothing is played (and no note could be posted).
            log.info("message %s not played: the bot may not narrate in %s", message.id, channel_id)
            return
        events = play.act(
            actor_of_message(message),
            channel_id,
            PlayerAction(kind, text, message.author.id),
            request_id=message.id,
        )
        assert isinstance(message.channel, discord.abc.Messageable)

        async def tell(note: str) -> None:
            await self.refuse(message, note)

        await self.bot.narrator.show_unasked(message.channel, events, tell, post_actions=False)

    @staticmethod
    def _may_narrate(message: discord.Message) -> bool:
        """The permission preflight of a message's play (``cogs.ui.preflight``'s, from the
        gateway's view of the bot's permissions there, which a plain message does not carry):
        a turn is played only where its narration could be posted."""
        channel = message.channel
        guild = message.guild
        if (
            guild is None
            or guild.me is None
            or not isinstance(channel, discord.abc.GuildChannel | discord.Thread)
        ):
            return True  # a DM: no permission to lack
        place = Place.THREAD if isinstance(channel, discord.Thread) else Place.CHANNEL
        permissions = channel.permissions_for(guild.me)
        if (
            isinstance(channel, discord.Thread)
            and channel.locked
            and not (permissions.manage_threads or permissions.administrator)
        ):
            return False
        return not missing(permissions, place, Does.NARRATES)

    async def refuse(self, message: discord.Message, note: str) -> None:
        """A brief note to ``message``'s author, naming them (it pings nobody: the bot allows no
        mentions). Not a reply: a reply takes Read Message History (discord-api-docs, Message,
        Create Message: Limitations), which the invite does not ask for."""
        text = f"{message.author.mention} {note}"
        try:
            await self.bot.narrator.pacer.acquire(message.channel.id)
            await message.channel.send(text[:MESSAGE_MAX])
        except discord.HTTPException:
            log.warning("could not answer message %s", message.id, exc_info=True)


MESSAGE_MAX = 2000


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(MessagePlayCog(bot))
