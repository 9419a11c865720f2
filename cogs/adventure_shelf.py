"""/adventure list, /adventure resume and /adventure end: no adventure is lost silently.

A place's adventures, running and ended, are listed to the player alone (``engine.play.shelf``
reads them); an ended one comes back where it ran, its thread reopened by the message that
shows its story again; the one running here ends on purpose. Whatever ends an adventure is
asked first (``cogs.ui.ask_first``). Each command defers before it reads; the Confirm press
acknowledges (the question, edited) before it writes. The commands join the ``/adventure``
group (``cogs.ui.adventure_group``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import discord
from discord import app_commands

from cogs.ui import bot_of
from cogs.ui.adventure_group import AdventureCommands
from cogs.ui.ask_first import AskFirst
from cogs.ui.content import fit_embed, fit_text
from cogs.ui.interaction import actor_of, channel_id_of, runs_adventures
from cogs.ui.threads import thread_now
from engine.errors import InvalidInput, NotFound
from engine.platform.sanitise import echo
from engine.play.shelf import EndPlan, ResumePlan, ShelvedAdventure

if TYPE_CHECKING:
    from discord.abc import MessageableChannel

    from cogs.ui import CampfireBot

log = logging.getLogger(__name__)

SHELF_COLOUR = discord.Colour.dark_teal()
#: The most of a title an entry of the list shows.
TITLE_SHOWN = 80


def _here(interaction: discord.Interaction) -> tuple[int, bool]:
    """The place the command came from, and whether it is a server's text channel, whose
    adventures are those of the threads opened from it (a thread's or a DM's are its own)."""
    return channel_id_of(interaction), not runs_adventures(interaction)


def _when(moment: datetime, style: str) -> str:
    """A Discord timestamp: each reader sees it in their own time zone and language."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return f"<t:{int(aware.timestamp())}:{style}>"


def _name(adventure: ShelvedAdventure) -> str:
    title = discord.utils.escape_markdown(echo(adventure.title, TITLE_SHOWN)) or "(untitled)"
    return f"{adventure.icon} {title}".strip()


def entry(adventure: ShelvedAdventure, *, in_threads: bool) -> str:
    """Two lines of the list: number, title and state; when it began and was last played."""
    state = "▶ running" if adventure.running else "⏹ ended"
    if in_threads and adventure.place_id is not None:
        state += f" in <#{adventure.place_id}>"
    turns = f"{adventure.turns:,} turn{'s' if adventure.turns != 1 else ''}"
    return (
        f"`#{adventure.adventure_id}` **{_name(adventure)}** · {state}\n"
        f"started {_when(adventure.started_at, 'd')}, last played "
        f"{_when(adventure.played_at, 'R')} · {turns}"
    )


def shelf_embed(adventures: list[ShelvedAdventure], *, in_threads: bool) -> discord.Embed:
    if not adventures:
        where = "from this channel" if in_threads else "here"
        description = f"No adventure was started {where} yet. `/start` begins one."
    else:
        description = "\n".join(entry(a, in_threads=in_threads) for a in adventures)
    embed = discord.Embed(
        title="Adventures started from this channel" if in_threads else "Adventures here",
        description=description,
        colour=SHELF_COLOUR,
    )
    if any(not a.running for a in adventures):
        embed.set_footer(
            text="/adventure resume adventure: brings an ended one back where it ran "
            "(its number, or choose it as you type)"
        )
    return fit_embed(embed)


def _label(adventure: ShelvedAdventure) -> str:
    """An autocomplete choice: plain text (no markdown, no timestamps), at most 100."""
    turns = f"{adventure.turns} turn{'s' if adventure.turns != 1 else ''}"
    started = adventure.started_at.strftime("%Y-%m-%d")
    head = f"#{adventure.adventure_id} {adventure.icon} ".replace("  ", " ")
    tail = f" · {turns} · started {started}"
    return head + echo(adventure.title, 100 - len(head) - len(tail)) + tail


# --- /adventure list -----------------------------------------------------------------------------


@app_commands.command(name="list")
async def list_adventures(interaction: discord.Interaction) -> None:
    """The adventures of this place, running and ended, newest first (to you alone)."""
    here, in_threads = _here(interaction)
    await interaction.response.defer(ephemeral=True, thinking=True)
    listed = await bot_of(interaction).services.shelf.listing(here, from_channel=in_threads)
    await interaction.followup.send(
        embed=shelf_embed(listed, in_threads=in_threads), ephemeral=True
    )


# --- /adventure resume ---------------------------------------------------------------------------


@app_commands.command(name="resume")
@app_commands.describe(adventure="An ended adventure of this place: choose it as you type")
async def resume_adventure(
    interaction: discord.Interaction,
    adventure: app_commands.Range[str, 1, 100],
) -> None:
    """Bring an ended adventure back where it ran (its thread, or this DM)."""
    here, in_threads = _here(interaction)
    await interaction.response.defer(ephemeral=True, thinking=True)
    shelf = bot_of(interaction).services.shelf
    plan = await shelf.resume_plan(actor_of(interaction), here, adventure, from_channel=in_threads)
    target = await _place_of(interaction, plan)
    if plan.replaces_title is None:
        await _resume(interaction, plan, target, here=here, in_threads=in_threads)
        return

    async def resume_it(press: discord.Interaction) -> None:
        await press.response.edit_message(content="Bringing it back…", view=None)
        await _resume(press, plan, target, here=here, in_threads=in_threads)

    running = discord.utils.escape_markdown(plan.replaces_title)
    title = discord.utils.escape_markdown(plan.title)
    await interaction.edit_original_response(
        content=fit_text(
            f"⚠ **{running}** is running there. Bringing back **{title}** ends it (its story is "
            "kept: `/adventure resume` brings it back in turn). Bring it back?"
        ),
        view=AskFirst("Resume it", resume_it),
    )


