"""The story tree in Discord: /retry, /undo, /redo, /edit, /branch …, /savepoint … and /tree.

Each command is one call to the engine (``engine.story.tree.StoryTree``, or the play service for a
retry, which writes a turn); the narrator shows what changed. A command that writes defers first
(Discord's 3 seconds are not spent waiting on the database); a form opens before anything is
written, and its submission defers, then writes. Who may rewrite a turn (its
action's author, the host, members who manage the server or its messages) and who may change
branches and save points (the host and those members) is the engine's rule
(``engine.people.access``), read from the member's permissions that ``actor_of`` carries.
"""

from __future__ import annotations

import io
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui import bot_of
from cogs.ui.entry_edits import edit_notice, mover_name, show_entry_edit, story_name
from cogs.ui.errors import on_app_command_error
from cogs.ui.forms import FORM_TIMEOUT_S
from cogs.ui.gate import GatedForm
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.pages import ListPage, list_source, paged, show_list
from cogs.ui.replies import defer_request, reply
from engine.story.tree import (
    EDIT_MAX_CHARS,
    NAME_MAX,
    BranchView,
    HeadMove,
    SavePointView,
    TurnText,
)
from engine.story.tree.image import lanes_drawn, render_png
from engine.story.tree.picture import describe, draw_tree

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

#: Lines of the tree's drawing a page: a drawing reads better long than cut often.
log = logging.getLogger(__name__)

TREE_LINES_PER_PAGE = 40
TREE_LEGEND = (
    "● a branch's newest entry · ◀ where the story stands · ⚑ a save point · "
    "§ a chapter's end · ↻ turns with several takes · "
    "numbers count story entries (actions and narration)"
)
TREE_PICTURE_NAME = "story-tree.png"


def branch_lines(branches: list[BranchView]) -> list[str]:
    lines = []
    for branch in branches:
        mark = "▶" if branch.active else "•"
        saves = f" · ⚑ {branch.save_points}" if branch.save_points else ""
        lines.append(f"{mark} **{story_name(branch.name)}** · {branch.tip_index} entries{saves}")
    return lines


def save_point_lines(points: list[SavePointView]) -> list[str]:
    lines = []
    for point in points:
        here = " ◀ the story is here" if point.is_head else ""
        lines.append(
            f"⚑ **{story_name(point.name)}** · branch {story_name(point.branch) or '?'}, "
            f"entry {point.index}{here}"
        )
    return lines


# --- the lists, paged (cogs.ui.pages) -------------------------------------------------------------


@list_source("branches")
async def branch_page(interaction: discord.Interaction, page: int) -> ListPage:
    branches = await bot_of(interaction).services.tree.branches(channel_id_of(interaction))
    return paged(branch_lines(branches), page, title="Branches", empty="No branches yet.")


@list_source("savepoints")
async def save_point_page(interaction: discord.Interaction, page: int) -> ListPage:
    points = await bot_of(interaction).services.tree.save_points(channel_id_of(interaction))
    return paged(
        save_point_lines(points),
        page,
        title="Save points",
        empty="No save points yet. `/savepoint add` makes one here.",
    )


@list_source("tree")
async def tree_page(interaction: discord.Interaction, page: int) -> ListPage:
    """A page of the text diagram (what the console and screen readers read) and, with the
    command's answer, the picture of the whole tree; a page turn keeps the picture it has."""
    shape = await bot_of(interaction).services.tree.shape(channel_id_of(interaction))
    listing = paged(
        draw_tree(shape).splitlines(),
        page,
        title="The story's tree",
        empty="The story has no turns yet.",
        footer=TREE_LEGEND,
        code_block=True,
        per_page=TREE_LINES_PER_PAGE,
    )
    if interaction.type is not discord.InteractionType.application_command or not shape.lanes:
        return listing
    png = await render_png(shape)
    if png is None:
        return listing
    # The description is the image's alt text (discord-api-docs, Message, Attachment Object).
    file = discord.File(
        io.BytesIO(png),
        filename=TREE_PICTURE_NAME,
        description=describe(shape, len(lanes_drawn(shape))),
    )
    return replace(listing, file=file)


