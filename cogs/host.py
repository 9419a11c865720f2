"""/host …: the host's controls over a server adventure: lock, mute, kick, transfer, rights,
the party and the turn mode.

Each change is one call to ``engine.people.host_controls``; who may make it (the host, members who
manage the server or its messages) and whom it may name is the engine's rule
(``engine.people.access``). A change is deferred publicly before it is written, and its answer is
the party's announcement in the adventure's channel or thread; a refusal replaces the "thinking…"
with an answer for the one who asked alone. ``/host show`` answers privately, to anyone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.content_rules import WORDS_HELP, banned_text, parse_words
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.replies import defer_request, reply
from engine.people.access.checks import Member
from engine.people.access.rules import Actor
from engine.people.host_controls import HostChange, HostSettings, RewriteRight, TurnMode

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

#: Announcements quote names; whatever a name holds pings nobody.
NO_PINGS = discord.AllowedMentions.none()

MODES_SAID = {
    TurnMode.FREE: "each action is a turn, first come, first served",
    TurnMode.ROUNDS: "one action per player a round; it closes when everyone has acted, "
    "when the host presses Close, or after a timeout",
    TurnMode.HOST: "one action per player a round; the host closes each round",
}

RIGHTS_SAID = {
    RewriteRight.AUTHOR: "the player who wrote a turn, the host and managers",
    RewriteRight.HOST: "only the host and managers",
    RewriteRight.ANYONE: "anyone here who may act",
}


def _name(text: str) -> str:
    return discord.utils.escape_markdown(text)


def member_named(interaction: discord.Interaction, user: discord.User | discord.Member) -> Member:
    """Whom a host control names, with what Discord tells of them in this place: their
    permissions here come resolved with the interaction (a member's; a user who is not a
    member of the server has none)."""
    permissions = user.resolved_permissions if isinstance(user, discord.Member) else None
    in_place = permissions is not None and permissions.view_channel
    leads = permissions is not None and (
        permissions.administrator or permissions.manage_guild or permissions.manage_messages
    )
    return Member(user.id, user.display_name, in_place=in_place, leads=leads, is_bot=user.bot)


def settings_text(settings: HostSettings) -> str:
    """``/host show``: the controls as they stand."""
    host = f"<@{settings.host_id}>" if settings.host_id is not None else "nobody (they left)"
    lock = (
        "🔒 **locked**: only the host and managers may act"
        if settings.locked
        else "🔓 open: everyone here may act"
    )
    lines = [
        f"**Host controls** · {_name(settings.title)}",
        f"Host: {host}",
        f"Lock: {lock}",
        f"Muted: {', '.join(f'<@{u}>' for u in settings.muted) or 'nobody'}",
        f"Removed (kicked): {', '.join(f'<@{u}>' for u in settings.kicked) or 'nobody'}",
        f"Retry, undo and edit: **{settings.rewrite_right}** "
        f"({RIGHTS_SAID[settings.rewrite_right]})",
        f"Turns: **{settings.turn_mode}** ({MODES_SAID[settings.turn_mode]})",
        "Party: "
        + (
            "**closed** (only its players act; nobody joins)"
            if settings.party_closed
            else "open (anyone here may act or `/join`)"
        ),
    ]
    return "\n".join(lines)


class HostCog(commands.Cog):
    host = app_commands.Group(
        name="host",
        description="The host's controls: lock, mute, kick, transfer, rights, party, mode",
    )

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    async def _announce(
        self,
        interaction: discord.Interaction,
        change: Callable[[Actor, int], Awaitable[HostChange]],
        said: Callable[[HostChange, str], str],
    ) -> HostChange:
        """Make ``change`` and tell the party what ``said`` says of it and who made it."""
        await defer_request(interaction)
        made = await change(actor_of(interaction), channel_id_of(interaction))
        who = _name(interaction.user.display_name)
        await interaction.followup.send(said(made, who), allowed_mentions=NO_PINGS)
        return made

    @host.command(name="show")
    async def show(self, interaction: discord.Interaction) -> None:
        """What the host set here: the lock, muted and removed players, who may retry."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        settings = await self.bot.services.host_controls.show(channel_id_of(interaction))
        await reply(interaction, settings_text(settings))

    @host.command(name="lock")
    async def lock(self, interaction: discord.Interaction) -> None:
        """Only the host and managers may act until /host unlock."""
        controls = self.bot.services.host_controls
        await self._announce(
            interaction,
            lambda actor, place: controls.lock(actor, place, locked=True),
            lambda _, who: (
                f"🔒 *{who} locked the adventure: only the host and managers may act "
                "until it is unlocked.*"
            ),
        )

    @host.command(name="unlock")
    async def unlock(self, interaction: discord.Interaction) -> None:
        """Everyone may act again."""
        controls = self.bot.services.host_controls
        await self._announce(
            interaction,
            lambda actor, place: controls.lock(actor, place, locked=False),
            lambda _, who: f"🔓 *{who} unlocked the adventure: everyone may act again.*",
        )

    @host.command(name="mute")
    @app_commands.describe(player="Who may no longer act here")
    async def mute(self, interaction: discord.Interaction, player: discord.User) -> None:
        """Stop a player acting here (nor may they retry, undo or edit) until /host unmute."""
        target = member_named(interaction, player)
        controls = self.bot.services.host_controls
        await self._announce(
            interaction,
            lambda actor, place: controls.mute(actor, place, target),
            lambda _, who: (
                f"🔇 *{who} muted {_name(target.name)}: they cannot act here until unmuted.*"
            ),
        )

    @host.command(name="unmute")
    @app_commands.describe(player="Who may act here again (muted or removed)")
    async def unmute(self, interaction: discord.Interaction, player: discord.User) -> None:
        """Let a muted or removed player act here again."""
        target = member_named(interaction, player)
        controls = self.bot.services.host_controls
        await self._announce(
            interaction,
            lambda actor, place: controls.unmute(actor, place, target),
            lambda _, who: f"🔊 *{who} unmuted {_name(target.name)}: they may act here again.*",
        )

    @host.command(name="kick")
    @app_commands.describe(player="Who leaves this adventure")
    async def kick(self, interaction: discord.Interaction, player: discord.User) -> None:
        """Remove a player from this adventure: they cannot act, nor rewrite their turns."""
        target = member_named(interaction, player)
        controls = self.bot.services.host_controls
        await self._announce(
            interaction,
            lambda actor, place: controls.mute(actor, place, target, kick=True),
            lambda _, who: (
                f"🚪 *{who} removed {_name(target.name)} from the adventure: they "
                "cannot act here, nor retry, undo or edit their turns.* "
                # A kick is undone like a mute: said where the host sees it, as it is made.
                "`/host unmute player:` lets them back in."
            ),
        )

    @host.command(name="transfer")
    @app_commands.describe(player="The new host: a member who plays here")
    async def transfer(self, interaction: discord.Interaction, player: discord.User) -> None:
        """Make another member the host of this adventure."""
        target = member_named(interaction, player)
        controls = self.bot.services.host_controls

        def said(change: HostChange, who: str) -> str:
            before = (
                f" in place of {_name(change.previous_host_name)}"
                if change.previous_host_name and change.previous_host_id != interaction.user.id
                else ""
            )
            return f"👑 *{who} made {_name(target.name)} the host{before}.*"

        await self._announce(
            interaction, lambda actor, place: controls.transfer(actor, place, target), said
        )

    @host.command(name="rights")
    @app_commands.describe(
        retry="Who may retry, undo and edit turns: author (who wrote it), host, or anyone"
    )
    async def rights(
        self,
        interaction: discord.Interaction,
        retry: Literal["author", "host", "anyone"],
    ) -> None:
        """Who may retry, undo and edit turns, besides the host and managers."""
        right = RewriteRight(retry)
        controls = self.bot.services.host_controls
        await self._announce(
            interaction,
            lambda actor, place: controls.set_rights(actor, place, right),
            lambda _, who: (
                f"⚖️ *{who} set who may retry, undo and edit turns: **{right}** "
                f"({RIGHTS_SAID[right]}).*"
            ),
        )

    @host.command(name="party")
    @app_commands.describe(
        state="closed: only the party's players act and nobody joins; open: anyone here may"
    )
    async def party(
        self,
        interaction: discord.Interaction,
        state: Literal["open", "closed"],
    ) -> None:
        """Close the party to newcomers (the others watch), or open it again."""
        closed = state == "closed"
        controls = self.bot.services.host_controls
        await self._announce(
            interaction,
            lambda actor, place: controls.close_party(actor, place, closed=closed),
            lambda _, who: (
                f"🚪 *{who} closed the party: only its players act now, and nobody joins "
                "(`/party` shows who plays).*"
                if closed
                else f"🚪 *{who} opened the party: anyone here may act or `/join`.*"
            ),
        )

    @host.command(name="mode")
    @app_commands.describe(
        mode="free (each action is a turn), rounds (one action each a round), host (you close "
        "each round)"
    )
    async def mode(
        self,
        interaction: discord.Interaction,
        mode: Literal["free", "rounds", "host"],
    ) -> None:
        """How actions become turns: free, in rounds, or rounds the host closes."""
        turn_mode = TurnMode(mode)
        controls = self.bot.services.host_controls
        made = await self._announce(
            interaction,
            lambda actor, place: controls.set_mode(actor, place, turn_mode),
            lambda _, who: (
                f"🎲 *{who} set the turn mode: **{turn_mode}** ({MODES_SAID[turn_mode]}).*"
            ),
        )
        if turn_mode is TurnMode.FREE:
            # The round that was waiting is dropped (engine.people.host_controls): its panel says
            # so.
            await self.bot.round_panels.close_panel(
                channel_id_of(interaction), made.settings.adventure_id, dropped=True
            )

    @host.command(name="banned")
    @app_commands.describe(words=WORDS_HELP)
    async def banned(self, interaction: discord.Interaction, words: str | None = None) -> None:
        """Words this adventure bans of its own: actions holding one are refused."""
        # To the host alone: a list of banned words is not for the whole party to read.
        await interaction.response.defer(ephemeral=True, thinking=True)
        controls = self.bot.services.host_controls
        actor, place = actor_of(interaction), channel_id_of(interaction)
        if words is None:
            listed = await controls.banned(actor, place)
        else:
            listed = await controls.set_banned(actor, place, parse_words(words))
        await reply(interaction, banned_text(listed, "this adventure"))


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(HostCog(bot))
