"""The play loop: /start, /do, /say, /story and /continue (/help: ``cogs.help``)."""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.acting import act_here
from cogs.ui.ask_first import AskFirst
from cogs.ui.content import fit_text
from cogs.ui.errors import on_app_command_error
from cogs.ui.gate import GatedForm
from cogs.ui.interaction import actor_of, channel_id_of, place_of
from cogs.ui.threads import give_up_thread, open_adventure_thread
from engine.library.formats.draft import QUESTIONS_PER_FORM, question_for
from engine.platform.sanitise import echo
from engine.play.answers import StartPlan, ThreadAdventure
from engine.story.actions import ActionType

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

log = logging.getLogger(__name__)

ACTION_LIMIT = 2000


class PlayCog(commands.Cog):
    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @app_commands.command(name="start")
    @app_commands.describe(scenario="A scenario from the library; leave empty for the default")
    async def start(self, interaction: discord.Interaction, scenario: str | None = None) -> None:
        """Start an adventure here: a new thread in a server, or a solo story in DMs."""
        # Looked up before answering: a menu or a form must be the interaction's first answer,
        # and a start that would be refused is refused before either is shown.
        plan = await self.bot.services.play.start_plan(
            actor_of(interaction), scenario, place_of(interaction)
        )
        if plan.replaces is not None:
            # A new adventure here ends this one: never without asking.
            await interaction.response.send_message(
                fit_text(
                    f"⚠ **{discord.utils.escape_markdown(plan.replaces)}** is running here. "
                    "Starting a new adventure ends it; `/adventure export` keeps a copy of it "
                    "first. Start anew?"
                ),
                view=ReplaceConfirm(self, plan),
                ephemeral=True,
            )
            return
        await self.begin(interaction, plan)

    async def begin(
        self,
        # Also answered from a menu's button or a form, which discord.py types for any client.
        interaction: discord.Interaction,
        plan: StartPlan,
        answers: dict[str, str] | None = None,
    ) -> None:
        """Ask what the scenario needs (an option, an opening, its placeholders), then start
        it."""
        if plan.options:
            await interaction.response.send_message(**option_menu(self, plan), ephemeral=True)
            return
        if plan.openings and plan.opening is None:
            await interaction.response.send_message(**opening_menu(self, plan), ephemeral=True)
            return
        if plan.placeholders and answers is None:
            await interaction.response.send_modal(PlaceholderModal(self, plan))
            return
        await interaction.response.defer(thinking=True)
        await self._start(interaction, plan, answers)

    async def _start(
        self, interaction: discord.Interaction, plan: StartPlan, answers: dict[str, str] | None
    ) -> None:
        play = self.bot.services.play
        actor = actor_of(interaction)
        place = place_of(interaction)
        thread: discord.Thread | None = None
        earlier: list[ThreadAdventure] = []
        if place is None:
            earlier = await play.adventures_from(channel_id_of(interaction))
            thread = await open_adventure_thread(
                interaction,
                plan.title,
                f"Campfire adventure started by {interaction.user}",
                self.bot.narrator.pacer,
            )
            target: discord.abc.Messageable = thread
            target_id = thread.id
        else:
            assert isinstance(interaction.channel, discord.abc.Messageable)  # place_of's answer
            target, target_id = interaction.channel, place
        try:
            started = await play.start(
                actor,
                target_id,
                str(plan.scenario_id),
                answers,
                opened_from=channel_id_of(interaction) if thread is not None else None,
                opening=plan.opening or 0,
            )
        except BaseException:
            # No empty thread is left open by a start that failed.
            if thread is not None:
                await give_up_thread(interaction, thread)
            raise
        header = f"{started.icon} **{started.title}**".strip()
        if thread is not None:
            content = f"{header} begins in {thread.mention}. Everyone there can play."
            if earlier:
                # Threads drop out of sight once archived: the ones still running are named.
                content += "\nStill running from here: " + ", ".join(
                    f"**{discord.utils.escape_markdown(a.title)}** in <#{a.thread_id}>"
                    for a in earlier
                )
            await interaction.edit_original_response(content=fit_text(content))
        else:
            await interaction.edit_original_response(content=f"{header} begins.")
        await self.bot.narrator.post_opening(
            target,
            started.opening,
            started.adventure_id,
            started.version,
            node_id=started.opening_node_id,
        )

    @start.autocomplete("scenario")
    async def scenario_choices(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        choices = await self.bot.services.play.scenario_choices(actor_of(interaction), current)
        return [app_commands.Choice(name=label, value=value) for label, value in choices]

    @app_commands.command(name="do")
    @app_commands.describe(action="What you do, e.g. “open the door”")
    async def do(
        self,
        interaction: discord.Interaction,
        action: app_commands.Range[str, 1, ACTION_LIMIT],
    ) -> None:
        """Do something in the story."""
        await act_here(interaction, ActionType.DO, action)

    @app_commands.command(name="say")
    @app_commands.describe(words="What you say, e.g. “Who goes there?”")
    async def say(
        self,
        interaction: discord.Interaction,
        words: app_commands.Range[str, 1, ACTION_LIMIT],
    ) -> None:
        """Say something in the story."""
        await act_here(interaction, ActionType.SAY, words)

    @app_commands.command(name="story")
    @app_commands.describe(text="Text to add to the story as written")
    async def story(
        self,
        interaction: discord.Interaction,
        text: app_commands.Range[str, 1, ACTION_LIMIT],
    ) -> None:
        """Add to the story in your own words."""
        await act_here(interaction, ActionType.STORY, text)

    @app_commands.command(name="continue")
    async def continue_(self, interaction: discord.Interaction) -> None:
        """Let the narrator go on."""
        await act_here(interaction, ActionType.CONTINUE, "")


# --- what /start asks ---------------------------------------------------------------------------


def option_menu(cog: PlayCog, plan: StartPlan) -> dict:
    """The options of a menu scenario as buttons (at most 25: five rows of five), under its
    own prompt. Buttons rather than a select menu: every front end can press a button."""
    intro = plan.intro.strip() or "Choose how your story begins:"
    choices = []
    for label, value in plan.options:

        async def chosen(interaction: discord.Interaction, value: str = value) -> None:
            option = await cog.bot.services.play.start_plan(
                actor_of(interaction), value, place_of(interaction)
            )
            await cog.begin(interaction, option)

        choices.append((label, chosen))
    return _menu(plan, intro, choices)


def opening_menu(cog: PlayCog, plan: StartPlan) -> dict:
    """A scenario's openings (a character card's greetings) as buttons, each with its first
    words; the chosen one begins the story."""
    choices = []
    for n, (position, label) in enumerate(plan.openings, start=1):

        async def chosen(interaction: discord.Interaction, position: int = position) -> None:
            await cog.begin(interaction, replace(plan, opening=position))

        choices.append((f"{n}. {label}", chosen))
    return _menu(plan, "Choose how your story begins:", choices)


def _menu(plan: StartPlan, intro: str, choices: list) -> dict:
    header = f"{plan.icon} **{plan.title}**".strip()
    view = OptionMenu(timeout=600)
    for label, chosen in choices:
        button: discord.ui.Button = discord.ui.Button(
            label=echo(label, 80), style=discord.ButtonStyle.primary
        )
        # discord.py's way to answer a button made on the fly; a checker sees a method.
        button.callback = chosen  # type: ignore[method-assign]
        view.add_item(button)
    return {"content": fit_text(f"{header}\n{intro}"), "view": view}


class ReplaceConfirm(AskFirst):
    """Start anew (ending the adventure running here) or keep playing: asked before /start
    replaces a story, to the player who asked alone."""

    def __init__(self, cog: PlayCog, plan: StartPlan) -> None:
        async def start_anew(interaction: discord.Interaction) -> None:
            await cog.begin(interaction, plan)

        super().__init__("Start anew", start_anew)
        self.cog = cog
        self.plan = plan


class OptionMenu(discord.ui.View):
    async def on_error(
        self, interaction: discord.Interaction, error: Exception, _item: discord.ui.Item
    ) -> None:
        await on_app_command_error(interaction, error)


class PlaceholderModal(GatedForm):
    """The scenario's ``${questions}``, asked before it starts: five to a form (a form holds
    five inputs), in as many forms as it takes, ``answers`` holding those already given.

    AI Dungeon asks every question before the story starts; none is left in the text."""

    def __init__(
        self, cog: PlayCog, plan: StartPlan, answers: dict[str, str] | None = None
    ) -> None:
        self.answers = dict(answers or {})
        first = len(self.answers)
        self.asked = plan.placeholders[first : first + QUESTIONS_PER_FORM]
        forms = math.ceil(len(plan.placeholders) / QUESTIONS_PER_FORM)
        count = f" ({first // QUESTIONS_PER_FORM + 1}/{forms})" if forms > 1 else ""
        title = echo(plan.title, 45 - len(count)) or "Before you begin"
        super().__init__(title=title + count, timeout=900)
        self.cog = cog
        self.plan = plan
        self.inputs: list[discord.ui.TextInput] = []
        for placeholder in self.asked:
            question = question_for(placeholder)
            item: discord.ui.TextInput = discord.ui.TextInput(
                label=echo(question, 45),
                placeholder=echo(question, 100) if len(question) > 45 else None,
                max_length=200,
            )
            self.inputs.append(item)
            self.add_item(item)

    async def on_submit(self, interaction: discord.Interaction) -> None:
        for question, item in zip(self.asked, self.inputs, strict=True):
            self.answers[question] = item.value.strip()
        left = len(self.plan.placeholders) - len(self.answers)
        if left > 0:
            # A form cannot be answered with another form: a button opens the next one.
            await interaction.response.send_message(
                f"{len(self.answers)} of {len(self.plan.placeholders)} questions answered; "
                f"{left} more before the story begins.",
                view=NextQuestions(self.cog, self.plan, self.answers),
                ephemeral=True,
            )
            return
        await self.cog.begin(interaction, self.plan, self.answers)

    async def on_error(self, interaction: discord.Interaction, error: Exception) -> None:
        await on_app_command_error(interaction, error)


class NextQuestions(discord.ui.View):
    """The button between two forms of questions."""

    def __init__(self, cog: PlayCog, plan: StartPlan, answers: dict[str, str]) -> None:
        super().__init__(timeout=900)
        self.cog = cog
        self.plan = plan
        self.answers = answers

    @discord.ui.button(label="Next questions", style=discord.ButtonStyle.primary)
    async def next_questions(
        self, interaction: discord.Interaction, _button: discord.ui.Button
    ) -> None:
        await interaction.response.send_modal(PlaceholderModal(self.cog, self.plan, self.answers))

    async def on_error(
        self, interaction: discord.Interaction, error: Exception, _item: discord.ui.Item
    ) -> None:
        await on_app_command_error(interaction, error)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(PlayCog(bot))