class EditTurnModal(GatedForm):
    """An entry's text, prefilled; submitting stores the correction as a new take."""

    def __init__(self, bot: CampfireBot, turn: TurnText) -> None:
        if turn.is_head and not turn.is_action:
            title = "Edit the newest turn"
        else:
            title = f"Edit entry {turn.index} ({'an action' if turn.is_action else 'narration'})"
        super().__init__(title=title, timeout=FORM_TIMEOUT_S)
        self.bot = bot
        self.node_id = turn.node_id
        self.version = turn.version
        self.text: discord.ui.TextInput[EditTurnModal] = discord.ui.TextInput(
            label="Action text" if turn.is_action else "Turn text",
            custom_id="text",
            # Many lines: the entry's paragraphs stay as they are.
            style=discord.TextStyle.paragraph,
            default=turn.text,
            required=True,
            max_length=EDIT_MAX_CHARS,
        )
        self.add_item(self.text)

    async def on_submit(self, interaction: discord.Interaction) -> None:
        bot = self.bot
        await interaction.response.defer(thinking=True)
        edit = await bot.services.tree.edit(
            actor_of(interaction),
            channel_id_of(interaction),
            self.text.value,
            node_id=self.node_id,
            seen_version=self.version,
        )
        await show_entry_edit(
            interaction, edit, edit_notice(edit, mover_name(edit.move, interaction))
        )

    async def on_error(self, interaction: discord.Interaction, error: Exception) -> None:
        await on_app_command_error(interaction, error)


