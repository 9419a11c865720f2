"""/model set|show|test|clear: the model a server's adventures use (its managers choose), or a
player's own adventures in a DM.

Each command answers privately: a URL is the chooser's business, and a key is never shown to
anyone again, only that one is set and how it ends. Who may choose is ``engine.people.access``'s
rule;
the address rule is ``engine.llm.providers.endpoint_policy``'s, checked before anything is stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.interaction import actor_of
from cogs.ui.replies import reply
from engine.llm.model_settings import ModelView
from engine.platform.redaction import host_of, redact_url

if TYPE_CHECKING:
    from cogs.ui import CampfireBot


def _whose(view: ModelView) -> str:
    return "This server's adventures" if view.place == "server" else "Your own adventures"


def view_text(view: ModelView, operator_label: str) -> str:
    """``/model show``: whose model is used here; of a key, only its last characters."""
    if view.url is None:
        mine = (
            "This server has no model of its own"
            if view.place == "server"
            else ("You have no model of your own")
        )
        return (
            f"{mine}: {_whose(view).lower()} use the operator's model "
            f"({discord.utils.escape_markdown(operator_label)})."
        )
    if view.picked:
        return (
            f"{_whose(view)} use **{discord.utils.escape_markdown(view.model or '')}**, picked "
            "from the operator's models (`/model clear` goes back to the operator's default)."
        )
    key = f"set, ends in …{view.key_tail}" if view.key_tail else "none"
    if view.key_tail == "…":
        key = "set"
    return (
        f"{_whose(view)} use **{discord.utils.escape_markdown(view.model or '')}** at "
        f"`{redact_url(view.url)}`.\nAPI key: {key}."
    )


class ModelCog(commands.Cog):
    model = app_commands.Group(
        name="model",
        description="The model this server's adventures use, or your own adventures in a DM",
        allowed_contexts=app_commands.AppCommandContext(guild=True, dm_channel=True),
    )

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @model.command(name="set")
    @app_commands.describe(
        url="An OpenAI-compatible endpoint, e.g. https://api.example.com/v1",
        model="The model's name at that endpoint",
        key="Its API key (stored encrypted, never shown again); leave out to keep the stored one",
    )
    async def set_(
        self,
        interaction: discord.Interaction,
        url: app_commands.Range[str, 1, 500],
        model: app_commands.Range[str, 1, 200],
        key: app_commands.Range[str, 1, 1000] | None = None,
    ) -> None:
        """Use your own model here (in a server: Manage Server)."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        view = await self.bot.services.model_settings.set(actor_of(interaction), url, model, key)
        await reply(
            interaction,
            f"✅ {_whose(view)} now use **{discord.utils.escape_markdown(model)}** at "
            f"{host_of(view.url or url)}"
            + (f" (API key set, ends in …{view.key_tail})" if view.key_tail else "")
            + ". `/model test` checks that it answers.",
        )

    @model.command(name="pick")
    @app_commands.describe(name="One of the models the operator offers on its own endpoint")
    async def pick(
        self, interaction: discord.Interaction, name: app_commands.Range[str, 1, 200]
    ) -> None:
        """Use another of the operator's models here (in a server: Manage Server)."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        view = await self.bot.services.model_settings.pick(actor_of(interaction), name)
        await reply(interaction, f"✅ {view_text(view, self.bot.services.provider.label)}")

    @pick.autocomplete("name")
    async def _offered(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        # From the settings alone: an autocomplete has 3 s, and this needs no database.
        typed = current.casefold()
        return [
            app_commands.Choice(name=model[:100], value=model[:100])
            for model in self.bot.services.model_settings.offered()
            if typed in model.casefold()
        ][:25]

    @model.command(name="show")
    async def show(self, interaction: discord.Interaction) -> None:
        """Which model the adventures here use."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        view = await self.bot.services.model_settings.show(actor_of(interaction))
        await reply(interaction, view_text(view, self.bot.services.provider.label))

    @model.command(name="test")
    async def test(self, interaction: discord.Interaction) -> None:
        """Send the model chosen here a tiny request and say how it went."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        settings = self.bot.services.model_settings
        result = await settings.test(actor_of(interaction))
        if result is None:
            view = await settings.show(actor_of(interaction))
            await reply(interaction, view_text(view, self.bot.services.provider.label))
            return
        if result.ok:
            said = discord.utils.escape_markdown(result.said) or "(nothing)"
            await reply(interaction, f"✅ The model answered in {result.seconds:.1f} s: “{said}”")
        else:
            await reply(interaction, f"❌ The test request failed: {result.said}")

    @model.command(name="clear")
    async def clear(self, interaction: discord.Interaction) -> None:
        """Go back to the operator's model (the stored key is deleted)."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        actor = actor_of(interaction)
        cleared = await self.bot.services.model_settings.clear(actor)
        whose = "This server's adventures" if actor.server_id is not None else "Your adventures"
        if cleared is not None and cleared.on_operators_endpoint:
            await reply(
                interaction,
                f"{whose} use the operator's default model again instead of "
                f"**{discord.utils.escape_markdown(cleared.model)}**.",
            )
        elif cleared is not None:
            await reply(
                interaction,
                f"{whose} use the operator's model again; the stored URL and key were deleted.",
            )
        else:
            await reply(interaction, f"Nothing to clear: {whose.lower()} use the operator's model.")


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(ModelCog(bot))
