"""/card import: a story-card file merged into the adventure here or a library scenario, as AI
Dungeon imports story cards into adventures and scenarios
(help.aidungeon.com/story-cards-import-and-export).

A preview comes first (``engine.play.card_imports``: the format, the new cards, the cards they
replace, what is left out and why), with Import and Cancel for whoever attached the file; nothing
is written until Import. The ``/card`` group belongs to the steering cog; this cog adds its
command to that group when it loads and takes it out when it unloads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands

from cogs.ui import bot_of
from cogs.ui.adventure_group import CardCommands
from cogs.ui.content import EMBED_FIELD_VALUE_MAX as FIELD_MAX
from cogs.ui.content import fit_embed, fit_text
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.previews import FilePreview
from engine.errors import CampfireError
from engine.platform.sanitise import echo
from engine.play.card_imports import TITLES_NAMED, CardImportPreview, CardPlace

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

CARDS_COLOUR = discord.Colour.dark_gold()


def _cards(count: int) -> str:
    return f"{count:,} story card{'s' if count != 1 else ''}"


def _place(place: CardPlace) -> str:
    title = discord.utils.escape_markdown(place.title)
    if place.is_adventure:
        return f"the adventure here, **{title}**"
    return f"the scenario **{title}**"


def _titles(titles: list[str] | tuple[str, ...]) -> str:
    shown = ", ".join(f"“{discord.utils.escape_markdown(t)}”" for t in titles[:TITLES_NAMED])
    if len(titles) > TITLES_NAMED:
        shown += f" and {len(titles) - TITLES_NAMED:,} more"
    return shown


def preview_embed(preview: CardImportPreview) -> discord.Embed:
    merge = preview.merge
    embed = discord.Embed(
        title=echo(f"Story cards for {preview.place.title}", 256),
        description=(
            f"Into {_place(preview.place)}. Cards with the title of a card there (or, failing "
            "that, the same keys) replace it; the others are added after its cards."
        ),
        colour=CARDS_COLOUR,
    )
    embed.add_field(name="Format", value=preview.format, inline=False)
    embed.add_field(name="In the file", value=f"{preview.in_file:,}")
    embed.add_field(name="New", value=f"{merge.kept:,}")
    embed.add_field(name="Replacing", value=f"{merge.replaced:,}")
    if merge.replaced:
        embed.add_field(
            name="Replaced (same title or keys)",
            value=echo(_titles(merge.replaced_titles), FIELD_MAX),
            inline=False,
        )
    if merge.left_out:
        embed.add_field(
            name=f"Left out ({merge.left_out:,})",
            value=echo(
                f"{merge.why_left_out} The first new cards fit; from "
                f"{_titles(preview.left_out_titles)} on, they are left out.",
                FIELD_MAX,
            ),
            inline=False,
        )
    notes = list(preview.warnings)
    if preview.masked:
        notes.append(f"{_cards(preview.masked)} had words banned here masked.")
    if notes:
        embed.add_field(
            name="Warnings",
            value=echo("\n".join(f"⚠ {note}" for note in notes), FIELD_MAX),
            inline=False,
        )
    embed.set_footer(text="Nothing is saved until you press Import.")
    return embed


class CardImportView(FilePreview):
    """Import or Cancel under a preview; only the member who attached the file may press."""

    def __init__(self, bot: CampfireBot, preview: CardImportPreview) -> None:
        super().__init__(preview.actor)
        self.bot = bot
        self.preview = preview
        # What Import writes is said on the button itself.
        self.confirm.label = f"Import {_cards(preview.merge.writes)}"

    @discord.ui.button(label="Import", style=discord.ButtonStyle.success, emoji="✅")
    async def confirm(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        self.stop()
        # The preview is edited in place once the cards are written.
        await interaction.response.defer()
        try:
            done = await self.bot.services.card_imports.confirm(self.preview)
        except CampfireError as error:
            await interaction.edit_original_response(
                content=fit_text(f"⚠ {error.message}"), embed=None, view=None
            )
            return
        parts = []
        if done.added:
            parts.append(f"{_cards(done.added)} added")
        if done.replaced:
            parts.append(f"{_cards(done.replaced)} replaced")
        where = _place(done.place)
        when = (
            "they apply from the next turn"
            if done.place.is_adventure
            else "adventures started from it from now on have them (running ones keep theirs)"
        )
        await interaction.edit_original_response(
            content=fit_text(f"✅ {where[0].upper()}{where[1:]}: {', '.join(parts)}; {when}."),
            embed=None,
            view=None,
        )

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary)
    async def cancel(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        await self.cancelled(interaction)


@app_commands.command(name="import")
@app_commands.describe(
    file="Story cards: AI Dungeon, SillyTavern, NovelAI, KoboldAI Lite or Character Card JSON",
    scenario="A scenario of the library to add them to, instead of the adventure here",
)
async def import_cards(
    interaction: discord.Interaction, file: discord.Attachment, scenario: str | None = None
) -> None:
    """Add story cards from a file to the adventure here or a scenario (a preview first)."""
    bot = bot_of(interaction)
    imports = bot.services.card_imports
    actor, where = actor_of(interaction), channel_id_of(interaction)
    # Refused before the download: no one waits on a file they could not import.
    await imports.place(actor, where, scenario)
    bot.services.scenarios.check_size(file.size)
    await interaction.response.defer(ephemeral=True, thinking=True)
    preview = await imports.preview(actor, where, await file.read(), file.filename, scenario)
    view = CardImportView(bot, preview)
    view.message = await interaction.followup.send(
        embed=fit_embed(preview_embed(preview)), view=view, ephemeral=True, wait=True
    )


@import_cards.autocomplete("scenario")
async def scenario_choices(
    interaction: discord.Interaction, current: str
) -> list[app_commands.Choice[str]]:
    choices = await bot_of(interaction).services.play.scenario_choices(
        actor_of(interaction), current
    )
    return [app_commands.Choice(name=label, value=value) for label, value in choices]


#: The /card group is the steering cog's: it must be there to add to (``cogs.ui.discovery``).
LOAD_AFTER = ("cogs.steering",)


class CardFilesCog(CardCommands):
    """Adds ``/card import`` to the steering cog's ``/card`` group."""

    COMMANDS = (import_cards,)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(CardFilesCog(bot))
