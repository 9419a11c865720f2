"""The question asked before a command ends an adventure: go ahead, or keep playing.

Asked privately, to the player whose command it was (the message is ephemeral), so only they
press it: /start or /adventure import where an adventure runs, /adventure resume where
another one runs, /adventure end. Keep playing changes nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import discord

from cogs.ui.errors import on_app_command_error

#: How long the question waits for an answer, in seconds.
ASK_TIMEOUT_S = 600

#: What Keep playing answers.
NOTHING_CHANGED = "Nothing changed: the adventure here goes on."


class AskFirst(discord.ui.View):
    """Two buttons: ``go_label`` (red) runs ``go`` with the press; Keep playing changes
    nothing. ``go`` acknowledges the press itself before it writes anything."""

    def __init__(
        self,
        go_label: str,
        go: Callable[[discord.Interaction], Awaitable[None]],
        *,
        kept: str = NOTHING_CHANGED,
    ) -> None:
        super().__init__(timeout=ASK_TIMEOUT_S)
        self.go = go
        self.kept = kept
        confirm: discord.ui.Button = discord.ui.Button(
            label=go_label, style=discord.ButtonStyle.danger
        )
        cancel: discord.ui.Button = discord.ui.Button(
            label="Keep playing", style=discord.ButtonStyle.secondary
        )
        # discord.py's way to answer a button made on the fly; a checker sees a method.
        confirm.callback = self._confirm  # type: ignore[method-assign]
        cancel.callback = self._cancel  # type: ignore[method-assign]
        self.add_item(confirm)
        self.add_item(cancel)

    async def _confirm(self, interaction: discord.Interaction) -> None:
        self.stop()
        await self.go(interaction)

    async def _cancel(self, interaction: discord.Interaction) -> None:
        self.stop()
        await interaction.response.edit_message(content=self.kept, view=None)

    async def on_error(
        self, interaction: discord.Interaction, error: Exception, _item: discord.ui.Item
    ) -> None:
        await on_app_command_error(interaction, error)
