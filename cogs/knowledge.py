"""The knowledge library: /knowledge import|list|show|remove|options.

Setting notes come in as ``.txt`` or ``.md`` attachments, each as Canon, Reference or
Inspiration, into the library of the place (a server's, or in a DM the player's own) or onto
the adventure running here. An import is previewed (its passages and their headings) with
Confirm and Cancel buttons, as scenarios are; nothing is written until Confirm. Who may import,
remove and change options is the engine's rule
(``engine.people.access.check_may_manage_knowledge``);
anyone may list, and read a file's text unless it is narrator only.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui import bot_of
from cogs.ui.content import EMBED_FIELD_VALUE_MAX as FIELD_MAX
from cogs.ui.content import fit_embed, fit_text
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.pages import ListPage, list_source, paged, show_list
from cogs.ui.previews import FilePreview
from cogs.ui.replies import reply
from engine.errors import CampfireError
from engine.library.knowledge.classes import RULES, KnowledgeClass
from engine.library.knowledge.library import KnowledgeDraft, SourceDetails, SourceEntry, Target
from engine.platform.sanitise import echo

if TYPE_CHECKING:
    from cogs.ui import CampfireBot
    from engine.people.access.rules import Actor


KNOWLEDGE_COLOUR = discord.Colour.dark_gold()
#: Headings a preview lists before "…and N more".
PREVIEW_HEADINGS = 12

# Discord's limits on choices (discord-api-docs, Application Commands, Application Command
# Option Choice Structure): a name of 1 to 100 characters, at most 25 choices; the names here
# are well within them.
CLASS_CHOICES = [
    app_commands.Choice(name=f"{rules.name}: {rules.meaning}", value=kind.value)
    for kind, rules in RULES.items()
]
TARGET_CHOICES = [
    app_commands.Choice(name="this place's library (every adventure here)", value=Target.LIBRARY),
    app_commands.Choice(name="the adventure running here only", value=Target.ADVENTURE),
]


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _headings(headings: list[str] | tuple[str, ...]) -> str:
    named = [h or "(before any heading)" for h in headings]
    shown = [f"• {h}" for h in named[:PREVIEW_HEADINGS]]
    if len(named) > PREVIEW_HEADINGS:
        shown.append(f"…and {len(named) - PREVIEW_HEADINGS} more")
    return echo("\n".join(shown), FIELD_MAX)


def preview_embed(draft: KnowledgeDraft) -> discord.Embed:
    rules = RULES[draft.kind]
    embed = discord.Embed(
        title=echo(f"📚 {draft.title}", 256),
        description=f"**{rules.name}** — {rules.meaning}. Goes into {draft.where}.",
        colour=KNOWLEDGE_COLOUR,
    )
    embed.add_field(name="Passages", value=f"{len(draft.chunks):,}")
    embed.add_field(name="Tokens", value=f"{draft.tokens:,}")
    flags = [
        flag
        for flag, on in (
            ("always included", draft.always_include),
            ("narrator only", draft.narrator_only),
        )
        if on
    ]
    embed.add_field(name="Options", value=", ".join(flags) or "none")
    embed.add_field(
        name="Headings", value=_headings([c.heading for c in draft.chunks]), inline=False
    )
    footer = "Nothing is saved until you press Confirm."
    if draft.replaces:
        footer = f"Confirm replaces “{draft.replaces}”. " + footer
    embed.set_footer(text=echo(footer, 2048))
    return embed


class KnowledgePreview(FilePreview):
    """Confirm or Cancel under a preview; only whoever attached the file may press."""

    def __init__(self, bot: CampfireBot, actor: Actor, draft: KnowledgeDraft) -> None:
        super().__init__(actor)
        self.bot = bot
        self.draft = draft

    @discord.ui.button(label="Confirm", style=discord.ButtonStyle.success, emoji="✅")
    async def confirm(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        self.stop()
        await interaction.response.defer()
        try:
            entry, note = await self.bot.services.knowledge.save(self.actor, self.draft)
        except CampfireError as error:
            await interaction.edit_original_response(
                content=fit_text(f"⚠ {error.message} Nothing was imported."), embed=None, view=None
            )
            return
        text = (
            f"✅ Imported **{discord.utils.escape_markdown(entry.title)}** as "
            f"{entry.flags} into {self.draft.where} ({_plural(entry.chunks, 'passage')})."
        )
        if note:
            text += f"\n{note}"
        await interaction.edit_original_response(content=fit_text(text), embed=None, view=None)

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary)
    async def cancel(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        await self.cancelled(interaction)


def entry_line(entry: SourceEntry) -> str:
    where = {"server": "server", "own": "yours", "adventure": "this adventure"}[entry.scope]
    title = discord.utils.escape_markdown(entry.title)
    return f"• **{title}** · {entry.flags} · {_plural(entry.chunks, 'passage')} · {where}"


@list_source("knowledge", of_adventure=False)
async def knowledge_page(interaction: discord.Interaction, page: int) -> ListPage:
    entries = await bot_of(interaction).services.knowledge.listing(
        actor_of(interaction), channel_id_of(interaction)
    )
    return paged(
        [entry_line(e) for e in entries],
        page,
        title="Knowledge library",
        empty="No setting files here yet: import one with `/knowledge import`.",
        colour=KNOWLEDGE_COLOUR,
    )


def details_embed(details: SourceDetails) -> discord.Embed:
    entry = details.entry
    if details.text is None:
        body = (
            "*Narrator only: the narrator reads this file; no command shows its text or headings.*"
        )
    else:
        body = echo(details.text, 3000)
    embed = discord.Embed(title=echo(f"📚 {entry.title}", 256), description=body)
    embed.colour = KNOWLEDGE_COLOUR
    embed.add_field(name="Class", value=f"{entry.flags} — {RULES[entry.kind].meaning}")
    embed.add_field(name="Passages", value=f"{entry.chunks:,} ({entry.tokens:,} tokens)")
    if details.headings:
        embed.add_field(name="Headings", value=_headings(details.headings), inline=False)
    return embed


class KnowledgeCog(commands.Cog):
    knowledge = app_commands.Group(
        name="knowledge", description="Setting notes the narrator draws on"
    )

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @knowledge.command(name="import")
    @app_commands.rename(kind="class", target="for")
    @app_commands.describe(
        file="A .txt or .md file of setting notes",
        kind="Canon establishes what is true; Reference informs; Inspiration sets tone",
        target="The library of this place (default) or only the adventure running here",
        always="Canon only: put it in every turn, relevant or not",
        narrator_only="Never show its text to players (the narrator still reads it)",
        replace="Replace a file of the same name or content already imported",
    )
    @app_commands.choices(kind=CLASS_CHOICES, target=TARGET_CHOICES)
    async def import_(
        self,
        interaction: discord.Interaction,
        file: discord.Attachment,
        kind: app_commands.Choice[str],
        target: app_commands.Choice[str] | None = None,
        always: bool = False,
        narrator_only: bool = False,
        replace: bool = False,
    ) -> None:
        """Import setting notes as Canon, Reference or Inspiration (a preview comes first)."""
        library = self.bot.services.knowledge
        actor = actor_of(interaction)
        # Refused before the download: no one waits on a file they could not import.
        await library.check_may_import(actor)
        library.check_file(file.filename, file.size)
        await interaction.response.defer(ephemeral=True, thinking=True)
        data = await file.read()
        draft = await library.preview(
            actor,
            channel_id_of(interaction),
            data,
            file.filename,
            KnowledgeClass(kind.value),
            target=target.value if target else Target.LIBRARY,
            always_include=always,
            narrator_only=narrator_only,
            replace=replace,
        )
        view = KnowledgePreview(self.bot, actor, draft)
        view.message = await interaction.followup.send(
            embed=fit_embed(preview_embed(draft)), view=view, ephemeral=True, wait=True
        )

    @knowledge.command(name="list")
    async def list_(self, interaction: discord.Interaction) -> None:
        """The setting files the narrator draws on here."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        await show_list(interaction, "knowledge")

    @knowledge.command(name="show")
    @app_commands.describe(source="The file to look at")
    async def show(self, interaction: discord.Interaction, source: str) -> None:
        """A setting file's class, options, headings and text (unless narrator only)."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        details = await self.bot.services.knowledge.show(
            actor_of(interaction), channel_id_of(interaction), source
        )
        files = []
        if details.text is not None and len(details.text) > 3000:
            files.append(
                discord.File(io.BytesIO(details.text.encode()), filename=details.entry.title)
            )
        await interaction.followup.send(
            embed=fit_embed(details_embed(details)), files=files, ephemeral=True
        )

    @knowledge.command(name="remove")
    @app_commands.describe(source="The file to remove (turns played keep what they were sent)")
    async def remove(self, interaction: discord.Interaction, source: str) -> None:
        """Remove a setting file from the library."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        title = await self.bot.services.knowledge.remove(
            actor_of(interaction), channel_id_of(interaction), source
        )
        await reply(
            interaction,
            f"Removed **{discord.utils.escape_markdown(title)}**. Turns already played keep "
            "what they were sent.",
        )

    @knowledge.command(name="options")
    @app_commands.rename(kind="class")
    @app_commands.describe(
        source="The file to change",
        kind="Its class",
        always="Canon only: put it in every turn",
        narrator_only="Never show its text to players",
    )
    @app_commands.choices(kind=CLASS_CHOICES)
    async def options(
        self,
        interaction: discord.Interaction,
        source: str,
        kind: app_commands.Choice[str] | None = None,
        always: bool | None = None,
        narrator_only: bool | None = None,
    ) -> None:
        """Change a setting file's class, "always include" or "narrator only"."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        entry = await self.bot.services.knowledge.set_options(
            actor_of(interaction),
            channel_id_of(interaction),
            source,
            kind=KnowledgeClass(kind.value) if kind else None,
            always_include=always,
            narrator_only=narrator_only,
        )
        await reply(
            interaction, f"**{discord.utils.escape_markdown(entry.title)}** is now {entry.flags}."
        )

    @show.autocomplete("source")
    @remove.autocomplete("source")
    @options.autocomplete("source")
    async def source_choices(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        choices = await self.bot.services.knowledge.choices(
            actor_of(interaction), channel_id_of(interaction), current
        )
        return [app_commands.Choice(name=label, value=value) for label, value in choices]


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(KnowledgeCog(bot))
