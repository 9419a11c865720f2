"""/operator status|block|unblock: the bot's owner's view of it, and whom it refuses.

Only the operator (``cogs.ui.gate.is_operator``; the rule is ``engine.people.access``'s) gets an
answer; anyone else is refused privately. Everything answers privately.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.gate import operator_actor
from cogs.ui.replies import reply
from engine.errors import InvalidInput
from engine.play.operator_status import StatusReport

if TYPE_CHECKING:
    from cogs.ui import CampfireBot


def status_text(report: StatusReport) -> str:
    return "\n".join(
        [
            "**Campfire status**",
            f"Servers: {report.servers}",
            f"Adventures running: {report.active_adventures} "
            f"({report.adventures_played_today} played today)",
            f"Turns today (UTC): {report.turns_today} · tokens today: {report.tokens_today}",
            f"Requests today: {report.requests_today} · waiting or running: "
            f"{report.requests_waiting}",
            f"Turns being written (all processes): {report.turns_writing}",
            f"Queue here: {report.running_here} running, {report.waiting_here} waiting",
            f"Blocked: {report.blocked_users} users, {report.blocked_servers} servers",
        ]
    )


def _target(user: discord.User | None, server: str | None) -> tuple[Literal["user", "server"], int]:
    if (user is None) == (server is None):
        raise InvalidInput("Name one user or one server (its id); nothing was changed.")
    if user is not None:
        return "user", user.id
    assert server is not None
    if not server.strip().isdigit() or len(server.strip()) > 20:
        raise InvalidInput("A server is named by its id, digits only; nothing was changed.")
    return "server", int(server.strip())


class OperatorCog(commands.Cog):
    operator = app_commands.Group(
        name="operator",
        description="For the bot's operator: status, blocks",
        allowed_contexts=app_commands.AppCommandContext(guild=True, dm_channel=True),
    )

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @operator.command(name="status")
    async def status(self, interaction: discord.Interaction) -> None:
        """Servers, adventures, turns and tokens today, queues (operator only)."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        report = await self.bot.services.operator_status.report(await operator_actor(interaction))
        await reply(interaction, status_text(report))

    @operator.command(name="block")
    @app_commands.describe(
        user="A user to refuse everywhere",
        server="A server's id: everyone there is refused",
        reason="Kept with the block, for you",
    )
    async def block(
        self,
        interaction: discord.Interaction,
        user: discord.User | None = None,
        server: str | None = None,
        reason: app_commands.Range[str, 0, 500] = "",
    ) -> None:
        """Refuse a user or a server every command and button (operator only)."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        actor = await operator_actor(interaction)
        kind, target = _target(user, server)
        made = await self.bot.services.blocks.block(actor, kind, target, reason)
        said = f"<@{target}>" if kind == "user" else f"server {target}"
        await reply(
            interaction,
            f"⛔ Blocked {said}: every command and button is refused politely."
            if made
            else f"{said} was blocked already; nothing changed.",
        )

    @operator.command(name="unblock")
    @app_commands.describe(user="A blocked user", server="A blocked server's id")
    async def unblock(
        self,
        interaction: discord.Interaction,
        user: discord.User | None = None,
        server: str | None = None,
    ) -> None:
        """Lift a block (operator only)."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        actor = await operator_actor(interaction)
        kind, target = _target(user, server)
        lifted = await self.bot.services.blocks.unblock(actor, kind, target)
        said = f"<@{target}>" if kind == "user" else f"server {target}"
        await reply(
            interaction,
            f"Unblocked {said}." if lifted else f"{said} was not blocked; nothing changed.",
        )


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(OperatorCog(bot))
