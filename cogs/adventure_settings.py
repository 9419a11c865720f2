"""/adventure settings: the adventure's generation settings (context, reply length, temperature,
the sampling players tune, where the author's note goes), whether plain messages play here, and
every how many turns the story proposes a card to the host (``cogs.ui.card_proposals``).

One call to the generation-settings service (``engine.story.steering.settings``), which checks
every value against its range and refuses with the range named; a change is deferred before it
is written, and answers the player alone. The command belongs to the ``/adventure`` group of the
steering cog, added when this cog loads (``cogs.ui.adventure_group``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import discord
from discord import app_commands

from cogs.ui import bot_of
from cogs.ui.adventure_group import AdventureCommands
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.replies import reply
from engine.llm.sampling import (
    NOTE_DEPTH_RANGE,
    STOP_AT_PLAYER_ACTION,
    STOP_TEXT_MAX,
    number,
    shown_stop,
)
from engine.story.steering.card_proposals import CARD_PROPOSALS_RANGE
from engine.story.steering.settings import AdventureSettings

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

#: The most characters of the adventure's stop strings shown in the settings.
STOPS_SHOWN = 500

#: Said where the operator switched message play off for the whole bot.
MESSAGE_PLAY_OFF = (
    "Playing by plain messages is switched off on this bot by its operator "
    "(`CAMPFIRE_MESSAGE_PLAY=false`): Discord sends it no messages. Slash commands and "
    "buttons play as ever."
)


def settings_text(
    settings: AdventureSettings, *, changed: bool = False, message_play: bool = True
) -> str:
    def origin(value: object, default: str) -> str:
        return "the default" if value is None else f"set for this adventure; default {default}"

    defaults, sampling = settings.defaults, settings.sampling
    lines = [
        "Settings updated; they apply from the next turn.\n" if changed else "",
        f"**Generation settings** · {discord.utils.escape_markdown(settings.adventure_title)}",
        f"Context: **{settings.effective_context_tokens:,}** tokens "
        f"({origin(settings.context_tokens, f'{defaults.context_tokens:,}')})",
        f"Reply length: at most **{settings.effective_max_output_tokens:,}** tokens "
        f"({origin(settings.max_output_tokens, f'{defaults.max_output_tokens:,}')})",
        f"Temperature: **{settings.effective_temperature:g}** "
        f"({origin(settings.temperature, f'{defaults.temperature:g}')})",
        "Sampling: "
        + " · ".join(
            _sampled(name, value, default)
            for name, value, default in (
                ("top_p", sampling.top_p, defaults.top_p),
                ("min_p", sampling.min_p, None),
                ("repetition_penalty", sampling.repetition_penalty, None),
                ("presence_penalty", sampling.presence_penalty, None),
                ("frequency_penalty", sampling.frequency_penalty, None),
            )
        )
        + " (— the model server's own)",
        "Stop strings: "
        + ", ".join(_stop(s) for s in STOP_AT_PLAYER_ACTION)
        + " (Campfire's: the player's next action)"
        + _stops(sampling.stop_strings),
        _note_line(sampling.authors_note_depth),
        f"Playing by plain messages: **{'on' if settings.message_play else 'off'}** "
        "(`messages: on` lets text typed here play; see `/help`)"
        if message_play
        else "Playing by plain messages: **off on this bot** (its operator switched it off)",
        _proposals_line(settings.card_proposals),
    ]
    if settings.left_out and settings.dialect is not None:
        lines.append(
            f"⚠ This adventure's model runs on {settings.dialect.name}, which is not sent: "
            + discord.utils.escape_markdown("; ".join(settings.left_out))
            + "."
        )
    if settings.held:
        lines.append(
            "⚠ This adventure narrates on the bot's own model, so its turns are held to the "
            "operator's limits: " + "; ".join(settings.held) + ". A model of your own "
            "(`/model set`) is not held to them."
        )
    lines += [
        "",
        "Change them with `/adventure settings` and its options; `reset: True` returns every "
        "generation setting to its default.",
    ]
    return "\n".join(lines).lstrip("\n")


def _proposals_line(every: int) -> str:
    """Kept short: the settings fill one message (``STOPS_SHOWN``); ``/help`` says the rest."""
    if not every:
        return "Card proposals to the host: **off**"
    return f"Card proposals to the host: every **{every}** turns, privately"


def _sampled(name: str, value: float | None, default: float | None) -> str:
    if value is not None:
        return f"{name} **{number(value)}**"
    return f"{name} {number(default)} (default)" if default is not None else f"{name} —"


def _stop(text: str) -> str:
    return f"“{discord.utils.escape_markdown(shown_stop(text))}”"


def _stops(strings: tuple[str, ...]) -> str:
    """The adventure's stop strings after Campfire's, cut to ``STOPS_SHOWN`` characters: eight
    of forty, escaped, would crowd the rest of the settings out of one message."""
    shown = "".join(f", {_stop(s)}" for s in strings)
    return shown if len(shown) <= STOPS_SHOWN else shown[: STOPS_SHOWN - 1].rstrip("\\") + "…"


def _note_line(depth: int | None) -> str:
    if depth is None:
        return (
            "Author's note: closes the system message (the default, the same every turn: the "
            "provider's prompt cache keeps it)"
        )
    return (
        f"Author's note: **{depth}** entries from the end of the story (depth {depth}, the new "
        "action counted); it moves each turn, so the provider's prompt cache stops there"
    )


@app_commands.command(name="settings")
@app_commands.describe(
    context_tokens="How much the narrator reads each turn, in tokens (512–1,000,000)",
    max_output_tokens="The longest reply, in tokens (16–32,768)",
    temperature="Randomness: 0 steady … 2 wild (0–2)",
    top_p="Nucleus sampling: only the likeliest tokens making up this share (0.01–1)",
    min_p="Leave out tokens less likely than this share of the likeliest (0–1)",
    repetition_penalty="Penalise repeating tokens: 1 off … 2 strong (1–2)",
    presence_penalty="Push towards what was not said yet: -2 … 2 (0 off)",
    frequency_penalty="Penalise tokens by how often they came: -2 … 2 (0 off)",
    stop='Where the narrator stops, as a JSON list: ["\\nYou:", "THE END"]; [] clears',
    note_depth="Author's note this many entries from the story's end (0–100); costs prompt caching",
    reset="Return every generation setting to its default first",
    messages="Whether plain messages here play as actions (host and managers)",
    card_proposals="Propose a new story card to the host privately every this many turns "
    f"({CARD_PROPOSALS_RANGE[0]}–{CARD_PROPOSALS_RANGE[1]}; 0 off)",
)
async def adventure_settings(
    interaction: discord.Interaction,
    context_tokens: app_commands.Range[int, 512, 1_000_000] | None = None,
    max_output_tokens: app_commands.Range[int, 16, 32_768] | None = None,
    temperature: app_commands.Range[float, 0.0, 2.0] | None = None,
    top_p: app_commands.Range[float, 0.01, 1.0] | None = None,
    min_p: app_commands.Range[float, 0.0, 1.0] | None = None,
    repetition_penalty: app_commands.Range[float, 1.0, 2.0] | None = None,
    presence_penalty: app_commands.Range[float, -2.0, 2.0] | None = None,
    frequency_penalty: app_commands.Range[float, -2.0, 2.0] | None = None,
    stop: app_commands.Range[str, 2, STOP_TEXT_MAX] | None = None,
    note_depth: app_commands.Range[int, NOTE_DEPTH_RANGE[0], NOTE_DEPTH_RANGE[1]] | None = None,
    reset: bool = False,
    messages: Literal["on", "off"] | None = None,
    card_proposals: app_commands.Range[int, 0, CARD_PROPOSALS_RANGE[1]] | None = None,
) -> None:
    """Show or change this adventure's generation settings."""
    bot = bot_of(interaction)
    settings = bot.services.generation_settings
    where = channel_id_of(interaction)
    message_play = bot.settings.message_play
    if messages == "on" and not message_play:
        await reply(interaction, f"⚠ {MESSAGE_PLAY_OFF}")
        return
    sampling = {
        name: value
        for name, value in (
            ("top_p", top_p),
            ("min_p", min_p),
            ("repetition_penalty", repetition_penalty),
            ("presence_penalty", presence_penalty),
            ("frequency_penalty", frequency_penalty),
        )
        if value is not None
    }
    changes: list[Any] = [
        context_tokens,
        max_output_tokens,
        temperature,
        stop,
        note_depth,
        card_proposals,
    ]
    if not reset and not sampling and messages is None and all(c is None for c in changes):
        current = await settings.get(where)
        await reply(interaction, settings_text(current, message_play=message_play))
        return
    await interaction.response.defer(thinking=True, ephemeral=True)
    updated = await settings.set(
        where,
        actor_of(interaction),
        context_tokens=context_tokens,
        max_output_tokens=max_output_tokens,
        temperature=temperature,
        reset=reset,
        message_play=None if messages is None else messages == "on",
        sampling=sampling,
        stop=stop,
        note_depth=note_depth,
        card_proposals=card_proposals,
    )
    await reply(interaction, settings_text(updated, changed=True, message_play=message_play))


#: The /adventure group is the steering cog's: it must be there to add to (``cogs.ui.discovery``).
LOAD_AFTER = ("cogs.steering",)


class AdventureSettingsCog(AdventureCommands):
    COMMANDS = (adventure_settings,)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(AdventureSettingsCog(bot))
