"""The view under an import's preview (a scenario, a knowledge file): only whoever attached
the file may press; Cancel saves nothing; an unanswered preview expires and says so. Each
import adds its own Confirm, and its Cancel button calling ``cancelled``."""

from __future__ import annotations

import logging

import discord

from cogs.ui.replies import reply
from engine.people.access.rules import Actor

log = logging.getLogger(__name__)

#: How long a preview waits for Confirm.
PREVIEW_SECONDS = 600


class FilePreview(discord.ui.View):
    def __init__(self, actor: Actor) -> None:
        super().__init__(timeout=PREVIEW_SECONDS)
        self.actor = actor
        #: The preview's message, to mark it expired.
        self.message: discord.WebhookMessage | None = None

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if interaction.user.id != self.actor.user_id:
            await reply(interaction, "This preview belongs to whoever attached the file.")
            return False
        return True

    async def cancelled(self, interaction: discord.Interaction) -> None:
        self.stop()
        await interaction.response.edit_message(
            content="Import cancelled; nothing was saved.", embed=None, view=None
        )

    async def on_timeout(self) -> None:
        if self.message is not None:
            try:
                await self.message.edit(
                    content="This preview expired; nothing was saved. Attach the file again.",
                    embed=None,
                    view=None,
                )
            except discord.HTTPException:
                log.debug("could not mark an import preview expired", exc_info=True)
