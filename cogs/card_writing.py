"""/card generate: the model writes a story card about someone or something in the story; the
player sees it privately and adds it, or not.

The command is added to the steering cog's ``/card`` group (hence ``LOAD_AFTER``). The card is
proposed by ``engine.story.steering.card_writer`` and added through ``StoryCards.add``, which
checks the right and the room again when the player presses Add: the adventure may have ended,
or filled up, while the preview waited."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands

from cogs.ui import bot_of
from cogs.ui.adventure_group import CardCommands
from cogs.ui.card_proposals import proposal_embed
from cogs.ui.content import fit_text
from cogs.ui.errors import on_app_command_error
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.replies import reply
from engine.errors import InvalidInput
from engine.story.steering.card_writer import CardProposal

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

LOAD_AFTER = ("cogs.steering",)

#: How long the preview's buttons wait, in seconds.
PREVIEW_TIMEOUT_S = 600


class CardProposalView(discord.ui.View):
    """Add this card, or discard it; both only for the player who asked (the preview is
    ephemeral: no one else sees its buttons)."""

    def __init__(self, proposal: CardProposal) -> None:
        super().__init__(timeout=PREVIEW_TIMEOUT_S)
        self.proposal = proposal

    @discord.ui.button(label="Add card", style=discord.ButtonStyle.success)
    async def add(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        self.stop()
        # Acknowledged before the card is written: the answer replaces the preview.
        await interaction.response.defer()
        try:
            saved = await bot_of(interaction).services.story_cards.add(
                channel_id_of(interaction),
                actor_of(interaction),
                self.proposal.draft,
                adventure_id=self.proposal.adventure_id,
            )
        except InvalidInput as error:
            await interaction.edit_original_response(
                content=fit_text(f"⚠ The card was not added: {error.message}"), view=None
            )
            return
        await interaction.edit_original_response(
            content=fit_text(
                f"Story card “{saved.title}” added; it applies from the next turn. "
                "`/card edit` changes it."
            ),
            view=None,
        )

    @discord.ui.button(label="Discard", style=discord.ButtonStyle.secondary)
    async def discard(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        self.stop()
        await interaction.response.edit_message(
            content="Discarded: no card was added.", embed=None, view=None
        )

    async def on_error(
        self, interaction: discord.Interaction, error: Exception, _item: discord.ui.Item
    ) -> None:
        await on_app_command_error(interaction, error)


@app_commands.command(name="generate")
@app_commands.describe(
    name="Whom or what the card is about; leave empty for the name the story mentions most "
    "that has no card yet"
)
async def card_generate(
    interaction: discord.Interaction, name: app_commands.Range[str, 1, 100] | None = None
) -> None:
    """Have the model write a story card from the story; you see it before it is added."""
    await interaction.response.defer(thinking=True, ephemeral=True)
    proposal = await bot_of(interaction).services.card_writer.propose(
        channel_id_of(interaction), actor_of(interaction), name
    )
    about = (
        f"The story mentions **{proposal.subject}** most without a card, so the model wrote "
        "this one. Add it?"
        if proposal.chosen
        else "The model wrote this card. Add it?"
    )
    await reply(
        interaction, about, embed=proposal_embed(proposal.draft), view=CardProposalView(proposal)
    )


class CardWriting(CardCommands):
    """Adds ``/card generate`` to the steering cog's ``/card`` group."""

    COMMANDS = (card_generate,)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(CardWriting(bot))
