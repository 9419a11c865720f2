"""Buttons that survive restarts: their state lives in the ``custom_id``.

Each is a ``DynamicItem``: discord.py rebuilds it from the ``custom_id`` of whatever message is
pressed, even one sent before the bot restarted. The story buttons under the newest turn
(Continue, Retry, Undo, Redo, the take pager ‹ ›) carry the adventure and the story version
they were drawn under; a press under an older version, or where another adventure runs now, is
refused to the presser alone, and a second press of the same button (a double click racing the
first) is refused too: neither changes anything. Insights names a turn (of an adventure played
where it is pressed), and Retry under a failed turn names its request (which must be one of
the adventure running where it is pressed, never played), so both keep working under old
turns. A ``custom_id`` is whatever the client sends: the engine checks every id in it. A press
in an archived thread reopens it, and the bot's permissions there are checked, before it is
answered (``cogs.ui.preflight.Preflighted``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import discord

from cogs.ui import bot_of
from cogs.ui.acting import action_buttons
from cogs.ui.bot_permissions import Does
from cogs.ui.gate import refused_as_blocked
from cogs.ui.insights import show_insights_safely
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.preflight import Preflighted
from cogs.ui.replies import defer_request, reply
from cogs.ui.suggestion_buttons import suggestion_buttons
from engine.platform.sanitise import BIG_ID_MAX, ROW_ID_MAX, row_id
from engine.story.actions import ActionType, PlayerAction

if TYPE_CHECKING:
    pass


def _button(
    label: str, emoji: str | None, custom_id: str, style: discord.ButtonStyle, *, row: int = 0
) -> discord.ui.Button:
    return discord.ui.Button(label=label, emoji=emoji, style=style, custom_id=custom_id, row=row)


def _number(digits: str, maximum: int = ROW_ID_MAX) -> int:
    """A number from a ``custom_id``, which anyone can forge: one beyond what its column can
    hold becomes 0, which names no row and no version, so the press is refused as stale rather
    than overflowing the query."""
    return row_id(digits, maximum) or 0


def _story_template(kind: str) -> str:
    return rf"cf:{kind}:(?P<adventure>\d+):(?P<version>\d+)"


class _StoryButton(Preflighted):
    """A button under the newest turn, drawn for one story version:
    ``cf:<KIND>:<adventure>:<version>``. Mixed in before ``DynamicItem``. It narrates (or moves
    the story's head, marking turns): the permission preflight runs before it."""

    KIND: ClassVar[str]
    LABEL: ClassVar[str]
    EMOJI: ClassVar[str]
    STYLE: ClassVar[discord.ButtonStyle] = discord.ButtonStyle.secondary

    def __init__(self, adventure_id: int, version: int) -> None:
        self.adventure_id = adventure_id
        self.version = version
        custom_id = f"cf:{self.KIND}:{adventure_id}:{version}"
        button = _button(self.LABEL, self.EMOJI, custom_id, self.STYLE)
        # The DynamicItem after this mixin takes the button; a checker sees only ``object``.
        super().__init__(button)  # type: ignore[call-arg]  # object's __init__ to a checker

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> Any:
        return cls(_number(match["adventure"]), _number(match["version"]))


class ContinueButton(
    _StoryButton,
    discord.ui.DynamicItem[discord.ui.Button],
    template=_story_template("continue"),
):
    KIND = "continue"
    LABEL = "Continue"
    EMOJI = "⏩"
    STYLE = discord.ButtonStyle.primary

    async def callback(self, interaction: discord.Interaction) -> None:
        bot = bot_of(interaction)
        if not await still_here(interaction, self):
            return
        await defer_request(interaction)
        action = PlayerAction(ActionType.CONTINUE, "", interaction.user.id)
        events = bot.services.play.act(
            actor_of(interaction),
            channel_id_of(interaction),
            action,
            request_id=interaction.id,
            seen_version=self.version,
            drawn_for=self.adventure_id,
        )
        await bot.narrator.show(interaction, events)


async def still_here(interaction: discord.Interaction, button: _StoryButton) -> bool:
    """Whether a story button may still act where it is pressed, as far as this process can
    tell without the database: a press that its place hint (``engine.story.place_hints``) proves
    stale is refused at once, privately. Any other is acknowledged first and checked by the
    request's own transaction (a refusal there is private too)."""
    places = bot_of(interaction).services.play.places
    why = places.stale_button(channel_id_of(interaction), button.adventure_id, button.version)
    if why is not None:
        await reply(interaction, f"⚠ {why}")
        return False
    return True


class RetryButton(
    Preflighted, discord.ui.DynamicItem[discord.ui.Button], template=r"cf:retry:(?P<request>\d+)"
):
    """Plays again an action whose turn failed or was interrupted."""

    def __init__(self, request_id: int) -> None:
        self.request_id = request_id
        super().__init__(
            _button("Retry", "🔁", f"cf:retry:{request_id}", discord.ButtonStyle.secondary)
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> RetryButton:
        return cls(_number(match["request"], BIG_ID_MAX))

    async def callback(self, interaction: discord.Interaction) -> None:
        bot = bot_of(interaction)
        # Privately: the request named may be of another adventure, or played already, and
        # the answer to such a press is for the presser alone. The failed turn's message above
        # already shows everyone the action played again; its narration is public as ever.
        await defer_request(interaction, ephemeral=True)
        events = bot.services.play.retry_request(
            actor_of(interaction),
            channel_id_of(interaction),
            self.request_id,
            new_request_id=interaction.id,
        )
        await bot.narrator.show(interaction, events)


class InsightsButton(
    Preflighted, discord.ui.DynamicItem[discord.ui.Button], template=r"cf:insights:(?P<node>\d+)"
):
    """Shows one narrator turn's Insights to whoever presses it, privately. It names the turn,
    not a story version, so it keeps working under any turn, old or new."""

    DOES = Does.ANSWERS

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        super().__init__(
            _button("Insights", "🔍", f"cf:insights:{node_id}", discord.ButtonStyle.secondary)
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> InsightsButton:
        return cls(_number(match["node"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        await show_insights_safely(interaction, node_id=self.node_id)


class RetakeButton(
    _StoryButton,
    discord.ui.DynamicItem[discord.ui.Button],
    template=_story_template("retake"),
):
    """Writes the newest turn again as another take (the turn's earlier takes are kept)."""

    KIND = "retake"
    LABEL = "Retry"
    EMOJI = "🔁"

    async def callback(self, interaction: discord.Interaction) -> None:
        bot = bot_of(interaction)
        if not await still_here(interaction, self):
            return
        await defer_request(interaction)
        events = bot.services.play.retry_turn(
            actor_of(interaction),
            channel_id_of(interaction),
            request_id=interaction.id,
            seen_version=self.version,
            drawn_for=self.adventure_id,
        )
        await bot.narrator.show(interaction, events, retrying=True)


class UndoButton(
    _StoryButton,
    discord.ui.DynamicItem[discord.ui.Button],
    template=_story_template("undo"),
):
    KIND = "undo"
    LABEL = "Undo"
    EMOJI = "↩️"

    async def callback(self, interaction: discord.Interaction) -> None:
        bot = bot_of(interaction)
        if not await still_here(interaction, self):
            return
        await bot.narrator.head_move(
            interaction,
            lambda: bot.services.tree.undo(
                actor_of(interaction),
                channel_id_of(interaction),
                seen_version=self.version,
                drawn_for=self.adventure_id,
            ),
            "↩️ *{who} undid the last turn.*",
        )


class RedoButton(
    _StoryButton,
    discord.ui.DynamicItem[discord.ui.Button],
    template=_story_template("redo"),
):
    KIND = "redo"
    LABEL = "Redo"
    EMOJI = "↪️"

    async def callback(self, interaction: discord.Interaction) -> None:
        bot = bot_of(interaction)
        if not await still_here(interaction, self):
            return
        await bot.narrator.head_move(
            interaction,
            lambda: bot.services.tree.redo(
                actor_of(interaction),
                channel_id_of(interaction),
                seen_version=self.version,
                drawn_for=self.adventure_id,
            ),
            "↪️ *{who} brought the turn back.*",
        )


class TakeButton(
    discord.ui.DynamicItem[discord.ui.Button],
    template=r"cf:take:(?P<adventure>\d+):(?P<version>\d+):(?P<node>\d+):(?P<take>\d+):(?P<way>[pn])",
):
    """‹ or › of the take pager: shows take ``take`` of the newest turn, in place, and makes it
    live. Drawn for one story version, like every story button."""

    def __init__(
        self, adventure_id: int, version: int, node_id: int, take: int, way: str, *, disabled=False
    ) -> None:
        self.adventure_id = adventure_id
        self.version = version
        self.node_id = node_id
        self.take = take
        button = _button(
            "‹" if way == "p" else "›",
            None,
            f"cf:take:{adventure_id}:{version}:{node_id}:{take}:{way}",
            discord.ButtonStyle.secondary,
            row=1,
        )
        button.disabled = disabled
        super().__init__(button)

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return not await refused_as_blocked(interaction)

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> TakeButton:
        return cls(
            _number(match["adventure"]),
            _number(match["version"]),
            _number(match["node"]),
            _number(match["take"]),
            match["way"],
        )

    async def callback(self, interaction: discord.Interaction) -> None:
        bot = bot_of(interaction)
        await bot.narrator.show_take(
            interaction,
            lambda: bot.services.tree.choose_take(
                actor_of(interaction),
                channel_id_of(interaction),
                self.node_id,
                self.take,
                seen_version=self.version,
                drawn_for=self.adventure_id,
            ),
        )


class TakeCounter(
    discord.ui.DynamicItem[discord.ui.Button],
    template=r"cf:takes:(?P<node>\d+):(?P<version>\d+)",
):
    """The pager's ``n/m``: a disabled button that only shows which take is live.

    A ``DynamicItem`` although nobody can press it: discord.py keeps every other item of a
    view sent without a timeout in its view store for as long as the process lives (the view,
    by message, for dispatch), one per turn shown; items matched by template leave nothing
    behind."""

    def __init__(self, node_id: int, version: int, take: int, takes: int) -> None:
        button = _button(
            f"{take}/{takes}",
            None,
            f"cf:takes:{node_id}:{version}",
            discord.ButtonStyle.secondary,
            row=1,
        )
        button.disabled = True
        super().__init__(button)

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> TakeCounter:
        label = getattr(item, "label", None) or "1/1"
        take, _, takes = label.partition("/")
        return cls(_number(match["node"]), _number(match["version"]), _number(take), _number(takes))

    async def callback(self, interaction: discord.Interaction) -> None:
        # Disabled in every message; only a forged press gets here.
        await reply(interaction, "That only counts the takes; ‹ and › page them.")


def turn_buttons(
    adventure_id: int,
    version: int,
    node_id: int | None = None,
    *,
    take: int = 1,
    takes: int = 1,
    can_undo: bool | None = None,
    can_redo: bool = False,
    suggestions: Sequence[str] = (),
) -> discord.ui.View:
    """The newest turn's buttons. Under a narrator turn (``node_id``): Retry, Undo and 🔍
    Insights too, and the take pager ‹ n/m › once it has more than one take. Last, Do, Say
    and Story, each opening a form for an action (``cogs.ui.acting``). Every story
    button carries ``version``: pressed under an older turn, or twice, it changes nothing.
    Dynamic items only, so that sending the view stores nothing in discord.py's view store."""
    view = discord.ui.View(timeout=None)
    view.add_item(ContinueButton(adventure_id, version))
    if node_id is not None:
        view.add_item(RetakeButton(adventure_id, version))
    if can_undo if can_undo is not None else node_id is not None:
        view.add_item(UndoButton(adventure_id, version))
    if can_redo:
        view.add_item(RedoButton(adventure_id, version))
    if node_id is not None:
        view.add_item(InsightsButton(node_id))
    if node_id is not None and takes > 1:
        view.add_item(TakeButton(adventure_id, version, node_id, take - 1, "p", disabled=take <= 1))
        view.add_item(TakeCounter(node_id, version, take, takes))
        view.add_item(
            TakeButton(adventure_id, version, node_id, take + 1, "n", disabled=take >= takes)
        )
    for button in action_buttons(adventure_id):
        view.add_item(button)
    if node_id is not None:
        # The turn's suggested actions, on a row of their own (``cogs.ui.suggestion_buttons``).
        for suggestion in suggestion_buttons(adventure_id, version, node_id, suggestions):
            view.add_item(suggestion)
    return view


def retry_button(request_id: int) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(RetryButton(request_id))
    return view
