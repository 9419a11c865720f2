"""The Discord permissions Campfire's bot itself needs: each one, why, and where.

The one place that names them. The invite (``python -m bot invite``), the preflight before
every command and story button (``cogs.ui.preflight``) and the note a player gets when Discord
refuses the bot mid-turn all read this module, so adding a permission is one entry here.

What a *member* may do is another matter, decided in ``engine.people.access``.

Answers to an interaction (its response, its follow-ups, ephemeral or not) go through the
interaction's webhook and need no channel permission; only what the bot posts, edits or opens
in a channel as itself does (discord-api-docs, Receiving and Responding; Create Message,
"Limitations"; Threads, "Permissions").
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

import discord


@dataclass(frozen=True)
class BotPermission:
    """One permission: discord.py's flag name, Discord's name for it, why Campfire needs it."""

    flag: str
    name: str
    why: str
    required: bool = True

    @property
    def value(self) -> int:
        return getattr(discord.Permissions, self.flag).flag


VIEW_CHANNEL = BotPermission(
    "view_channel",
    "View Channel",
    "to see the channels and threads it plays in (without it Discord answers 50001 Missing "
    "Access to everything the bot does there)",
)
SEND_MESSAGES = BotPermission(
    "send_messages",
    "Send Messages",
    "to narrate in a channel (the story is streamed into the bot's own messages)",
)
SEND_MESSAGES_IN_THREADS = BotPermission(
    "send_messages_in_threads",
    "Send Messages in Threads",
    "to narrate in an adventure's thread (Send Messages does not count in threads)",
)
CREATE_PUBLIC_THREADS = BotPermission(
    "create_public_threads",
    "Create Public Threads",
    "/start and /adventure import in a text channel open a thread for the adventure",
)
EMBED_LINKS = BotPermission(
    "embed_links",
    "Embed Links",
    "undone and retried turns are marked with an embed under their text",
)
ATTACH_FILES = BotPermission(
    "attach_files",
    "Attach Files",
    "/adventure export, /scenario export, /script test and Insights' full prompt are files",
)
MANAGE_THREADS = BotPermission(
    "manage_threads",
    "Manage Threads",
    "optional: tidy away the thread of a start that failed, and write in threads a moderator "
    "locked",
    required=False,
)

#: Every permission, in the order the invite lists them. Read Message History is not among
#: them: the bot never reads a channel's history nor fetches a message (the two routes that
#: need it, discord-api-docs, Message: "Get Channel Messages", "Get Channel Message"), and it
#: sends no replies (message_reference, which would need it: "Create Message", Limitations).
ALL: tuple[BotPermission, ...] = (
    VIEW_CHANNEL,
    SEND_MESSAGES,
    SEND_MESSAGES_IN_THREADS,
    CREATE_PUBLIC_THREADS,
    EMBED_LINKS,
    ATTACH_FILES,
    MANAGE_THREADS,
)
REQUIRED: tuple[BotPermission, ...] = tuple(p for p in ALL if p.required)
OPTIONAL: tuple[BotPermission, ...] = tuple(p for p in ALL if not p.required)


def invite_permissions() -> int:
    """The permission integer of the invite: exactly the required permissions."""
    return sum(p.value for p in REQUIRED)


class Place(enum.Enum):
    """Where an interaction came from, as far as the bot's permissions go."""

    DM = "dm"
    CHANNEL = "channel"  # a server channel that is not a thread
    THREAD = "thread"


class Does(enum.Enum):
    """What a command or button will do in Discord besides answering the interaction."""

    #: Answers the interaction only (privately or publicly): no channel permission needed.
    ANSWERS = "answers"
    #: Narrates here: posts and edits the bot's own messages, marks undone turns with embeds.
    NARRATES = "narrates"
    #: Starts an adventure: in a server's text channel, opens a thread and narrates in it.
    STARTS = "starts"


def kind_of_place(interaction: discord.Interaction) -> Place:
    if interaction.guild_id is None:
        return Place.DM
    if isinstance(interaction.channel, discord.Thread):
        return Place.THREAD
    return Place.CHANNEL


def needed(place: Place, does: Does) -> tuple[BotPermission, ...]:
    """The permissions doing ``does`` at ``place`` takes."""
    if does is Does.ANSWERS or place is Place.DM:
        # A DM's permissions are fixed (discord-api-docs, Receiving and Responding:
        # app_permissions in DMs); the only refusal there is a closed DM (50007), which no
        # permission fixes.
        return ()
    if place is Place.THREAD or (does is Does.STARTS and place is Place.CHANNEL):
        # A start in a channel narrates in the thread it opens, which takes its permissions
        # from this channel (discord-api-docs, Permissions: "Inherited Permissions (Threads)").
        send = SEND_MESSAGES_IN_THREADS
    else:
        send = SEND_MESSAGES
    needs = [VIEW_CHANNEL, send, EMBED_LINKS]
    if does is Does.STARTS and place is Place.CHANNEL:
        needs.insert(1, CREATE_PUBLIC_THREADS)
    return tuple(needs)


