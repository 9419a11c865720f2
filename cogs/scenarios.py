"""The scenario library: /scenario import|export|list|show|delete (who may import is chosen
with /server importers, in cogs.server).

An import is previewed (the format detected, counts, warnings) with Confirm and Cancel buttons;
nothing is written until Confirm. The preview lives in this process for ten minutes: a restart
in between only means attaching the file again.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.adventure_files import scripts_left_out_note
from cogs.ui import bot_of
from cogs.ui.content import EMBED_FIELD_VALUE_MAX as FIELD_MAX
from cogs.ui.content import fit_embed, fit_text
from cogs.ui.interaction import actor_of
from cogs.ui.pages import ListPage, list_source, paged, show_list
from cogs.ui.previews import FilePreview
from cogs.ui.replies import reply
from engine.errors import CampfireError
from engine.library.formats import character_card
from engine.library.formats.detect import CARD_FORMATS
from engine.library.formats.draft import ImportedScenario, ScenarioDraft
from engine.library.scenarios.library import LibraryListing, ScenarioDetails, ScenarioEntry
from engine.platform.sanitise import echo

if TYPE_CHECKING:
    from cogs.ui import CampfireBot
    from engine.people.access.rules import Actor


LIBRARY_COLOUR = discord.Colour.teal()


def _scenario_line(draft: ScenarioDraft) -> str:
    parts = [f"{len(draft.cards):,} card{'s' if len(draft.cards) != 1 else ''}"]
    if draft.options:
        parts.append(f"{len(draft.options)} option{'s' if len(draft.options) != 1 else ''}")
    if draft.content_rating:
        parts.append(f"rated {draft.content_rating}")
    return f"• {draft.title} · {', '.join(parts)}"


def preview_embed(imported: ImportedScenario) -> discord.Embed:
    draft = imported.draft
    several = len(imported.scenarios) > 1
    embed = discord.Embed(
        title=echo(
            f"{len(imported.scenarios)} scenarios"
            if several
            else f"{draft.icon} {draft.title}".strip(),
            256,
        ),
        description=echo(
            "\n".join(_scenario_line(d) for d in imported.scenarios)
            if several
            else draft.description or draft.prompt or "(no description)",
            1000 if several else 600,
        ),
        colour=LIBRARY_COLOUR,
    )
    embed.add_field(name="Format", value=imported.format, inline=False)
    if draft.content_rating and not several:
        embed.add_field(name="Rated", value=draft.content_rating)
    embed.add_field(name="Story cards", value=f"{imported.card_count:,}")
    embed.add_field(name="Scripts", value=f"{imported.script_count:,}")
    if draft.options and not several:
        names = ", ".join(o.title for o in draft.options)
        embed.add_field(
            name=f"Options ({len(draft.options)})",
            value=echo(names, FIELD_MAX),
            inline=False,
        )
    if draft.openings and not several:
        embed.add_field(
            name=f"Openings ({len(draft.openings) + 1})",
            value="One is chosen at /start"
            + (
                " (group-only ones in a server)"
                if any(o.group_only for o in draft.openings)
                else ""
            ),
            inline=False,
        )
    if imported.placeholders:
        asked = ", ".join(f"`{p}`" for p in imported.placeholders)
        embed.add_field(name="Asked at /start", value=echo(asked, FIELD_MAX), inline=False)
    if draft.stat_schema:
        embed.add_field(name="World state", value="tracked (stat schema)", inline=False)
    if imported.format in CARD_FORMATS and not draft.prompt.strip():
        # A file of cards makes a scenario with no opening (a character card has its
        # greetings); most who send one want the cards in a story they have.
        embed.add_field(
            name="Story cards only",
            value="This file makes a scenario of cards with no opening. To add its cards to "
            "the adventure running here or to a scenario instead: `/card import`.",
            inline=False,
        )
    if imported.warnings:
        embed.add_field(
            name="Warnings",
            value=echo("\n".join(f"⚠ {w}" for w in imported.warnings), FIELD_MAX),
            inline=False,
        )
    if imported.cards_left_out:
        embed.set_footer(
            text=f"Nothing is saved until you press Import. {imported.cards_left_out:,} story "
            "cards past the limit are left out (see the warning)."
        )
    else:
        embed.set_footer(text="Nothing is saved until you press Confirm.")
    return embed


class ImportPreview(FilePreview):
    """Confirm or Cancel under a preview; only the member who attached the file may press."""

    def __init__(self, bot: CampfireBot, actor: Actor, imported: ImportedScenario) -> None:
        super().__init__(actor)
        self.bot = bot
        self.imported = imported
        if imported.cards_left_out:
            # Over the card cap: what Confirm saves is said on the button itself.
            kept = imported.card_count
            self.confirm.label = f"Import the first {kept:,} cards"

    @discord.ui.button(label="Confirm", style=discord.ButtonStyle.success, emoji="✅")
    async def confirm(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        self.stop()
        # The preview is edited in place once the scenario is written.
        await interaction.response.defer()
        try:
            saved = await self.bot.services.scenarios.save(self.actor, self.imported)
        except CampfireError as error:
            await interaction.edit_original_response(
                content=fit_text(f"⚠ {error.message} Nothing was imported."), embed=None, view=None
            )
            return
        parts = [f"{saved.cards:,} story card{'s' if saved.cards != 1 else ''}"]
        if saved.scripts:
            parts.append(f"{saved.scripts} script{'s' if saved.scripts != 1 else ''}")
        if saved.options:
            parts.append(f"{saved.options} option{'s' if saved.options != 1 else ''}")
        titles = [saved.title, *saved.more]
        named = ", ".join(f"**{discord.utils.escape_markdown(t)}**" for t in titles)
        what = named if not saved.more else f"{len(titles)} scenarios ({named})"
        await interaction.edit_original_response(
            content=fit_text(
                f"✅ Imported {what} into {saved.where} ({', '.join(parts)}). Play "
                f"{'it' if not saved.more else 'one'} with `/start scenario:`."
            ),
            embed=None,
            view=None,
        )

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary)
    async def cancel(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        await self.cancelled(interaction)


def _entry_line(entry: ScenarioEntry) -> str:
    title = discord.utils.escape_markdown(f"{entry.icon} {entry.title}".strip())
    extra = f"{entry.cards} card{'s' if entry.cards != 1 else ''}"
    if entry.options:
        extra += f", {entry.options} option{'s' if entry.options != 1 else ''}"
    if entry.content_rating:
        extra += f", rated {entry.content_rating}"
    return f"• {title} · {extra}"


def listing_lines(listing: LibraryListing, in_server: bool) -> list[str]:
    """The library as lines, a heading before each part (pages may cut between any two)."""
    lines: list[str] = []
    if in_server:
        lines.append("**This server**")
        lines += [_entry_line(e) for e in listing.server] or [
            "None yet: members who may import can add one with `/scenario import`."
        ]
    lines.append("**Yours**")
    lines += [_entry_line(e) for e in listing.own] or [
        "None yet: import your own with `/scenario import` in a DM with me."
    ]
    lines.append("**Shipped with Campfire**")
    lines += [_entry_line(e) for e in listing.shipped]
    return lines


@list_source("scenarios", of_adventure=False)
async def scenario_page(interaction: discord.Interaction, page: int) -> ListPage:
    # The presser's own view of the library: their server's, their own, the shipped ones.
    listing = await bot_of(interaction).services.scenarios.listing(actor_of(interaction))
    return paged(
        listing_lines(listing, interaction.guild_id is not None),
        page,
        title="Scenarios",
        empty="No scenarios.",
        colour=LIBRARY_COLOUR,
    )


def details_embed(details: ScenarioDetails) -> discord.Embed:
    embed = discord.Embed(
        title=echo(f"{details.icon} {details.title}".strip(), 256),
        description=echo(details.description or "(no description)", 1000),
        colour=LIBRARY_COLOUR,
    )
    embed.add_field(name="From", value=details.source)
    embed.add_field(name="Story cards", value=f"{details.cards:,}")
    embed.add_field(name="Scripts", value=f"{details.scripts:,}")
    embed.add_field(name="Rated", value=details.content_rating or "unrated")
    if details.tags:
        embed.add_field(name="Tags", value=echo(", ".join(details.tags), FIELD_MAX), inline=False)
    if details.options:
        embed.add_field(
            name="Options",
            value=echo(", ".join(details.options), FIELD_MAX),
            inline=False,
        )
    if details.openings:
        embed.add_field(name="Openings", value=f"{details.openings + 1}, chosen at /start")
    if details.placeholders:
        asked = ", ".join(f"`{p}`" for p in details.placeholders)
        embed.add_field(name="Asked at /start", value=echo(asked, FIELD_MAX), inline=False)
    if details.tracks_world_state:
        embed.add_field(name="World state", value="tracked", inline=False)
    if details.prompt:
        embed.add_field(name="Opening", value=echo(details.prompt, FIELD_MAX), inline=False)
    return embed


class ScenarioCog(commands.Cog):
    scenario = app_commands.Group(name="scenario", description="The scenario library")

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @scenario.command(name="import")
    @app_commands.describe(
        file="An AI Dungeon, AI-DnD, SillyTavern, NovelAI, KoboldAI or Campfire JSON file, or a "
        "character card"
    )
    async def import_(self, interaction: discord.Interaction, file: discord.Attachment) -> None:
        """Import a scenario or lorebook from a file (a preview comes first)."""
        library = self.bot.services.scenarios
        actor = actor_of(interaction)
        # Refused before the download: no one waits on a file they could not import.
        await library.check_may_import(actor)
        library.check_size(file.size, file.filename)
        await interaction.response.defer(ephemeral=True, thinking=True)
        data = await file.read()
        imported = await library.preview(actor, data, file.filename)
        view = ImportPreview(self.bot, actor, imported)
        view.message = await interaction.followup.send(
            embed=fit_embed(preview_embed(imported)), view=view, ephemeral=True, wait=True
        )

    @scenario.command(name="export")
    @app_commands.describe(
        scenario="The scenario to export",
        format="Campfire's file (the default), or a character card for SillyTavern and others",
    )
    @app_commands.choices(
        format=[
            app_commands.Choice(name="Campfire (with AI Dungeon story cards)", value="campfire"),
            app_commands.Choice(name="Character Card V2 (JSON)", value=character_card.V2),
            app_commands.Choice(name="Character Card V3 (JSON)", value=character_card.V3),
        ]
    )
    async def export(
        self, interaction: discord.Interaction, scenario: str, format: str = "campfire"
    ) -> None:
        """A scenario as a Campfire file and AI Dungeon story cards, or as a character card."""
        card = format if format in (character_card.V2, character_card.V3) else None
        exported = await self.bot.services.scenarios.export(actor_of(interaction), scenario, card)
        files = [discord.File(io.BytesIO(f.content), filename=f.filename) for f in exported.files]
        note = "" if len(files) == 1 else " (the second file is its story cards for AI Dungeon)"
        if card is not None:
            note = (
                " as a character card: its scripts, options, chapters and world state are not "
                "in it (the Campfire file keeps them)."
            )
        elif exported.scripts_left_out:
            note += scripts_left_out_note(exported.scripts_left_out)
        await interaction.response.send_message(
            fit_text(f"**{discord.utils.escape_markdown(exported.title)}**{note}"),
            files=files,
            ephemeral=True,
        )

    @scenario.command(name="list")
    async def list_(self, interaction: discord.Interaction) -> None:
        """The scenarios you can play here."""
        await show_list(interaction, "scenarios")

    @scenario.command(name="show")
    @app_commands.describe(scenario="The scenario to look at")
    async def show(self, interaction: discord.Interaction, scenario: str) -> None:
        """A scenario's description, cards, options and opening."""
        details = await self.bot.services.scenarios.show(actor_of(interaction), scenario)
        await interaction.response.send_message(
            embed=fit_embed(details_embed(details)), ephemeral=True
        )

    @scenario.command(name="delete")
    @app_commands.describe(scenario="The scenario to delete (adventures keep their copies)")
    async def delete(self, interaction: discord.Interaction, scenario: str) -> None:
        """Delete an imported scenario."""
        await interaction.response.defer(thinking=True, ephemeral=True)
        title = await self.bot.services.scenarios.delete(actor_of(interaction), scenario)
        await reply(
            interaction,
            f"Deleted **{discord.utils.escape_markdown(title)}**. Adventures started from it "
            "keep their own copies.",
        )

    @export.autocomplete("scenario")
    @show.autocomplete("scenario")
    @delete.autocomplete("scenario")
    async def scenario_choices(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        choices = await self.bot.services.play.scenario_choices(actor_of(interaction), current)
        return [app_commands.Choice(name=label, value=value) for label, value in choices]


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(ScenarioCog(bot))
