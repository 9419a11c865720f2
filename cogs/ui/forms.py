"""What the cogs' Discord forms (modals) share: Discord's limits on them, how long one stays
answerable, and how a submission that failed is answered."""

from __future__ import annotations

import discord

from cogs.ui.errors import on_app_command_error

#: Discord's most for one text input, and so for a form prefilled with a stored value.
TEXT_INPUT_MAX = 4000
#: Discord's most for a form's title.
MODAL_TITLE_MAX = 45
#: How long a form stays answerable; one left open longer is simply gone.
FORM_TIMEOUT_S = 30 * 60


async def on_form_error(interaction: discord.Interaction, error: Exception) -> None:
    """A form's submission failed: answered as a failed command is."""
    await on_app_command_error(interaction, error)