async def _place_of(interaction: discord.Interaction, plan: ResumePlan) -> MessageableChannel:
    """Where the adventure comes back: here (its thread, or this DM), or its thread of this
    channel as it stands now. Refused before anything is written when that thread is gone or
    a moderator locked it."""
    channel = interaction.channel
    if plan.place_id == interaction.channel_id and isinstance(
        channel, discord.Thread | discord.DMChannel
    ):
        return channel
    thread = await thread_now(interaction.client, plan.place_id)
    title = plan.title
    if thread is None:
        raise NotFound(
            f"The thread where “{title}” ran is gone (deleted, or I can no longer see it), so it "
            "cannot come back there. Nothing was changed."
        )
    if thread.locked:
        raise InvalidInput(
            f"A moderator locked the thread where “{title}” ran ({thread.mention}), so it "
            "cannot go on there. Nothing was changed."
        )
    return thread


async def _resume(
    interaction: discord.Interaction,
    plan: ResumePlan,
    target: MessageableChannel,
    *,
    here: int,
    in_threads: bool,
) -> None:
    """Write the resume (the interaction acknowledged already), then show the story again in
    its place: the first message there reopens an archived thread."""
    bot = bot_of(interaction)
    resumed = await bot.services.shelf.resume(
        actor_of(interaction), here, plan, from_channel=in_threads
    )
    header = f"{resumed.icon} **{discord.utils.escape_markdown(resumed.title)}**".strip()
    who = discord.utils.escape_markdown(interaction.user.display_name)
    ended = ""
    if resumed.replaced_title is not None:
        ended = f" **{discord.utils.escape_markdown(resumed.replaced_title)}** ended."
    if isinstance(target, discord.Thread):
        await bot.narrator.post(
            target,
            f"↩ {who} brought back {header}.{ended} It goes on from where it was:",
        )
    await bot.narrator.post_opening(
        target,
        resumed.head_text,
        resumed.adventure_id,
        resumed.version,
        node_id=resumed.head_node_id,
    )
    where = f" in {target.mention}" if isinstance(target, discord.Thread) else ""
    await interaction.edit_original_response(
        content=fit_text(f"{header} is back{where}; it goes on from where it was.{ended}"),
        view=None,
    )


@resume_adventure.autocomplete("adventure")
async def adventure_choices(
    interaction: discord.Interaction, current: str
) -> list[app_commands.Choice[str]]:
    here, in_threads = _here(interaction)
    try:
        listed = await bot_of(interaction).services.shelf.listing(here, from_channel=in_threads)
    except Exception:  # noqa: BLE001 - autocomplete offers nothing rather than failing
        log.warning("no adventures to offer in %s", here, exc_info=True)
        return []
    typed = current.casefold().strip().removeprefix("#")
    return [
        app_commands.Choice(name=_label(a), value=str(a.adventure_id))
        for a in listed
        if not a.running and (typed in a.title.casefold() or typed == str(a.adventure_id))
    ][:25]


# --- /adventure end ------------------------------------------------------------------------------


@app_commands.command(name="end")
async def end_adventure(interaction: discord.Interaction) -> None:
    """End the adventure running here, after asking (/adventure resume brings it back)."""
    here = channel_id_of(interaction)
    await interaction.response.defer(ephemeral=True, thinking=True)
    plan = await bot_of(interaction).services.shelf.end_plan(
        actor_of(interaction), here, in_threads=not runs_adventures(interaction)
    )

    async def end_it(press: discord.Interaction) -> None:
        await press.response.edit_message(content="Ending it…", view=None)
        await _end(press, here, plan)

    title = discord.utils.escape_markdown(plan.title)
    await interaction.edit_original_response(
        content=fit_text(
            f"End **{title}**? Its story is kept, every branch and save point: "
            "`/adventure resume` brings it back."
        ),
        view=AskFirst("End it", end_it),
    )


async def _end(interaction: discord.Interaction, here: int, plan: EndPlan) -> None:
    bot = bot_of(interaction)
    title = await bot.services.shelf.end(actor_of(interaction), here, plan)
    shown = discord.utils.escape_markdown(title)
    await interaction.edit_original_response(
        content=fit_text(f"⏹ **{shown}** has ended. `/adventure resume` brings it back."),
        view=None,
    )
    channel = interaction.channel
    if interaction.guild is not None and isinstance(channel, discord.Thread):
        # In a server everyone playing here is told; a DM's player was told above.
        who = discord.utils.escape_markdown(interaction.user.display_name)
        await bot.narrator.post(
            channel, f"⏹ {who} ended the adventure **{shown}**; `/adventure resume` brings it back."
        )


#: The /adventure group is the steering cog's: it must be there to add to (``cogs.ui.discovery``).
LOAD_AFTER = ("cogs.steering",)


class AdventureShelfCog(AdventureCommands):
    COMMANDS = (list_adventures, resume_adventure, end_adventure)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(AdventureShelfCog(bot))
