"""/card options: a story card's world-info options (secondary keys and their logic,
probability, order, scan depth, recursion, sticky / cooldown / delay, inclusion groups, regex
keys), set with typed slash options rather than a form (a form holds five text boxes).

The command's options are built from the engine's table (``engine.story.steering.card_options
.LORE_OPTIONS``): a number becomes an integer option with its bounds, a flag a boolean, a
choice a list of choices, a text a string with its most characters, so Discord checks what it
can before the engine checks it all again (a client may send anything). A new option is a row
in that table. The change is deferred before it is written, and answered privately with the
card's options in words (``engine.prompt.lore.Lore.describe``, as ``/card list`` shows them).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

from cogs.ui import bot_of
from cogs.ui.adventure_group import CardCommands, card_choices
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.replies import reply
from engine.platform.sanitise import echo
from engine.story.steering.card_options import LORE_OPTIONS, LoreOption
from engine.story.steering.cards import CardView

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

#: The /card group is the steering cog's: it must be there to add to (``cogs.ui.discovery``).
LOAD_AFTER = ("cogs.steering",)

#: Discord's most options on one command (discord.com/developers/docs/interactions/
#: application-commands, "Application Command Object": options, max 25); ``card`` and
#: ``reset`` take two. Each option's description is at most 100 characters there too.
COMMAND_OPTIONS_MAX = 25
assert len(LORE_OPTIONS) + 2 <= COMMAND_OPTIONS_MAX, "too many world-info options for a command"


def options_text(card: CardView, done: str = "") -> str:
    """The answer: what was done (nothing, for a look), then the card's options in words."""
    title = discord.utils.escape_markdown(echo(card.title, 100)) or f"#{card.id}"
    head = f"World-info options of “{title}”"
    head += f" {done}; they apply from the next turn." if done else ":"
    if not card.options:
        return (
            f"{head}\nNone: it comes in when one of its keys appears, as a plain story card does."
        )
    lines = (f"• {discord.utils.escape_markdown(echo(option, 300))}" for option in card.options)
    return "\n".join((head, *lines))


async def card_options(
    interaction: discord.Interaction, card: str, reset: bool = False, **values: Any
) -> None:
    """Set a story card's world-info options: secondary keys, probability, order, groups …"""
    cards = bot_of(interaction).services.story_cards
    where, actor = channel_id_of(interaction), actor_of(interaction)
    changes = {name: value for name, value in values.items() if value is not None}
    await interaction.response.defer(thinking=True, ephemeral=True)
    if not changes and not reset:
        found = await cards.get(where, actor, card)
        await reply(interaction, options_text(found))
        return
    saved = await cards.set_options(where, actor, card, changes, reset=reset)
    await reply(interaction, options_text(saved, "reset" if reset and not changes else "saved"))


def _annotation(option: LoreOption) -> Any:
    if option.kind == "number":
        return app_commands.Range[int, option.low, option.high]
    if option.kind == "text":
        return app_commands.Range[str, 1, option.high]
    if option.kind == "flag":
        return bool
    return str


def _build() -> app_commands.Command:
    """``card_options`` as a slash command whose options are the table's rows."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    card_options.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                "interaction",
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                annotation=discord.Interaction,
            ),
            inspect.Parameter("card", keyword, annotation=str),
            inspect.Parameter("reset", keyword, default=False, annotation=bool),
            *(
                inspect.Parameter(
                    option.name, keyword, default=None, annotation=_annotation(option)
                )
                for option in LORE_OPTIONS
            ),
        ]
    )
    described = app_commands.describe(
        card="The card to change",
        reset="Clear all its options first (then any given here are set)",
        **{option.name: option.help for option in LORE_OPTIONS},
    )(card_options)
    chosen = app_commands.choices(
        **{
            option.name: [
                app_commands.Choice(name=label, value=value) for label, value in option.choices
            ]
            for option in LORE_OPTIONS
            if option.kind == "choice"
        }
    )(described)
    command = app_commands.command(name="options")(chosen)
    command.autocomplete("card")(card_choices)
    return command


card_options_command = _build()


class CardOptionsCog(CardCommands):
    """Adds ``/card options`` to the steering cog's ``/card`` group."""

    COMMANDS = (card_options_command,)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(CardOptionsCog(bot))
