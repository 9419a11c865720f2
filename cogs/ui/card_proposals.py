"""Cards the story proposes to the host every few turns (``engine.story.steering.card_proposals``):
how a proposal reaches the host, and their Add card and Discard buttons (here in ``cogs.ui``, as
every persistent button is: a cog module declares commands, ``cogs.ui`` what messages show); a
written card's embed, shared with /card generate.

A proposal is shown to the host alone: as an ephemeral follow-up of their own interaction when
it was theirs that played the turn (its token is good for 15 minutes:
``cogs.ui.recent_interactions``), by DM otherwise. A DM the host has closed to the bot
(Discord's 50007, "Cannot send messages to this user") is not retried: the proposal is dropped
with a log line, and the next one comes a few turns later.

The buttons are persistent (``cf:cp:<proposal>:add|drop``): the proposal is stored, so any
process answers a press, after a restart too, and the ``custom_id`` holds only its row's number
(a ``custom_id`` is whatever the client sends; discord-api-docs, Message Components). Whether
the presser may add it is the engine's to say: only the host it was proposed to
(``check_may_take_card_proposal``); a forged press is refused to its presser alone.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Literal

import discord

from cogs.ui import bot_of
from cogs.ui.bot_permissions import CANNOT_MESSAGE_USER
from cogs.ui.content import EMBED_DESCRIPTION_MAX, fit_embed, fit_text
from cogs.ui.gate import refused_as_blocked
from cogs.ui.interaction import actor_of
from engine.errors import CampfireError
from engine.platform.sanitise import ROW_ID_MAX, echo, row_id
from engine.story.steering.card_proposals import ProposedCard
from engine.story.steering.cards import CardDraft

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

log = logging.getLogger(__name__)

Choice = Literal["add", "drop"]

CARD_COLOUR = discord.Colour.dark_gold()


def proposal_embed(draft: CardDraft) -> discord.Embed:
    """The proposed card as the player will see it in /card list, before it is added (also a
    card the story proposes to the host: ``deliver`` below)."""
    embed = discord.Embed(
        title=fit_text(f"📇 {draft.title}", 256),
        description=draft.entry[:EMBED_DESCRIPTION_MAX],
        colour=CARD_COLOUR,
    )
    embed.add_field(name="Type", value=draft.type, inline=True)
    embed.add_field(
        name="Keys", value=echo(draft.keys.replace(",", ", "), 1024) or "—", inline=True
    )
    return fit_embed(embed)


class CardProposalButton(
    discord.ui.DynamicItem[discord.ui.Button],
    template=r"cf:cp:(?P<proposal>\d+):(?P<choice>add|drop)",
):
    """Add card, or Discard, under a card the story proposed."""

    def __init__(self, proposal_id: int, choice: Choice) -> None:
        self.proposal_id = proposal_id
        self.choice: Choice = choice
        super().__init__(
            discord.ui.Button(
                label="Add card" if choice == "add" else "Discard",
                style=discord.ButtonStyle.success
                if choice == "add"
                else discord.ButtonStyle.secondary,
                custom_id=f"cf:cp:{proposal_id}:{choice}",
            )
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> CardProposalButton:
        # A forged number beyond any row's is 0: it names nothing, and the press is refused.
        choice: Choice = "add" if match["choice"] == "add" else "drop"
        return cls(row_id(match["proposal"], ROW_ID_MAX) or 0, choice)

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return not await refused_as_blocked(interaction)

    async def callback(self, interaction: discord.Interaction) -> None:
        add = self.choice == "add"
        # Acknowledged before the database is asked anything: the answer edits the proposal.
        await interaction.response.defer()
        try:
            saved = await bot_of(interaction).services.card_proposals.settle(
                self.proposal_id, actor_of(interaction), add=add
            )
        except CampfireError as error:
            verb = "added" if add else "discarded"
            await interaction.followup.send(
                fit_text(f"⚠ The card was not {verb}: {error.message}"), ephemeral=True
            )
            return
        if saved is None:
            content = "Discarded: no card was added."
        else:
            content = (
                f"Story card “{saved.title}” added; it applies from the next turn. "
                "`/card edit` changes it."
            )
        await interaction.edit_original_response(content=fit_text(content), view=None)


def proposal_view(proposal_id: int) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(CardProposalButton(proposal_id, "add"))
    view.add_item(CardProposalButton(proposal_id, "drop"))
    return view


def proposal_text(proposed: ProposedCard, *, in_dm: bool) -> str:
    where = f" in <#{proposed.channel_id}>" if in_dm and proposed.channel_id else ""
    title = discord.utils.escape_markdown(proposed.adventure_title)
    subject = discord.utils.escape_markdown(proposed.subject)
    return fit_text(
        f"📇 **{title}**{where} has played {proposed.turn} turns, and the story mentions "
        f"**{subject}** most without a card, so the model wrote this one. Add it? "
        "Nothing is added unless you press Add card. "
        "(`/adventure settings card_proposals: 0` stops these proposals.)"
    )


async def deliver(bot: CampfireBot, proposed: ProposedCard, request_id: int | None) -> None:
    """Show ``proposed`` to its host: through their own interaction if it played the turn,
    else by DM; a DM they closed drops it (logged, not retried)."""
    embed = proposal_embed(proposed.draft)
    interaction = bot.narrator.interactions.take(request_id)
    if interaction is not None and interaction.user.id == proposed.host_id:
        try:
            await interaction.followup.send(
                proposal_text(proposed, in_dm=False),
                embed=embed,
                view=proposal_view(proposed.id),
                ephemeral=True,
            )
            return
        except discord.HTTPException as error:
            # The token may have lapsed meanwhile: the DM still reaches them.
            log.info("card proposal %s: follow-up refused (%s); by DM", proposed.id, error.status)
    try:
        user = bot.get_user(proposed.host_id) or await bot.fetch_user(proposed.host_id)
        await user.send(
            proposal_text(proposed, in_dm=True), embed=embed, view=proposal_view(proposed.id)
        )
    except discord.Forbidden as error:
        if error.code == CANNOT_MESSAGE_USER:
            log.info(
                "card proposal %s dropped: user %s does not take DMs from the bot",
                proposed.id,
                proposed.host_id,
            )
            return
        log.warning("card proposal %s not sent: %s", proposed.id, error)
    except discord.HTTPException as error:
        log.warning("card proposal %s not sent: %s", proposed.id, error)
