"""What the cogs share: the Discord side of every command that is not a command itself.

From an interaction to who acts where (``interaction``), the answer (``replies``), forms, pages,
the buttons under a turn, the preflight of the bot's own permissions, threads, the streaming
editor and the narration shown from it, round panels, previews, the gate (operator and blocks).
A cog imports these; nothing here imports a cog.

Here too, the bot a cog is loaded into, as the protocol of what the cogs use of it
(``CampfireBot``): cogs never import the process that holds them (``bot.discord_bot``, which
meets the protocol, as any discord.py bot holding the engine's services may). It names the
narrator's and the round panels' types, so it lives at the package's face rather than beside
the modules that take it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    import discord
    from discord import app_commands
    from discord.abc import Snowflake
    from discord.ext import commands

    from cogs.ui.narration import Narrator
    from cogs.ui.round_panels import RoundPanels
    from engine.services import Services


class OperatorSettings(Protocol):
    """What the cogs read of the operator's settings."""

    @property
    def operator_ids(self) -> tuple[int, ...]: ...
    @property
    def message_play(self) -> bool: ...


class ChannelsClient(Protocol):
    """The discord.py client calls that find a channel or message by id (any client meets it)."""

    def get_channel(
        self, id: int, /
    ) -> discord.abc.GuildChannel | discord.Thread | discord.abc.PrivateChannel | None: ...
    def get_partial_messageable(
        self,
        id: int,
        *,
        guild_id: int | None = ...,
        type: discord.ChannelType | None = ...,
    ) -> discord.PartialMessageable: ...
    async def fetch_channel(
        self, channel_id: int, /
    ) -> discord.abc.GuildChannel | discord.abc.PrivateChannel | discord.Thread: ...


class CampfireBot(ChannelsClient, Protocol):
    """The bot a cog runs in: the engine's services, the narrator and round panels built over
    them, the operator's ids, and the few discord.py client calls the cogs make."""

    @property
    def services(self) -> Services: ...
    @property
    def narrator(self) -> Narrator: ...
    @property
    def round_panels(self) -> RoundPanels: ...
    @property
    def settings(self) -> OperatorSettings: ...
    @property
    def tree(self) -> app_commands.CommandTree[Any]: ...
    @property
    def user(self) -> discord.ClientUser | None: ...
    @property
    def commands_only(self) -> bool:
        """A bot that only declares its commands (``python -m bot sync``): no services."""
        ...

    async def add_cog(
        self,
        cog: commands.Cog,
        /,
        *,
        override: bool = ...,
        guild: Snowflake | None = ...,
        guilds: Sequence[Snowflake] = ...,
    ) -> None: ...
    async def is_owner(self, user: discord.abc.User, /) -> bool: ...
    def get_user(self, id: int, /) -> discord.User | None: ...
    async def fetch_user(self, user_id: int, /) -> discord.User: ...


def bot_of(interaction: discord.Interaction) -> CampfireBot:
    """The bot an interaction came to. discord.py types an interaction's client as any
    ``discord.Client``; the client that registered Campfire's commands and buttons is one
    holding Campfire's services."""
    return cast("CampfireBot", interaction.client)
