"""An adventure's thread on Discord: opening it, giving it up when its start failed, reopening
it once it has archived, and pointing a channel's players to the adventures in its threads.

Discord's rules relied on (discord-api-docs, Threads: "Active & Archived Threads", "Locked
Threads", "Editing & Deleting Threads"; Channel: "Modify Channel", "Delete/Close Channel",
"Add Thread Member"):

- a thread archives after a quiet spell; then it drops out of the channel's list and of the
  gateway's cache, and "users cannot edit messages, … use application commands" there (an
  answer to an interaction there is refused, 50083); sending a message unarchives it unless a
  moderator locked it;
- anyone who may talk in a thread may unarchive it while it is not locked (``archived=false``);
  only Manage Threads unarchives a locked one, or locks one;
- everything else (renaming, archiving, locking) takes Manage Threads, its creator's too ("If
  modifying a thread and setting archived to false, when locked is also false, only the
  SEND_MESSAGES permission is required. Otherwise, requires the MANAGE_THREADS permission"),
  and so does deleting it; the invite does not ask for it. So a thread is named as it opens,
  never renamed, and the bot never archives one;
- a member is added only to an active thread, by someone who may talk in it.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import discord

if TYPE_CHECKING:
    from cogs.ui import ChannelsClient
    from cogs.ui.pacing import RatePacer
    from engine.play.answers import ThreadAdventure

log = logging.getLogger(__name__)

#: Minutes of quiet before a thread archives: a day, the longest every server may choose.
AUTO_ARCHIVE_MINUTES = 1440

#: What is left in a thread whose adventure could not start, when it cannot be deleted.
START_FAILED_NOTE = (
    "⚠ This adventure could not start, so nothing will be played in this thread; it archives by "
    "itself after a day of quiet. The message in {parent} says why; `/start` there to try again."
)


async def open_adventure_thread(
    interaction: discord.Interaction, name: str, reason: str, pacer: RatePacer
) -> discord.Thread:
    """A public thread for an adventure begun in this text channel, with whoever began it in
    it, so it shows in their thread list (Add Thread Member: the thread is active as it opens).
    Both requests count against the bot's global budget, so they wait for the pacer."""
    channel = interaction.channel
    assert isinstance(channel, discord.TextChannel)  # cogs.ui.interaction.place_of decided so
    await pacer.acquire(None)
    thread = await channel.create_thread(
        name=name[:100] or "Adventure",
        type=discord.ChannelType.public_thread,
        auto_archive_duration=AUTO_ARCHIVE_MINUTES,
        reason=reason,
    )
    try:
        await pacer.acquire(None)
        await thread.add_user(interaction.user)
    except discord.HTTPException as error:
        # The adventure runs all the same; the thread is linked in the answer to the start.
        log.warning("could not add %s to thread %s: %s", interaction.user.id, thread.id, error)
    return thread


async def give_up_thread(interaction: discord.Interaction, thread: discord.Thread) -> None:
    """A start that failed leaves no empty thread behind where the bot has Manage Threads (it is
    deleted); elsewhere the thread says why it is empty. Archiving it would take Manage Threads
    as well (see the module's notes), so it archives by itself after its quiet spell."""
    if interaction.app_permissions.manage_threads:
        with contextlib.suppress(discord.HTTPException):
            await thread.delete()
            return
    try:
        parent = thread.parent.mention if thread.parent is not None else "the channel"
        await thread.send(START_FAILED_NOTE.format(parent=parent))
    except discord.HTTPException as error:
        log.warning("could not close the thread %s of a failed start: %s", thread.id, error)


async def reopen(thread: discord.Thread) -> bool:
    """Unarchive ``thread`` so the bot may answer and edit there; whether it is open now. A
    thread a moderator locked stays as they left it (False)."""
    if not thread.archived:
        return True
    if thread.locked:
        return False
    try:
        await thread.edit(archived=False)
    except discord.HTTPException as error:
        log.warning("could not unarchive thread %s: %s %s", thread.id, error.status, error.text)
        return False
    return True


async def reopen_thread_of(interaction: discord.Interaction) -> bool:
    """Before an interaction in an archived thread is answered: unarchive it (the answer would
    be refused there, and so would every edit after it). False, and the interaction is left
    unanswered, in a thread a moderator locked: Discord refuses any answer there, and reopening
    it would undo the moderator's lock. Autocomplete posts nothing, and is let through."""
    channel = interaction.channel
    if interaction.type is discord.InteractionType.autocomplete:
        return True
    if not isinstance(channel, discord.Thread) or not channel.archived:
        return True
    if await reopen(channel):
        return True
    log.info("interaction %s left unanswered in locked thread %s", interaction.id, channel.id)
    return False


async def thread_now(client: ChannelsClient, thread_id: int) -> discord.Thread | None:
    """The thread as it stands: from the cache while active, else asked of Discord (archived
    threads are not in the gateway's cache); None once it is gone or out of the bot's sight."""
    channel = client.get_channel(thread_id)
    if isinstance(channel, discord.Thread):
        return channel
    try:
        fetched = await client.fetch_channel(thread_id)
    except discord.HTTPException as error:
        log.info("thread %s cannot be read: %s %s", thread_id, error.status, error.text)
        return None
    return fetched if isinstance(fetched, discord.Thread) else None


async def adventures_in_threads(
    client: ChannelsClient, adventures: list[ThreadAdventure]
) -> str | None:
    """What to tell a player acting in a channel whose adventures run in threads of it: each
    linked, and reopened when archived so the next action there is answered; a thread a
    moderator locked is said to be so, with the way to begin anew. None when none of those
    threads is there any more."""
    playable: list[str] = []
    locked: list[str] = []
    for adventure in adventures:
        thread = await thread_now(client, adventure.thread_id)
        if thread is None:
            continue
        name = f"{adventure.icon} **{discord.utils.escape_markdown(adventure.title)}**".strip()
        if thread.locked:
            locked.append(
                f"{name} is in {thread.mention}, which a moderator locked: it cannot go on there."
            )
            continue
        reopened = thread.archived and await reopen(thread)
        note = " (it had been archived after a quiet spell; it is open again)" if reopened else ""
        playable.append(f"{name} goes on in {thread.mention}{note}.")
    if not playable and not locked:
        return None
    lines: list[str] = []
    if playable:
        lines.append(
            "The adventure here runs in a thread of this channel; play there:"
            if len(playable) == 1
            else "The adventures here run in threads of this channel; play in one:"
        )
        lines += playable
    lines += locked
    if not playable:
        lines.append("`/start` here begins a new adventure.")
    return "\n".join(lines)
