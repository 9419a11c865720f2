"""Acting in the adventure here: what /do, /say, /story and /continue do, and the Do, Say and
Story buttons under the newest turn, each of which opens a one-field form (typing a slash
command with its option is slow on a phone; a button and a text box are not).

Every way of acting ends in ``act_here``: acknowledged before the database is asked anything
(Discord's 3 seconds), then played through the engine and shown by the narrator. A form's
action is played like a typed one, wherever the story has got to meanwhile, but only in the
adventure whose buttons opened it: where another adventure runs now, it is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import discord

from cogs.ui import bot_of
from cogs.ui.forms import FORM_TIMEOUT_S, TEXT_INPUT_MAX, on_form_error
from cogs.ui.gate import GatedForm
from cogs.ui.interaction import actor_of, channel_id_of, runs_adventures
from cogs.ui.preflight import Preflighted
from cogs.ui.replies import defer_request, reply
from cogs.ui.threads import adventures_in_threads
from engine.people.access.checks import OTHER_ADVENTURE
from engine.platform.sanitise import ROW_ID_MAX, row_id
from engine.story.actions import ActionType, PlayerAction

if TYPE_CHECKING:
    import re


#: The kinds of action a button's form plays, by the name its ``custom_id`` carries: the form's
#: title, and the hint in its text box.
FORMS: dict[str, tuple[ActionType, str, str]] = {
    "do": (ActionType.DO, "What do you do?", "draw your sword and step into the light"),
    "say": (ActionType.SAY, "What do you say?", "Who goes there?"),
    "story": (ActionType.STORY, "What happens next?", "A storm rolls in from the hills."),
}
#: Each button's label and emoji, on a row of their own: under the story's own buttons (row 0)
#: and the take pager (row 1).
ACTION_ROW = 2
BUTTONS: dict[str, tuple[str, str]] = {
    "do": ("Do", "✋"),
    "say": ("Say", "💬"),
    "story": ("Story", "📜"),
}


async def act_here(
    interaction: discord.Interaction,
    kind: ActionType,
    text: str,
    *,
    drawn_for: int | None = None,
) -> None:
    """Play ``text`` as a ``kind`` action of the interaction's user in the adventure here.
    ``drawn_for``: the adventure whose button opened the form it was typed in."""
    bot = bot_of(interaction)
    play = bot.services.play
    channel_id = channel_id_of(interaction)
    # Acknowledged before the database is asked anything (Discord's 3 seconds); privately
    # where no adventure is likely to run, since the answer will most likely be that: as
    # this process last saw the place, or, unseen, by its kind (adventures run in threads
    # and DMs; a server's text channel only points to its threads).
    likely = play.places.expects_adventure(channel_id, unknown=runs_adventures(interaction))
    await defer_request(interaction, ephemeral=not likely)
    events = play.act(
        actor_of(interaction),
        channel_id,
        PlayerAction(kind, text, interaction.user.id),
        request_id=interaction.id,
        drawn_for=drawn_for,
    )
    # In rounds, the submission answers the player and moves the round panel (cogs.ui.round_panels).
    channel = interaction.channel
    assert channel is not None and not isinstance(
        channel, discord.ForumChannel | discord.CategoryChannel
    )
    watched = bot.round_panels.watch(
        channel, events, interaction=interaction, actor=actor_of(interaction)
    )
    await bot.narrator.show(interaction, watched, nothing_here=nothing_here)


async def nothing_here(interaction: discord.Interaction) -> None:
    """An action where no adventure runs (the interaction is acknowledged): in a channel
    whose adventures run in threads of it, the player is pointed to them (archived ones
    reopened); else told to /start. Privately, either way."""
    bot = bot_of(interaction)
    adventures = await bot.services.play.adventures_from(channel_id_of(interaction))
    if adventures:
        pointer = await adventures_in_threads(bot, adventures)
        if pointer is not None:
            await reply(interaction, pointer)
            return
    await reply(interaction, "There is no adventure running here. Start one with `/start`.")


class ActionForm(GatedForm):
    """One text box: the action a Do, Say or Story button asks for."""

    def __init__(self, kind: str, adventure_id: int, longest: int) -> None:
        action, title, hint = FORMS[kind]
        super().__init__(title=title, timeout=FORM_TIMEOUT_S)
        self.action = action
        self.adventure_id = adventure_id
        self.text: discord.ui.TextInput[ActionForm] = discord.ui.TextInput(
            custom_id="action",
            label=title,
            placeholder=hint,
            style=discord.TextStyle.paragraph
            if action is ActionType.STORY
            else discord.TextStyle.short,
            max_length=min(longest, TEXT_INPUT_MAX),
        )
        self.add_item(self.text)

    async def on_submit(self, interaction: discord.Interaction) -> None:
        await act_here(interaction, self.action, self.text.value, drawn_for=self.adventure_id)

    async def on_error(self, interaction: discord.Interaction, error: Exception) -> None:
        await on_form_error(interaction, error)


class ActButton(
    Preflighted,
    discord.ui.DynamicItem[discord.ui.Button],
    template=r"cf:act:(?P<kind>do|say|story):(?P<adventure>\d+)",
):
    """Do, Say or Story under the newest turn: ``cf:act:<kind>:<adventure>``. It opens the
    form at once (a form must be the interaction's first answer, so nothing is asked of the
    database before it), unless this process knows another adventure runs here now."""

    def __init__(self, kind: str, adventure_id: int) -> None:
        self.kind = kind
        self.adventure_id = adventure_id
        label, emoji = BUTTONS[kind]
        button: discord.ui.Button = discord.ui.Button(
            label=label,
            emoji=emoji,
            style=discord.ButtonStyle.secondary,
            custom_id=f"cf:act:{kind}:{adventure_id}",
            row=ACTION_ROW,
        )
        # The DynamicItem after this mixin takes the button; a checker sees only ``object``.
        super().__init__(button)  # type: ignore[call-arg]  # object's __init__ to a checker

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> ActButton:
        # An id beyond any row's is 0, which names no adventure: the form's action is refused.
        return cls(match["kind"], row_id(match["adventure"], ROW_ID_MAX) or 0)

    async def callback(self, interaction: discord.Interaction) -> None:
        bot = bot_of(interaction)
        places = bot.services.play.places
        if places.stale_button(channel_id_of(interaction), self.adventure_id, 0) == OTHER_ADVENTURE:
            await reply(interaction, f"⚠ {OTHER_ADVENTURE}")
            return
        longest = bot.services.play.turns.max_action_chars
        await interaction.response.send_modal(ActionForm(self.kind, self.adventure_id, longest))


def action_buttons(adventure_id: int) -> list[ActButton]:
    """Do, Say and Story, for the newest turn of ``adventure_id``."""
    return [ActButton(kind, adventure_id) for kind in FORMS]
