"""Who runs the bot, and whom it refuses: the operator test and the block check, for every
command and button.

Forms are checked as they are submitted (``GatedForm``): a form opened before a block must not act
after it. A plain message that would play is checked too (``message_blocked``).

The operator is the Discord application's owner (``Client.is_owner``: discord.py asks Discord
once, ``application_info``, and keeps the answer; a team's members all are) or a user named in
``CAMPFIRE_OPERATOR_IDS``. The block check runs in one helper, called before every command
(``cogs.ui.preflight.CampfireTree``) and every persistent button (the ``DynamicItem`` checks);
whom it refuses is ``engine.people.access``'s rule.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

import discord

from cogs.ui.interaction import actor_of
from engine.errors import NotAllowed
from engine.people.access.rules import Actor

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

log = logging.getLogger(__name__)


async def is_operator(bot: CampfireBot, user: discord.abc.User) -> bool:
    if user.id in bot.settings.operator_ids:
        return True
    try:
        return await bot.is_owner(user)
    except discord.HTTPException:
        log.warning("could not ask Discord who owns the application", exc_info=True)
        return False


async def operator_actor(interaction: discord.Interaction) -> Actor:
    """``actor_of``, with whether they run this bot."""
    bot: Any = interaction.client
    return dataclasses.replace(
        actor_of(interaction), is_operator=await is_operator(bot, interaction.user)
    )


async def refused_as_blocked(interaction: discord.Interaction) -> bool:
    """Whether the operator blocked whoever sent this (or its server); if so they are told,
    privately and politely, and nothing runs."""
    services = getattr(interaction.client, "services", None)
    if services is None:
        return False
    user, server = services.blocks.is_blocked(interaction.user.id, interaction.guild_id)
    if not (user or server):
        return False  # the common case: no database, no Discord lookup
    try:
        services.blocks.check(await operator_actor(interaction))
    except NotAllowed as refusal:
        log.info("interaction %s refused: blocked", interaction.id)
        try:
            await interaction.response.send_message(f"⚠ {refusal.message}", ephemeral=True)
        except discord.HTTPException:
            log.warning("could not answer interaction %s", interaction.id, exc_info=True)
        return True
    return False


class GatedForm(discord.ui.Modal):
    """A form (modal) whose submission is refused, as a command is, when its sender or their
    server is blocked: every form of Campfire's is one."""

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return not await refused_as_blocked(interaction)


async def message_blocked(bot: CampfireBot, message: discord.Message) -> bool:
    """Whether the operator blocked the author of ``message`` or its server (the operator
    never is). Plain messages are not answered when refused: a blocked user's chat is left
    alone, and they learn of the block at their next command."""
    server_id = message.guild.id if message.guild is not None else None
    user, server = bot.services.blocks.is_blocked(message.author.id, server_id)
    if not (user or server):
        return False
    actor = Actor(
        user_id=message.author.id,
        user_name=message.author.display_name,
        server_id=server_id,
        is_operator=await is_operator(bot, message.author),
    )
    try:
        bot.services.blocks.check(actor)
    except NotAllowed:
        log.info("message %s not played: blocked", message.id)
        return True
    return False
