"""An edit of a story entry, shown: the public line that says who edited which entry, the new
words in the messages that show it, and ↩️ Undo edit.

``UndoEditButton`` is a persistent button (``cogs.ui.discovery``) and lives here, beside what
it shows, not in the /edit cog: a cog module declares commands; what a message shows, its
buttons included, is ``cogs.ui``'s."""

from __future__ import annotations

import logging
import re
from typing import Any

import discord

from cogs.ui import bot_of
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.preflight import Preflighted
from cogs.ui.replies import reply
from engine.errors import CampfireError
from engine.platform.sanitise import row_id
from engine.story.tree import EntryEdit, HeadMove

log = logging.getLogger(__name__)


def story_name(text: str) -> str:
    return discord.utils.escape_markdown(text)


def mover_name(move: HeadMove, interaction: discord.Interaction) -> str:
    """Who made the move, as the story names them: "You" in a DM, else their character's name
    (their display name without one)."""
    return story_name(move.mover or interaction.user.display_name)


def edit_notice(edit: EntryEdit, who: str) -> str:
    """The public line saying an entry was edited, and how to take it back."""
    if edit.is_head and not edit.is_action:
        return (
            f"✏️ *{who} corrected the newest turn (take {edit.take} of {edit.take_count}; "
            "the original is kept).*"
        )
    what = "an action" if edit.is_action else "the narration"
    return (
        f"✏️ *{who} edited entry {edit.index} ({what}); the words before are kept, and "
        "↩️ Undo edit brings them back.*"
    )


async def show_entry_edit(
    interaction: discord.Interaction, edit: EntryEdit, notice: str, *, undoable: bool = True
) -> None:
    """Say publicly what changed (with the button that takes an edit back), then show the new
    words in the messages that show the entry."""
    bot = bot_of(interaction)
    if undoable:
        view = discord.ui.View(timeout=None)
        view.add_item(
            UndoEditButton(edit.move.adventure_id, edit.node_id, edit.take, edit.previous_take)
        )
        await interaction.followup.send(notice, view=view)
    else:
        await interaction.followup.send(notice)
    channel = interaction.channel
    if isinstance(channel, discord.abc.Messageable):
        edits = await bot.narrator.show_entry_edit(channel, edit)
        await bot.narrator.tell_held_back(interaction, edits)


class UndoEditButton(
    Preflighted,
    discord.ui.DynamicItem[discord.ui.Button],
    template=r"cf:unedit:(?P<adventure>\d+):(?P<node>\d+):(?P<take>\d+):(?P<previous>\d+)",
):
    """↩️ Undo edit, under the line saying an entry was edited: brings back the words before
    (take ``previous``) while the entry still shows the edit's (take ``take``). Every id in it
    is checked by the engine: the entry must be on the current line of the adventure running
    where it is pressed, and the presser one who may rewrite it. /undo stays what it is (the
    newest turn taken back): an edit of an older entry is not a turn."""

    def __init__(self, adventure_id: int, node_id: int, take: int, previous: int) -> None:
        self.adventure_id = adventure_id
        self.node_id = node_id
        self.take = take
        self.previous = previous
        super().__init__(
            discord.ui.Button(
                label="Undo edit",
                emoji="↩️",
                style=discord.ButtonStyle.secondary,
                custom_id=f"cf:unedit:{adventure_id}:{node_id}:{take}:{previous}",
            )
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> UndoEditButton:
        return cls(
            row_id(match["adventure"]) or 0,
            row_id(match["node"]) or 0,
            row_id(match["take"]) or 0,
            row_id(match["previous"]) or 0,
        )

    async def callback(self, interaction: discord.Interaction) -> None:
        bot = bot_of(interaction)
        await interaction.response.defer()
        try:
            edit = await bot.services.tree.undo_edit(
                actor_of(interaction),
                channel_id_of(interaction),
                adventure_id=self.adventure_id,
                node_id=self.node_id,
                take=self.take,
                previous=self.previous,
            )
        except CampfireError as error:
            await reply(interaction, f"⚠ {error.message}")
            return
        try:
            # The edit is undone: its button goes (the press's token is seconds old).
            await interaction.edit_original_response(view=None)
        except discord.HTTPException:
            log.info("could not take the Undo edit button off in %s", interaction.channel_id)
        who = mover_name(edit.move, interaction)
        notice = f"↩️ *{who} undid the edit of entry {edit.index}; its words before are back.*"
        await show_entry_edit(interaction, edit, notice, undoable=False)