def missing(app_permissions: discord.Permissions, place: Place, does: Does) -> list[BotPermission]:
    """What the bot lacks for ``does`` at ``place``, given the interaction's
    ``app_permissions`` (the bot's permissions there, overwrites included)."""
    if app_permissions.administrator:
        return []
    needs = needed(place, does)
    if needs and not app_permissions.view_channel:
        # Without it nothing else counts (discord-api-docs, Permissions, "Implicit
        # Permissions"): it is the one thing to grant first.
        return [VIEW_CHANNEL]
    lacking = [p for p in needs if not getattr(app_permissions, p.flag)]
    if SEND_MESSAGES in lacking or SEND_MESSAGES_IN_THREADS in lacking:
        # Denying the send right implicitly denies Embed Links and Attach Files (ibid.);
        # discord.py's own permissions_for applies that, app_permissions does not (Channel,
        # "app_permissions": "does not include implicit permissions").
        lacking = [p for p in lacking if p not in (EMBED_LINKS, ATTACH_FILES)]
    return lacking


def names(permissions: Iterable[BotPermission]) -> str:
    """ "A, B and C"."""
    shown = [f"**{p.name}**" for p in permissions]
    if len(shown) <= 1:
        return "".join(shown)
    return ", ".join(shown[:-1]) + " and " + shown[-1]


#: A private thread the bot was not added to: out of its sight whatever the channel grants
#: ("only viewable by those invited and those with the MANAGE_THREADS permission":
#: discord-api-docs, Channel, Channel Types).
PRIVATE_THREAD_NOTE = (
    "⚠ Campfire can't see this private thread: private threads are only for those added to "
    "them. Add the bot by mentioning it here (@Campfire), or play in a public thread. Nothing "
    "was changed."
)


def missing_note(lacking: list[BotPermission], place: Place, *, private: bool = False) -> str:
    """Tells a player what the bot lacks here and who can fix it. ``private``: a private
    thread, where View Channel missing means the bot was not added to it."""
    if private and VIEW_CHANNEL in lacking:
        return PRIVATE_THREAD_NOTE
    where = "this thread's channel" if place is Place.THREAD else "this channel"
    return (
        f"⚠ Campfire can't do that here: it lacks {names(lacking)} in {where}. "
        f"A server admin can grant the bot {'them' if len(lacking) > 1 else 'it'} "
        "(Edit Channel → Permissions, or the bot's role)."
    )


#: Discord's codes for a refusal no retry can change (the bot may not act there at all).
MISSING_ACCESS = 50001
CANNOT_MESSAGE_USER = 50007
MISSING_PERMISSIONS = 50013
FINAL_REFUSALS = frozenset({MISSING_ACCESS, CANNOT_MESSAGE_USER, MISSING_PERMISSIONS})


#: The place itself is gone or closed: 10003 Unknown Channel (the thread or channel was deleted),
#: 50083 "Operation cannot be performed on an archived thread" (archived, or locked: in a locked
#: thread only members with Manage Threads may post; discord-api-docs, Threads, "Locked
#: Threads").
UNKNOWN_CHANNEL = 10003
THREAD_CLOSED = 50083
PLACE_GONE = frozenset({UNKNOWN_CHANNEL, THREAD_CLOSED})


def is_final_refusal(error: BaseException) -> bool:
    """Whether Discord refused the bot for good here (403: 50001, 50013, 50007; the place
    deleted or closed: 10003, 50083): every further request would be refused the same way, and
    each refusal counts towards Discord's invalid-request limit (discord-api-docs, Rate Limits:
    "Invalid Request Limit")."""
    return isinstance(error, discord.Forbidden) or (
        isinstance(error, discord.HTTPException) and error.code in FINAL_REFUSALS | PLACE_GONE
    )


def permissions_now(interaction: discord.Interaction) -> discord.Permissions | None:
    """The bot's permissions where the interaction came from as the gateway has told them
    since (overwrites changed after the interaction are in; ``app_permissions`` are not), or
    None where the cache cannot say."""
    guild, channel = interaction.guild, interaction.channel
    if (
        guild is None
        or guild.me is None
        or not isinstance(channel, discord.abc.GuildChannel | discord.Thread)
    ):
        return None
    return channel.permissions_for(guild.me)


#: What a refusal note opens with: what was done all the same.
TURN_SAVED = "The turn is saved, but it could not be shown in full"
STORY_MOVED = "The story moved, but the messages here could not show it"


def refusal_note(
    error: discord.HTTPException,
    place: Place,
    now: discord.Permissions | None = None,
    *,
    done: str = TURN_SAVED,
) -> str:
    """Tells a player, once, that ``done`` happened though Discord refused to show it;
    ``now``: the bot's permissions there as last heard, to name only what is missing."""
    if error.code == UNKNOWN_CHANNEL:
        why = "this thread or channel was deleted while the turn was being written."
    elif error.code == THREAD_CLOSED:
        why = (
            "this thread was locked or archived while the turn was being written. A moderator "
            "can unlock it (Manage Threads); the story goes on there, or anywhere with "
            "`/adventure resume`."
        )
    elif error.code == CANNOT_MESSAGE_USER:
        why = (
            "Discord won't let Campfire message you here (your privacy settings, or the bot "
            "is blocked). Allow direct messages from this server's members to see the story."
        )
    else:
        lacking = (missing(now, place, Does.NARRATES) if now is not None else []) or list(
            needed(place, Does.NARRATES) or (VIEW_CHANNEL, SEND_MESSAGES)
        )
        where = "this thread's channel" if place is Place.THREAD else "this channel"
        why = (
            f"Discord refused Campfire the right to post here. A server admin can grant the "
            f"bot {names(lacking)} in {where}."
        )
    return f"⚠ {done}: {why}"
