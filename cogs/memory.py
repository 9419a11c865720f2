"""The memory bank of the adventure running here: /memory …, /summary … and /recap.

Each command is one call to the memory bank (``engine.story.memory.bank.MemoryBank``) answered to
the player alone. Anyone may read; changing is for the people who may steer the adventure (the
engine's rule). The summary opens in a form for editing, prefilled, as the steering texts do.
A change is deferred before it is written (the form's when it is submitted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui import bot_of
from cogs.ui.content import EMBED_DESCRIPTION_MAX, fit_embed, fit_text
from cogs.ui.forms import FORM_TIMEOUT_S, TEXT_INPUT_MAX, on_form_error
from cogs.ui.gate import GatedForm
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.pages import ListPage, list_source, show_list
from engine.errors import CampfireError
from engine.platform.sanitise import ROW_ID_MAX, echo
from engine.story.memory.bank import (
    MEMORY_MAX_CHARS,
    SUMMARY_MAX_CHARS,
    MemoryPage,
    MemoryView,
    SummaryView,
)

if TYPE_CHECKING:
    from cogs.ui import CampfireBot
    from engine.story.memory.bank import MemoryBank

#: A memory's number as Discord asks for it: bounded like every row id, so Discord refuses a
#: number no memory can have before it reaches the bot.
MemoryId = app_commands.Range[int, 1, ROW_ID_MAX]

MEMORY_COLOUR = discord.Colour.teal()


def memory_line(memory: MemoryView) -> str:
    marks = " 📌" if memory.pinned else ""
    if memory.actions is not None:
        first, last = memory.actions
        where = f"actions {first}–{last}" if first != last else f"action {first}"
    else:
        where = "added by a player"
    used = f" · used {memory.use_count}×" if memory.use_count else ""
    text = discord.utils.escape_markdown(echo(memory.text, 300))
    return f"**#{memory.id}**{marks} · {where}{used}\n{text}"


def memories_embed(page: MemoryPage, *, forgotten: bool) -> discord.Embed:
    kind = "Forgotten memories" if forgotten else "Memories"
    title = echo(f"{kind} · {page.title}", 256)
    if page.memories:
        description = "\n\n".join(memory_line(m) for m in page.memories)
    elif forgotten:
        description = "Nothing is forgotten."
    else:
        description = (
            "No memories yet. The narrator's memory starts after 12 actions; "
            "add one yourself with `/memory add`."
        )
    embed = discord.Embed(
        title=title, description=echo(description, EMBED_DESCRIPTION_MAX), colour=MEMORY_COLOUR
    )
    embed.set_footer(
        text=f"Page {page.page}/{page.pages} · {page.live} of {page.capacity} kept · "
        f"{page.forgotten} forgotten · 📌 pinned: always given to the narrator"
    )
    return embed


def summary_embed(summary: SummaryView) -> discord.Embed:
    text = summary.text or "No summary yet: the first one is written after 15 actions."
    embed = discord.Embed(
        title=echo(f"Story summary · {summary.title}", 256),
        description=echo(discord.utils.escape_markdown(text), EMBED_DESCRIPTION_MAX),
        colour=MEMORY_COLOUR,
    )
    embed.set_footer(text=f"Covers the story through turn {summary.through} of {summary.actions}")
    return embed


def _memory_reader(forgotten: bool):
    async def read(interaction: discord.Interaction, page: int) -> ListPage:
        found = await bot_of(interaction).services.memory_bank.page(
            channel_id_of(interaction), page=page, forgotten=forgotten
        )
        return ListPage(memories_embed(found, forgotten=forgotten), found.page, found.pages)

    return read


list_source("memories")(_memory_reader(forgotten=False))
list_source("forgotten")(_memory_reader(forgotten=True))


#: How many of the newest story entries a recap shows (as many as fit).
RECAP_ENTRIES = 8


def recap_embed(summary: SummaryView, latest: list[str]) -> discord.Embed:
    """A latecomer's catch-up: the summary the narrator reads, then the newest entries, the
    oldest of them left out first when they do not all fit."""
    story_so_far = (
        echo(summary.text, 1500) if summary.text else "No summary yet: the story is young."
    )
    head = f"**The story so far**\n{story_so_far}\n\n**The latest turns**\n"
    room = EMBED_DESCRIPTION_MAX - len(head)
    shown: list[str] = []
    for entry in reversed(latest):
        text = echo(entry, 1200)
        if len(text) + 2 > room:
            break
        shown.insert(0, text)
        room -= len(text) + 2
    turns = "\n\n".join(shown) or "Nothing has happened yet: the opening is all there is."
    embed = discord.Embed(
        title=echo(f"Recap · {summary.title}", 256),
        description=head + turns,
        colour=MEMORY_COLOUR,
    )
    embed.set_footer(text=f"{summary.actions} turns so far · only you can see this")
    return embed


class SummaryModal(GatedForm):
    def __init__(self, current: str, adventure_id: int) -> None:
        super().__init__(title="Story summary", timeout=FORM_TIMEOUT_S)
        self.adventure_id = adventure_id
        self.text: discord.ui.TextInput[SummaryModal] = discord.ui.TextInput(
            label="Story summary",
            custom_id="text",
            style=discord.TextStyle.paragraph,
            default=current or None,
            required=False,
            max_length=min(TEXT_INPUT_MAX, SUMMARY_MAX_CHARS),
        )
        self.add_item(self.text)

    async def on_submit(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(thinking=True, ephemeral=True)
        saved = await bot_of(interaction).services.memory_bank.set_summary(
            channel_id_of(interaction),
            actor_of(interaction),
            self.text.value,
            adventure_id=self.adventure_id,
        )
        await interaction.followup.send(
            "Story summary saved; it applies from the next turn.",
            embed=fit_embed(summary_embed(saved)),
            ephemeral=True,
        )

    async def on_error(self, interaction: discord.Interaction, error: Exception) -> None:
        await on_form_error(interaction, error)


class MemoryCog(commands.Cog):
    memory = app_commands.Group(name="memory", description="The memory bank of the adventure here")
    summary = app_commands.Group(
        name="summary", description="The story summary of the adventure here"
    )

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @property
    def _bank(self) -> MemoryBank:
        return self.bot.services.memory_bank

    async def _answer(
        self, interaction: discord.Interaction, content: str, memory: MemoryView
    ) -> None:
        """The answer to a change, deferred (``_defer``) before it was written."""
        await interaction.followup.send(
            fit_text(content),
            embed=fit_embed(discord.Embed(description=memory_line(memory), colour=MEMORY_COLOUR)),
            ephemeral=True,
        )

    @staticmethod
    async def _defer(interaction: discord.Interaction) -> None:
        await interaction.response.defer(thinking=True, ephemeral=True)

    # --- /memory ------------------------------------------------------------------------------

    @memory.command(name="list")
    @app_commands.describe(page="Which page to show", forgotten="Show the forgotten ones instead")
    async def memory_list(
        self,
        interaction: discord.Interaction,
        page: app_commands.Range[int, 1] = 1,
        forgotten: bool = False,
    ) -> None:
        """Show the adventure's memories (to you alone)."""
        await show_list(interaction, "forgotten" if forgotten else "memories", page)

    @memory.command(name="add")
    @app_commands.describe(text="A fact the narrator should remember, in a sentence or two")
    async def memory_add(
        self,
        interaction: discord.Interaction,
        text: app_commands.Range[str, 1, MEMORY_MAX_CHARS],
    ) -> None:
        """Add a memory of your own; it stays through undo and retry."""
        await self._defer(interaction)
        added = await self._bank.add(channel_id_of(interaction), actor_of(interaction), text)
        await self._answer(interaction, "Memory added; it applies from the next turn.", added)

    @memory.command(name="edit")
    @app_commands.describe(memory="The memory to change", text="Its new text")
    async def memory_edit(
        self,
        interaction: discord.Interaction,
        memory: MemoryId,
        text: app_commands.Range[str, 1, MEMORY_MAX_CHARS],
    ) -> None:
        """Rewrite a memory."""
        await self._defer(interaction)
        saved = await self._bank.edit(
            channel_id_of(interaction), actor_of(interaction), memory, text
        )
        await self._answer(interaction, "Memory saved.", saved)

    @memory.command(name="pin")
    @app_commands.describe(memory="The memory to give the narrator every turn")
    async def memory_pin(self, interaction: discord.Interaction, memory: MemoryId) -> None:
        """Pin a memory: the narrator gets it every turn (it counts toward the memories shown)."""
        await self._flag(interaction, memory, "Memory pinned.", pinned=True)

    @memory.command(name="unpin")
    @app_commands.describe(memory="The memory to unpin")
    async def memory_unpin(self, interaction: discord.Interaction, memory: MemoryId) -> None:
        """Unpin a memory: it comes in only when it is relevant again."""
        await self._flag(interaction, memory, "Memory unpinned.", pinned=False)

    @memory.command(name="forget")
    @app_commands.describe(memory="The memory the narrator should no longer get")
    async def memory_forget(self, interaction: discord.Interaction, memory: MemoryId) -> None:
        """Forget a memory (kept, so /memory restore can bring it back)."""
        await self._flag(interaction, memory, "Memory forgotten.", forgotten=True)

    @memory.command(name="restore")
    @app_commands.describe(memory="The forgotten memory to bring back")
    async def memory_restore(self, interaction: discord.Interaction, memory: MemoryId) -> None:
        """Bring back a forgotten memory."""
        await self._flag(interaction, memory, "Memory restored.", forgotten=False)

    async def _flag(
        self,
        interaction: discord.Interaction,
        memory_id: int,
        content: str,
        *,
        pinned: bool | None = None,
        forgotten: bool | None = None,
    ) -> None:
        await self._defer(interaction)
        saved = await self._bank.set_flag(
            channel_id_of(interaction),
            actor_of(interaction),
            memory_id,
            pinned=pinned,
            forgotten=forgotten,
        )
        await self._answer(interaction, content, saved)

    @memory_edit.autocomplete("memory")
    @memory_pin.autocomplete("memory")
    @memory_unpin.autocomplete("memory")
    @memory_forget.autocomplete("memory")
    @memory_restore.autocomplete("memory")
    async def memory_autocomplete(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[int]]:
        try:
            found = await self._bank.choices(channel_id_of(interaction), current)
        except CampfireError:
            return []  # no adventure here: nothing to offer
        return [app_commands.Choice(name=label, value=value) for label, value in found]

    # --- /recap -------------------------------------------------------------------------------

    @app_commands.command(name="recap")
    async def recap(self, interaction: discord.Interaction) -> None:
        """Catch up on the adventure here: its summary and the latest turns (to you alone)."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        place = channel_id_of(interaction)
        summary = await self._bank.summary(place)
        latest = await self.bot.services.play.recent_story(place, RECAP_ENTRIES)
        await interaction.followup.send(embed=fit_embed(recap_embed(summary, latest)))

    # --- /summary -----------------------------------------------------------------------------

    @summary.command(name="view")
    async def summary_view(self, interaction: discord.Interaction) -> None:
        """Show the story summary the narrator reads (to you alone)."""
        found = await self._bank.summary(channel_id_of(interaction))
        await interaction.response.send_message(
            embed=fit_embed(summary_embed(found)), ephemeral=True
        )

    @summary.command(name="edit")
    async def summary_edit(self, interaction: discord.Interaction) -> None:
        """Edit the story summary in a form."""
        found = await self._bank.summary_to_edit(channel_id_of(interaction), actor_of(interaction))
        await interaction.response.send_modal(SummaryModal(found.text, found.adventure_id))


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(MemoryCog(bot))
