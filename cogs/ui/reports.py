"""Reporting a turn to the server's moderators, and their Undo (``engine.play.reports``).

🚩 Report sits under a turn's Insights, in servers only. It opens a form for an optional reason
(a form must be the press's first answer, so nothing is asked of the database before it); the
submission is acknowledged privately, stored, and posted in the channel the server's managers
chose (``/server reports``) with the turn's text, its action, a link to it and an Undo button.
Nothing leaves the server. Undo (``cf:reportundo:<report>``) moves that story back to before the
turn, under the rule of every undo; the report's message then says who did it, and the
adventure's channel shows the move as an undo there does.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

import discord

from cogs.ui import bot_of
from cogs.ui.bot_permissions import Does
from cogs.ui.content import fit_text
from cogs.ui.forms import FORM_TIMEOUT_S, on_form_error
from cogs.ui.gate import GatedForm
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.preflight import Preflighted
from cogs.ui.replies import reply
from engine.errors import CampfireError
from engine.platform.sanitise import ROW_ID_MAX, row_id
from engine.play.reports import NO_REPORTS_IN_DMS, REASON_MAX, FiledReport

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

log = logging.getLogger(__name__)

REPORT_COLOUR = discord.Colour.red()


def message_url(server_id: int, channel_id: int, message_id: int) -> str:
    """A link to a message (discord-api-docs, Reference, "Message Formatting": a jump link is
    ``https://discord.com/channels/<guild>/<channel>/<message>``)."""
    return f"https://discord.com/channels/{server_id}/{channel_id}/{message_id}"


def report_embed(report: FiledReport) -> discord.Embed:
    escape = discord.utils.escape_markdown
    embed = discord.Embed(
        title=fit_text(f"🚩 Turn {report.turn} of “{report.adventure_title}” reported", 256),
        description=fit_text(escape(report.narration), 3000),
        colour=REPORT_COLOUR,
    )
    if report.action_text:
        embed.add_field(
            name="The action it answered", value=fit_text(escape(report.action_text), 1000)
        )
    embed.add_field(
        name="Reason",
        value=fit_text(escape(report.reason), 1000) if report.reason else "none given",
    )
    embed.add_field(name="Reported by", value=f"<@{report.reporter_id}>", inline=True)
    if report.message_channel_id and report.message_id:
        where = message_url(report.server_id, report.message_channel_id, report.message_id)
        embed.add_field(name="Where", value=f"[the turn]({where})", inline=True)
    elif report.adventure_channel_id:
        embed.add_field(name="Where", value=f"<#{report.adventure_channel_id}>", inline=True)
    embed.set_footer(
        text="Undo moves the story back to before this turn (Redo there brings it back): the "
        "adventure's host and members who manage the server or its messages may."
    )
    return embed


async def post_report(bot: CampfireBot, report: FiledReport) -> str | None:
    """Post ``report`` in the server's reports channel; None when posted, else why not (the
    report is then withdrawn, so the player may send it again once the channel is mended)."""
    where = f"<#{report.reports_channel_id}>"
    refused = (
        f"Campfire could not post in this server's reports channel ({where}): it needs View "
        "Channel, Send Messages and Embed Links there. Tell the server's admins (`/server "
        "reports`); your report was not sent, so send it again once they have."
    )
    channel = await _channel(bot, report.reports_channel_id)
    # A channel of this server that takes messages, or none (deleted, or never one).
    if getattr(getattr(channel, "guild", None), "id", None) != report.server_id or not isinstance(
        channel, discord.TextChannel | discord.Thread
    ):
        await bot.services.reports.withdraw(report.report_id)
        return (
            f"This server's reports channel ({where}) is gone or takes no messages. Tell the "
            "server's admins (`/server reports`); your report was not sent."
        )
    view = discord.ui.View(timeout=None)
    view.add_item(ReportUndoButton(report.report_id))
    try:
        await bot.narrator.pacer.acquire(channel.id)
        sent = await channel.send(
            embed=report_embed(report), view=view, allowed_mentions=discord.AllowedMentions.none()
        )
    except discord.HTTPException as error:
        await bot.services.reports.withdraw(report.report_id)
        log.info("report %s not posted: %s %s", report.report_id, error.status, error.text)
        return refused
    await bot.services.reports.posted(report.report_id, channel.id, sent.id)
    return None


class ReportForm(GatedForm):
    """The reason for a report (optional)."""

    def __init__(self, node_id: int) -> None:
        super().__init__(title="Report this turn to the moderators", timeout=FORM_TIMEOUT_S)
        self.node_id = node_id
        self.reason: discord.ui.TextInput[ReportForm] = discord.ui.TextInput(
            custom_id="reason",
            label="What is wrong with it? (optional)",
            placeholder="It goes to this server's moderators, with the turn's text.",
            style=discord.TextStyle.paragraph,
            required=False,
            max_length=REASON_MAX,
        )
        self.add_item(self.reason)

    async def on_submit(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        bot = bot_of(interaction)
        try:
            report = await bot.services.reports.file(
                actor_of(interaction), channel_id_of(interaction), self.node_id, self.reason.value
            )
        except CampfireError as error:
            await reply(interaction, f"⚠ {error.message}")
            return
        refused = await post_report(bot, report)
        if refused is not None:
            await reply(interaction, f"⚠ {refused}")
            return
        await reply(
            interaction,
            f"🚩 Turn {report.turn} was reported to this server's moderators. Thank you; "
            "only they see the report.",
        )

    async def on_error(self, interaction: discord.Interaction, error: Exception) -> None:
        await on_form_error(interaction, error)


class ReportButton(
    Preflighted, discord.ui.DynamicItem[discord.ui.Button], template=r"cf:report:(?P<node>\d+)"
):
    """Under a turn's Insights: report that turn (``cf:report:<node>``)."""

    DOES = Does.ANSWERS

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        super().__init__(  # type: ignore[call-arg]  # DynamicItem's, after the mixin
            discord.ui.Button(
                label="Report",
                emoji="🚩",
                style=discord.ButtonStyle.secondary,
                custom_id=f"cf:report:{node_id}",
            )
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> ReportButton:
        return cls(row_id(match["node"], ROW_ID_MAX) or 0)

    async def callback(self, interaction: discord.Interaction) -> None:
        if interaction.guild_id is None:
            await reply(interaction, f"⚠ {NO_REPORTS_IN_DMS}")
            return
        await interaction.response.send_modal(ReportForm(self.node_id))


class ReportUndoButton(
    Preflighted,
    discord.ui.DynamicItem[discord.ui.Button],
    template=r"cf:reportundo:(?P<report>\d+)",
):
    """Under a report in the reports channel: move the story back to before the turn."""

    # It answers here by editing the report; the adventure's channel is another place, whose
    # refusals the head move's edits report (``HeadMoveShowing.show_head``).
    DOES = Does.ANSWERS

    def __init__(self, report_id: int) -> None:
        self.report_id = report_id
        super().__init__(  # type: ignore[call-arg]  # DynamicItem's, after the mixin
            discord.ui.Button(
                label="Undo this turn",
                emoji="↩️",
                style=discord.ButtonStyle.danger,
                custom_id=f"cf:reportundo:{report_id}",
            )
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> ReportUndoButton:
        return cls(row_id(match["report"], ROW_ID_MAX) or 0)

    async def callback(self, interaction: discord.Interaction) -> None:
        bot = bot_of(interaction)
        # Acknowledged before the database: the answer is an edit of the report's message.
        await interaction.response.defer()
        try:
            undone = await bot.services.reports.undo(actor_of(interaction), self.report_id)
        except CampfireError as error:
            await reply(interaction, f"⚠ {error.message}")
            return
        embed = report_embed(undone.report)
        embed.colour = discord.Colour.dark_grey()
        embed.add_field(name="Undone", value=f"by {interaction.user.mention}", inline=False)
        try:
            await interaction.edit_original_response(embed=embed, view=None)
        except discord.HTTPException:
            log.warning("could not mark report %s undone", self.report_id, exc_info=True)
        await _show_in_adventure(bot, undone.channel_id, undone.move, undone.report.turn)


async def _show_in_adventure(bot: CampfireBot, channel_id: int, move: Any, turn: int) -> None:
    """The undo, seen where the adventure is played: a line saying so, the undone turns marked
    and the buttons moved, as an undo there shows it."""
    channel = await _channel(bot, channel_id)
    if channel is None:
        log.warning("could not show the report's undo in %s: the channel is gone", channel_id)
        return
    try:
        await bot.narrator.pacer.acquire(channel_id)
        who = discord.utils.escape_markdown(move.mover or "A moderator")
        await channel.send(
            f"↩️ *{who} undid turn {turn} after a report.*",
            allowed_mentions=discord.AllowedMentions.none(),
        )
        await bot.narrator.show_head(channel, move)
    except discord.HTTPException as error:
        log.warning("could not show the report's undo in %s: %s", channel_id, error)


async def _channel(bot: CampfireBot, channel_id: int) -> Any:
    """A channel from the cache, else asked of Discord; None when it is gone or out of sight."""
    channel = bot.get_channel(channel_id)
    if channel is not None:
        return channel
    try:
        return await bot.fetch_channel(channel_id)
    except discord.HTTPException:
        return None
