"""The narrator's own state (the pacer it shares, the turns it is showing, the earlier
messages it marks) and what it shows when the story's head moves: undo, redo, a branch
switched, a take chosen, an entry edited. ``cogs.ui.narration.Narrator`` builds on it to show
turns as they are written."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import discord

from cogs.ui.bot_permissions import (
    STORY_MOVED,
    TURN_SAVED,
    kind_of_place,
    permissions_now,
    refusal_note,
)
from cogs.ui.buttons import turn_buttons
from cogs.ui.content import text_pages
from cogs.ui.earlier_messages import EarlierMessages, Edited, EditRound
from cogs.ui.recent_interactions import RecentInteractions
from cogs.ui.replies import ALREADY_ACKNOWLEDGED, reply
from cogs.ui.streaming import RatePacer
from engine.errors import (
    CampfireError,
)
from engine.platform.sanitise import echo
from engine.play.message_links import ACTION, NARRATION, MessageLink, MessageLinks
from engine.story.tree import EntryEdit, HeadMove

if TYPE_CHECKING:
    # discord.py's union of the channels a message can be sent to: unlike the Messageable
    # protocol, every one of them has an id.
    from discord.abc import MessageableChannel

    from cogs.ui import CampfireBot

log = logging.getLogger(__name__)


#: A script's message under a turn is cut here (the turn's text comes first).
SCRIPT_MESSAGE_MAX = 1500

MESSAGE_MAX = 2000
UNDONE_COLOUR = discord.Colour.dark_grey()
UNDONE_NOTE = "↩️ Undone. /redo (or ↪️ Redo) brings it back."
#: Earlier messages one head move marks or unmarks at most, newest first: an undo of many
#: turns or a branch switch must not fill a channel's edit window (about 5 per 5 s) for
#: minutes, nor meet Discord's cap on edits of messages older than an hour (30046).
EDITS_PER_MOVE = 6
#: Said when Discord takes no more edits of hour-old messages in a channel for now (30046):
#: the buttons move to a new line, and the older messages keep their look.
HELD_BACK = "Discord takes no more edits of hour-old messages here for a few minutes"
#: What a message that showed part of an entry shows once an edit left it nothing to show.
SHORTENED = "-# ✏️ *(shortened by an edit)*"
#: Requests a turn or head move in progress reserves in the pacer (see ``Narrator._begin``).
TURN_RESERVE = 2


@dataclass(frozen=True, slots=True)
class _Marks:
    """What a head move changes the look of: messages to mark undone and to unmark (newest
    first, within ``EDITS_PER_MOVE``), and how many more it concerned."""

    marked: list[MessageLink]
    unmarked: list[MessageLink]
    left: int


class HeadMoveShowing:
    def __init__(self, bot: CampfireBot, pacer: RatePacer) -> None:
        self.bot = bot
        self.pacer = pacer
        # Turns being shown right now; the console waits for none before reading on.
        self._showing = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.earlier = EarlierMessages(bot, pacer, bot.services.message_links)
        #: The interactions that played turns lately (``cogs.ui.recent_interactions``).
        self.interactions = RecentInteractions()

    @property
    def links(self) -> MessageLinks:
        return self.bot.services.message_links

    async def wait_idle(self) -> None:
        """Until no turn is being shown (every narration has had its final edit)."""
        await self._idle.wait()

    def _begin(self) -> None:
        self._showing += 1
        self._idle.clear()
        # The pacer keeps room for the requests a turn (or move) makes as it ends: its
        # narration's final one and the buttons taken off the message that had them. When many
        # turns run at once, their streaming is then skipped rather than their ends delayed.
        self.pacer.reserve(TURN_RESERVE)

    def _end(self) -> None:
        self.pacer.release(TURN_RESERVE)
        self._showing -= 1
        if self._showing == 0:
            self._idle.set()

    async def _acknowledged(self, interaction: discord.Interaction) -> bool:
        """Acknowledge a head move before anything else, the database included, so that
        Discord's 3 seconds are never spent waiting on it. A command shows "thinking…"
        publicly and its answer replaces it; a button's press is acknowledged silently (a
        deferred update) and its answer is a follow-up. The move checks everything in the
        transaction that writes it, and a refusal is told to the player alone (``reply``).
        False: a repeat delivery; nothing more to do."""
        try:
            if interaction.type is discord.InteractionType.component:
                await interaction.response.defer()
            else:
                await interaction.response.defer(thinking=True)
        except discord.HTTPException as error:
            if error.code != ALREADY_ACKNOWLEDGED:
                raise
            # A repeat delivery (a gateway replay, another process): the first one moves.
            log.info("interaction %s arrived again; the first delivery moves", interaction.id)
            return False
        return True

    async def head_move(
        self,
        interaction: discord.Interaction,
        move: Callable[[], Awaitable[HeadMove]],
        note: str,
    ) -> None:
        """Run a head move and show it: a public line saying who did what, undone turns
        marked, returning ones unmarked, the buttons on the turn the story now stands on. A
        refused move (stale button, no permission) is answered to the presser alone."""
        if not await self._acknowledged(interaction):
            return
        try:
            result = await move()
        except CampfireError as error:
            await reply(interaction, f"⚠ {error.message}")
            return
        marks = await self._marks(result)
        line = note.format(
            # As the story names the player: "You" in a DM, else their character's name.
            who=discord.utils.escape_markdown(result.mover or interaction.user.display_name),
            branch=discord.utils.escape_markdown(result.branch),
        )
        if marks.left:
            line += f"\n-# {marks.left} older messages of these turns are left as they were."
        await self._answer(interaction, line)
        channel = interaction.channel
        if isinstance(channel, discord.abc.Messageable):
            edits = await self.show_head(channel, result, marks)
            await self.tell_held_back(interaction, edits)

    async def tell_held_back(self, interaction: discord.Interaction, edits: EditRound) -> None:
        """Tell the player, privately, of the earlier messages a round of edits could not
        change: Discord refusing the bot the channel, or its edits of hour-old messages."""
        if edits.refusal is not None:
            note = self._refusal_note(interaction, edits.refusal, STORY_MOVED)
            await reply(interaction, note)
        elif edits.held_back:
            await reply(
                interaction,
                f"-# {HELD_BACK}, so {edits.held_back} older messages of this story "
                "were left as they were.",
            )

    async def _answer(self, interaction: discord.Interaction, content: str) -> None:
        """The public answer to an acknowledged head move."""
        try:
            if interaction.response.type is discord.InteractionResponseType.deferred_message_update:
                await interaction.followup.send(content)
            else:
                await interaction.edit_original_response(content=content)
        except discord.HTTPException:
            log.warning("could not answer interaction %s", interaction.id, exc_info=True)

    async def _marks(self, move: HeadMove) -> _Marks:
        """The messages a head move changes the look of, newest first, within the cap."""
        removed = await self.links.of_nodes(move.removed)
        restored = await self.links.of_nodes(move.restored)
        marked = removed[:EDITS_PER_MOVE]
        unmarked = restored[: EDITS_PER_MOVE - len(marked)]
        left = len(removed) + len(restored) - len(marked) - len(unmarked)
        return _Marks(marked, unmarked, left)

    async def _suggested(self, move: HeadMove) -> tuple[str, ...]:
        """The suggested actions of the take the story stands on now (none if off)."""
        suggestions = self.bot.services.suggestions
        return await suggestions.of_turn(move.adventure_id, move.head_node_id, move.take)

    async def show_head(
        self, channel: MessageableChannel, move: HeadMove, marks: _Marks | None = None
    ) -> EditRound:
        """The buttons go to the turn the story stands on; the turns that left the line are
        marked, those that came back unmarked. Returns the round of edits: Discord's refusal
        if it refused the bot this channel (after which nothing more was asked there), and how
        many edits were held back (30046)."""
        self._begin()
        try:
            if marks is None:
                marks = await self._marks(move)
            view = turn_buttons(
                move.adventure_id,
                move.version,
                move.head_node_id if move.head_index > 0 else None,
                take=move.take,
                takes=move.take_count,
                can_undo=move.head_index > 0,
                can_redo=move.can_redo,
                suggestions=await self._suggested(move) if move.head_index > 0 else (),
            )
            target = await self.links.newest_narration(move.head_node_id)
            edits = self.earlier.round()
            await self._place_buttons(edits, channel, move, view, target, taken_off=marks.marked)
            embed = discord.Embed(description=UNDONE_NOTE, colour=UNDONE_COLOUR)
            await edits.edit_all(marks.marked, embed=embed, view=None)
            await edits.edit_all(marks.unmarked, embeds=[])
            return edits
        finally:
            self._end()

    async def _place_buttons(
        self,
        edits: EditRound,
        channel: MessageableChannel,
        move: HeadMove,
        view: discord.ui.View,
        target: MessageLink | None,
        *,
        content: str | None = None,
        taken_off: Sequence[MessageLink] = (),
    ) -> None:
        """Put ``view`` on the head's newest message (with ``content``, a corrected text),
        or, where that message is unknown or cannot be edited any more, on a new line saying
        where the story stands; then take the buttons off the message that had them (unless
        it is among ``taken_off``, whose edit takes them off anyway)."""
        before = await self.links.with_buttons(channel.id)
        fields = {"view": view} if content is None else {"view": view, "content": content}
        edited = await edits.edit(target, **fields) if target is not None else None
        if target is not None and edited is Edited.DONE:
            placed = target.message_id
            await self.links.buttons_on(channel.id, placed)
        elif edited is Edited.CHANNEL_REFUSED:
            return  # a new message would be refused as well
        else:
            try:
                await self.pacer.acquire(channel.id)
                where = f" ({HELD_BACK})" if edited is Edited.TOO_OLD else ""
                text = echo(content or move.head_text, MESSAGE_MAX - 120)
                sent = await channel.send(
                    f"-# The story now stands here{where}:\n{text}", view=view
                )
            except discord.HTTPException as error:
                edits.refused_by(error)
                log.warning(
                    "could not place the buttons in %s: %s %s", channel.id, error.status, error.text
                )
                return
            placed = sent.id
            await self.links.shown(channel.id, move.head_node_id, [sent.id], replace=False)
        off = {link.message_id for link in taken_off}
        if before is not None and before.message_id != placed and before.message_id not in off:
            await edits.edit(before, view=None)

    async def show_entry_edit(self, channel: MessageableChannel, edit: EntryEdit) -> EditRound:
        """An entry whose words changed (an edit, or one undone): the messages showing it show
        the new words. The newest narration keeps its buttons and take pager (``show_edit``);
        an older entry's messages are edited by id, within the budget for edits of old
        messages (``EarlierMessages``). An action's messages show its turn's line of actions.
        Words that need more messages than showed the old ones end the last one, cut."""
        if edit.is_head and not edit.is_action:
            return await self.show_edit(channel, edit.move)
        self._begin()
        try:
            kind = ACTION if edit.is_action else NARRATION
            shown = await self.links.of_nodes(edit.shown_node_ids)
            links = sorted(
                (link for link in shown if link.kind == kind), key=lambda link: link.message_id
            )
            pieces = text_pages(edit.shown_text)
            edits = self.earlier.round()
            for at, link in enumerate(links):
                if at == len(links) - 1:
                    content = echo("\n\n".join(pieces[at:]), MESSAGE_MAX) or SHORTENED
                else:
                    content = pieces[at] if at < len(pieces) else SHORTENED
                await edits.edit(link, content=content)
            return edits
        finally:
            self._end()

    async def show_edit(self, channel: MessageableChannel, move: HeadMove) -> EditRound:
        """A corrected turn: its message shows the new text, with the pager."""
        view = turn_buttons(
            move.adventure_id,
            move.version,
            move.head_node_id,
            take=move.take,
            takes=move.take_count,
            can_redo=move.can_redo,
            suggestions=await self._suggested(move),
        )
        target = await self.links.newest_narration(move.head_node_id)
        # A take longer than a message is cut here; it stays whole in the story and Insights.
        content = echo(move.head_text, MESSAGE_MAX) if target is not None else None
        edits = self.earlier.round()
        await self._place_buttons(edits, channel, move, view, target, content=content)
        return edits

    async def show_take(
        self,
        interaction: discord.Interaction,
        move: Callable[[], Awaitable[HeadMove]],
    ) -> None:
        """The take pager: the chosen take replaces the text of the pressed message, in place.
        The press is acknowledged (a deferred update) before the take is made live."""
        if not await self._acknowledged(interaction):
            return
        try:
            result = await move()
        except CampfireError as error:
            await reply(interaction, f"⚠ {error.message}")
            return
        view = turn_buttons(
            result.adventure_id,
            result.version,
            result.head_node_id,
            take=result.take,
            takes=result.take_count,
            can_redo=result.can_redo,
            suggestions=await self._suggested(result),
        )
        try:
            # Seconds after the press: its token is fresh, and the original is that message.
            await interaction.edit_original_response(
                content=echo(result.head_text, MESSAGE_MAX), view=view
            )
        except discord.HTTPException as error:
            log.warning("could not show the take in %s: %s", interaction.channel_id, error)
            return
        if interaction.message is not None and interaction.channel_id is not None:
            await self.links.shown(
                interaction.channel_id, result.head_node_id, [interaction.message.id]
            )

    @staticmethod
    def _refusal_note(
        interaction: discord.Interaction, refused: discord.HTTPException, done: str = TURN_SAVED
    ) -> str:
        place = kind_of_place(interaction)
        return refusal_note(refused, place, permissions_now(interaction), done=done)
