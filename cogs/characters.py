"""Characters and the party: /character set|show, /party, /join and /leave.

Each is one call to ``engine.story.characters.CharacterService``, acknowledged first and answered to
the player alone: a character sheet or the party list is for whoever asked, and a refusal (a bad
name, no adventure here) is theirs too. ``/join`` and ``/leave`` change the party, so they are
announced to it, like the host's controls. Anyone in the adventure's place may set their own
character; nobody sets another's (the engine's rules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.host import NO_PINGS
from cogs.ui.content import EMBED_DESCRIPTION_MAX, fit_embed
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.replies import defer_request
from engine.platform.sanitise import echo
from engine.story.characters import ABOUT_MAX, NAME_MAX, CharacterSheet, Party, PartyMember
from engine.story.pronouns import PRONOUNS_MAX, shown

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

CHARACTER_COLOUR = discord.Colour.gold()


def _plain(text: str) -> str:
    return discord.utils.escape_markdown(discord.utils.escape_mentions(text))


def character_embed(sheet: CharacterSheet, *, yours: bool) -> discord.Embed:
    embed = discord.Embed(
        title=echo(sheet.name, 256),
        description=_plain(sheet.about) or "*No description.*",
        colour=CHARACTER_COLOUR,
    )
    if sheet.pronouns:
        embed.add_field(name="Pronouns", value=shown(sheet.pronouns), inline=True)
    whose = "Your character" if yours else f"Played by {sheet.player_name or 'a player'}"
    embed.set_footer(text=echo(f"{whose} in this adventure", 2048))
    return embed


def member_line(member: PartyMember, *, group: bool) -> str:
    player = _plain(member.player_name or "a player")
    marks = []
    if member.host:
        marks.append("host")
    if member.muted:
        marks.append("muted")
    if member.in_round:
        marks.append("acted this round")
    if member.acted_last:
        marks.append("acted last")
    elif not member.acted and not member.in_round:
        marks.append("has not acted yet")
    tail = f" · {', '.join(marks)}" if marks else ""
    if member.character is None:
        named = "no character" + (" (acts as their name)" if group else "")
        return f"{'👑 ' if member.host else ''}**{player}** — {named}{tail}"
    line = f"{'👑 ' if member.host else ''}**{_plain(member.character.name)}** ({player}){tail}"
    if member.character.about:
        line += f"\n{_plain(echo(member.character.about, ABOUT_MAX))}"
    return line


def party_embed(party: Party) -> discord.Embed:
    lines = [member_line(m, group=party.group) for m in party.members]
    if party.more:
        lines.append("*…and more.*")
    if party.watching:
        lines.append("Watching: " + ", ".join(_plain(name) for name in party.watching))
    description = "\n\n".join(lines) or "Nobody has acted yet."
    embed = discord.Embed(
        title=echo(f"The party · {party.title}", 256),
        description=echo(description, EMBED_DESCRIPTION_MAX),
        colour=CHARACTER_COLOUR,
    )
    if not party.group:
        footer = "/character set name: gives you a character in this adventure"
    elif party.closed:
        footer = "The party is closed: only its players act; the host may open it"
    else:
        footer = "The party is open: /join to play, /leave to watch"
    embed.set_footer(text=footer)
    return embed


class CharacterCog(commands.Cog):
    character = app_commands.Group(
        name="character", description="Your character in the adventure here"
    )

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @character.command(name="set")
    @app_commands.describe(
        name="Your character's name, e.g. Ann (letters, digits, spaces and ' - .)",
        about="A line about them the narrator reads, e.g. a ranger from the north",
        pronouns="What the story calls them: she/her, he/him, they/them, it/its, or your own "
        "three or five forms (xe/xem/xyr)",
    )
    async def character_set(
        self,
        interaction: discord.Interaction,
        name: app_commands.Range[str, 1, NAME_MAX],
        about: app_commands.Range[str, 1, ABOUT_MAX] | None = None,
        pronouns: app_commands.Range[str, 1, PRONOUNS_MAX] | None = None,
    ) -> None:
        """Give yourself a character here, or change yours (what you leave out stays as it was)."""
        await interaction.response.defer(thinking=True, ephemeral=True)
        sheet = await self.bot.services.characters.set(
            actor_of(interaction), channel_id_of(interaction), name, about, pronouns=pronouns
        )
        await interaction.followup.send(
            f"You play {echo(sheet.name, NAME_MAX)} from your next action on.",
            embed=fit_embed(character_embed(sheet, yours=True)),
            ephemeral=True,
        )

    @character.command(name="show")
    @app_commands.describe(player="Whose character to show (yours when left out)")
    async def character_show(
        self,
        interaction: discord.Interaction,
        player: discord.User | None = None,
    ) -> None:
        """Show your character here, or another player's (to you alone)."""
        await interaction.response.defer(thinking=True, ephemeral=True)
        who = player or interaction.user
        yours = who.id == interaction.user.id
        sheet = await self.bot.services.characters.show(channel_id_of(interaction), who.id)
        if sheet is not None:
            await interaction.followup.send(
                embed=fit_embed(character_embed(sheet, yours=yours)), ephemeral=True
            )
            return
        if yours:
            text = "You have no character here yet: `/character set name:` gives you one."
        else:
            text = f"{_plain(who.display_name)} has no character in this adventure."
        await interaction.followup.send(text, ephemeral=True)

    @app_commands.command(name="join")
    async def join(self, interaction: discord.Interaction) -> None:
        """Play in the adventure here (while its party is open)."""
        await defer_request(interaction)
        joined = await self.bot.services.characters.join(
            actor_of(interaction), channel_id_of(interaction)
        )
        await interaction.followup.send(
            f"🙋 *{_plain(joined.name)} joined the party.*", allowed_mentions=NO_PINGS
        )

    @app_commands.command(name="leave")
    async def leave(self, interaction: discord.Interaction) -> None:
        """Stop playing here and watch; your character stays for when you /join again."""
        await defer_request(interaction)
        left = await self.bot.services.characters.leave(
            actor_of(interaction), channel_id_of(interaction)
        )
        await interaction.followup.send(
            f"👋 *{_plain(left.name)} left the party and watches now.*",
            allowed_mentions=NO_PINGS,
        )

    @app_commands.command(name="party")
    async def party(self, interaction: discord.Interaction) -> None:
        """Who plays in the adventure here: characters, the host, who acted last."""
        await interaction.response.defer(thinking=True, ephemeral=True)
        found = await self.bot.services.characters.party(channel_id_of(interaction))
        await interaction.followup.send(embed=fit_embed(party_embed(found)), ephemeral=True)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(CharacterCog(bot))