class StoryTreeCog(commands.Cog):
    branch = app_commands.Group(name="branch", description="Lines of the story here")
    savepoint = app_commands.Group(name="savepoint", description="Named places in the story")

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    # --- turns ---

    @app_commands.command(name="retry")
    async def retry(self, interaction: discord.Interaction) -> None:
        """Write the newest turn again; every take is kept (‹ › pages them)."""
        await defer_request(interaction)
        events = self.bot.services.play.retry_turn(
            actor_of(interaction),
            channel_id_of(interaction),
            request_id=interaction.id,
        )
        await self.bot.narrator.show(interaction, events, retrying=True)

    @app_commands.command(name="undo")
    async def undo(self, interaction: discord.Interaction) -> None:
        """Take back the newest turn (nothing is deleted; /redo brings it back)."""
        await self.bot.narrator.head_move(
            interaction,
            lambda: self.bot.services.tree.undo(
                actor_of(interaction),
                channel_id_of(interaction),
            ),
            "↩️ *{who} undid the last turn.*",
        )

    @app_commands.command(name="redo")
    async def redo(self, interaction: discord.Interaction) -> None:
        """Bring back the turn that was undone last."""
        await self.bot.narrator.head_move(
            interaction,
            lambda: self.bot.services.tree.redo(
                actor_of(interaction),
                channel_id_of(interaction),
            ),
            "↪️ *{who} brought the turn back.*",
        )

    @app_commands.command(name="edit")
    @app_commands.describe(
        entry="The entry to edit, by its number (the newest if left out): an action or narration"
    )
    async def edit(
        self,
        interaction: discord.Interaction,
        entry: app_commands.Range[int, 0, None] | None = None,
    ) -> None:
        """Correct an entry's words in a form: the newest turn, or an earlier action or
        narration (the words before are kept)."""
        turn = await self.bot.services.tree.turn_to_edit(
            actor_of(interaction),
            channel_id_of(interaction),
            entry,
        )
        await interaction.response.send_modal(EditTurnModal(self.bot, turn))

    @edit.autocomplete("entry")
    async def entry_choices(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[int]]:
        try:
            entries = await self.bot.services.tree.entries(channel_id_of(interaction), current)
        except Exception:  # noqa: BLE001 - autocomplete offers nothing rather than failing
            return []
        return [
            app_commands.Choice(
                name=f"{e.index} · {'action' if e.is_action else 'narration'} · {e.excerpt}"[:100],
                value=e.index,
            )
            for e in entries
        ]

    @app_commands.command(name="tree")
    async def tree(self, interaction: discord.Interaction) -> None:
        """The story's shape: its branches, where they part, save points, where you are."""
        # Drawing the picture takes longer than the list alone: acknowledged first, privately.
        await interaction.response.defer(thinking=True, ephemeral=True)
        await show_list(interaction, "tree")

    # --- branches ---

    @branch.command(name="list")
    async def branch_list(self, interaction: discord.Interaction) -> None:
        """The branches of this story."""
        await show_list(interaction, "branches")

    @branch.command(name="new")
    @app_commands.describe(name="A name for the new line, e.g. “the river path”")
    async def branch_new(
        self,
        interaction: discord.Interaction,
        name: app_commands.Range[str, 1, NAME_MAX],
    ) -> None:
        """Start a branch here; new turns go on it, the other branches keep their own."""
        await interaction.response.defer(thinking=True)
        move = await self.bot.services.tree.new_branch(
            actor_of(interaction),
            channel_id_of(interaction),
            name,
        )
        await interaction.followup.send(
            f"🌿 *{mover_name(move, interaction)} started the branch "
            f"“{story_name(move.branch)}” here.*"
        )
        await self._place(interaction, move)

    @branch.command(name="switch")
    @app_commands.describe(name="The branch to go to")
    async def branch_switch(self, interaction: discord.Interaction, name: str) -> None:
        """Go to another branch's newest turn, with that line's world state."""
        await self.bot.narrator.head_move(
            interaction,
            lambda: self.bot.services.tree.switch_branch(
                actor_of(interaction),
                channel_id_of(interaction),
                name,
            ),
            "🌿 *{who} switched to the branch “{branch}”.*",
        )

    @branch.command(name="rename")
    @app_commands.describe(name="The branch to rename", new_name="Its new name")
    async def branch_rename(
        self,
        interaction: discord.Interaction,
        name: str,
        new_name: app_commands.Range[str, 1, NAME_MAX],
    ) -> None:
        """Rename a branch."""
        await interaction.response.defer(thinking=True, ephemeral=True)
        message = await self.bot.services.tree.rename_branch(
            actor_of(interaction),
            channel_id_of(interaction),
            name,
            new_name,
        )
        await reply(interaction, message)

    @branch.command(name="delete")
    @app_commands.describe(name="The branch to forget (its shared turns stay)")
    async def branch_delete(self, interaction: discord.Interaction, name: str) -> None:
        """Delete a branch that the story is not on and no save point uses."""
        await interaction.response.defer(thinking=True, ephemeral=True)
        message = await self.bot.services.tree.delete_branch(
            actor_of(interaction),
            channel_id_of(interaction),
            name,
        )
        await reply(interaction, message)

    @branch_switch.autocomplete("name")
    @branch_rename.autocomplete("name")
    @branch_delete.autocomplete("name")
    async def branch_names(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        try:
            branches = await self.bot.services.tree.branches(channel_id_of(interaction))
        except Exception:  # noqa: BLE001 - autocomplete offers nothing rather than failing
            return []
        typed = current.casefold()
        return [
            app_commands.Choice(name=b.name, value=b.name)
            for b in branches
            if typed in b.name.casefold()
        ][:25]

    # --- save points ---

    @savepoint.command(name="add")
    @app_commands.describe(name="A name for this place in the story")
    async def savepoint_add(
        self,
        interaction: discord.Interaction,
        name: app_commands.Range[str, 1, NAME_MAX],
    ) -> None:
        """Name the place the story stands now, to come back to it later."""
        await interaction.response.defer(thinking=True)
        point = await self.bot.services.tree.add_save_point(
            actor_of(interaction),
            channel_id_of(interaction),
            name,
        )
        await reply(
            interaction,
            f"⚑ Save point “{story_name(point.name)}” made here "
            f"(branch {story_name(point.branch)}).",
            ephemeral=False,
        )

    @savepoint.command(name="list")
    async def savepoint_list(self, interaction: discord.Interaction) -> None:
        """The save points of this story."""
        await show_list(interaction, "savepoints")

    @savepoint.command(name="restore")
    @app_commands.describe(name="The save point to go back to")
    async def savepoint_restore(self, interaction: discord.Interaction, name: str) -> None:
        """Go back to a save point (nothing is deleted; /redo walks forward again)."""
        await self.bot.narrator.head_move(
            interaction,
            lambda: self.bot.services.tree.restore_save_point(
                actor_of(interaction),
                channel_id_of(interaction),
                name,
            ),
            "⚑ *{who} went back to a save point.*",
        )

    @savepoint.command(name="delete")
    @app_commands.describe(name="The save point to delete")
    async def savepoint_delete(self, interaction: discord.Interaction, name: str) -> None:
        """Delete a save point (the story does not change)."""
        await interaction.response.defer(thinking=True, ephemeral=True)
        message = await self.bot.services.tree.delete_save_point(
            actor_of(interaction),
            channel_id_of(interaction),
            name,
        )
        await reply(interaction, message)

    @savepoint_restore.autocomplete("name")
    @savepoint_delete.autocomplete("name")
    async def save_point_names(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        try:
            points = await self.bot.services.tree.save_points(channel_id_of(interaction))
        except Exception:  # noqa: BLE001 - autocomplete offers nothing rather than failing
            return []
        typed = current.casefold()
        return [
            app_commands.Choice(name=p.name, value=p.name)
            for p in points
            if typed in p.name.casefold()
        ][:25]

    async def _place(self, interaction: discord.Interaction, move: HeadMove) -> None:
        channel = interaction.channel
        if isinstance(channel, discord.abc.Messageable):
            await self.bot.narrator.show_head(channel, move)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(StoryTreeCog(bot))
