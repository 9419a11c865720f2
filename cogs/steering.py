"""Steering the adventure running here: /note, /essentials, /instructions, /card …, and the
``/adventure`` group, to which /adventure settings (``cogs.adventure_settings``) and others add.

Each command is one call to a steering service (``engine.story.steering``: the texts, the
cards); a command without its text opens a form prefilled with the current value, and the form's
submission is the second call. Changes answer the player alone and apply from the
next turn. Who may change what is the engine's rule (``engine.people.access.may_steer``), read from
the actor ``actor_of`` builds. A change is deferred before it is written; a form's when it is
submitted, as a form must be an interaction's first answer and nothing is written before it opens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui import bot_of
from cogs.ui.adventure_group import DESCRIPTION as ADVENTURE_GROUP
from cogs.ui.adventure_group import card_choices
from cogs.ui.content import EMBED_DESCRIPTION_MAX, fit_embed, fit_text
from cogs.ui.forms import FORM_TIMEOUT_S, MODAL_TITLE_MAX, TEXT_INPUT_MAX, on_form_error
from cogs.ui.gate import GatedForm
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.pages import ListPage, list_source, show_list
from cogs.ui.replies import reply
from engine.errors import InvalidInput
from engine.platform.sanitise import echo
from engine.story.steering.cards import (
    CARD_ENTRY_MAX,
    CARD_KEYS_MAX,
    CARD_TITLE_MAX,
    CARD_TYPE_MAX,
    DEFAULT_CARD_TYPE,
    CardDraft,
    CardPage,
    CardView,
)
from engine.story.steering.text import TEXT_MAX_CHARS, SteeringChange, SteeringField

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

CARDS_PER_PAGE = 8
PREVIEW_WORDS = 16
STEERING_COLOUR = discord.Colour.dark_gold()

_HINTS = {
    SteeringField.AUTHORS_NOTE: "A short note on style or tone, placed near the end of what "
    "the narrator reads, e.g. “Write in a gothic tone; keep it eerie.”",
    SteeringField.PLOT_ESSENTIALS: "What the narrator must always remember: who the player "
    "is, the goal, key facts.",
    SteeringField.AI_INSTRUCTIONS: "How the narrator should write, e.g. “Second person, "
    "present tense; never act for the player.”",
}


def _preview(text: str, words: int = PREVIEW_WORDS) -> str:
    parts = text.split()
    shown = " ".join(parts[:words])
    return echo(shown + ("…" if len(parts) > words else ""), 200)


# --- rendering -----------------------------------------------------------------------------------


def steering_embed(label: str, text: str) -> discord.Embed:
    return discord.Embed(
        title=label,
        description=echo(text, EMBED_DESCRIPTION_MAX),
        colour=STEERING_COLOUR,
    )


def change_reply(change: SteeringChange) -> tuple[str, discord.Embed | None]:
    if change.cleared:
        return change.message, None
    return change.message, steering_embed(f"{change.field.label} now reads", change.text)


def card_line(number: int, card: CardView) -> str:
    title = discord.utils.escape_markdown(card.title) or f"(untitled #{card.id})"
    head = f"**{number}. {title}** · {card.type}"
    if card.always_on:
        head += " · 📌 always on"
    keys = ", ".join(card.key_list)
    lines = [head, f"keys: {discord.utils.escape_markdown(echo(keys, 120))}" if keys else "no keys"]
    if card.options:
        # Its world-info options (a lorebook's, or a bundle's), as SillyTavern names them.
        lines.append(
            f"world info: {discord.utils.escape_markdown(echo('; '.join(card.options), 200))}"
        )
    if card.entry.strip():
        lines.append(f"> {discord.utils.escape_markdown(_preview(card.entry))}")
    return "\n".join(lines)


def cards_embed(page: CardPage) -> discord.Embed:
    title = echo(f"Story cards · {page.adventure_title}", 256)
    if not page.cards:
        description = "This adventure has no story cards yet. Add one with `/card add`."
    else:
        first = (page.page - 1) * CARDS_PER_PAGE + 1
        blocks = [card_line(first + i, card) for i, card in enumerate(page.cards)]
        description = echo("\n\n".join(blocks), EMBED_DESCRIPTION_MAX)
    embed = discord.Embed(title=title, description=description, colour=STEERING_COLOUR)
    if page.total:
        embed.set_footer(
            text=f"Page {page.page}/{page.pages} · {page.total:,} cards · "
            "📌 always on; the others come in when their keys appear in the story"
        )
    return embed


@list_source("cards")
async def card_page(interaction: discord.Interaction, page: int) -> ListPage:
    found = await bot_of(interaction).services.story_cards.page(
        channel_id_of(interaction), page=page, per_page=CARDS_PER_PAGE
    )
    return ListPage(cards_embed(found), found.page, found.pages)


# --- forms ---------------------------------------------------------------------------------------


class SteeringModal(GatedForm):
    """One steering text in a paragraph box, prefilled; an empty box clears it."""

    def __init__(self, field: SteeringField, current: str, adventure_id: int) -> None:
        super().__init__(title=field.label, timeout=FORM_TIMEOUT_S)
        self.field = field
        self.adventure_id = adventure_id
        self.text: discord.ui.TextInput[SteeringModal] = discord.ui.TextInput(
            label=field.label,
            custom_id="text",
            style=discord.TextStyle.paragraph,
            default=current or None,
            placeholder=echo(_HINTS[field], 100),
            required=False,
            max_length=TEXT_INPUT_MAX,
        )
        self.add_item(self.text)

    async def on_submit(self, interaction: discord.Interaction) -> None:
        await _defer(interaction)
        change = await bot_of(interaction).services.steering_text.set(
            channel_id_of(interaction),
            actor_of(interaction),
            self.field,
            self.text.value,
            adventure_id=self.adventure_id,
        )
        content, embed = change_reply(change)
        await _answer(interaction, content, embed)

    async def on_error(self, interaction: discord.Interaction, error: Exception) -> None:
        await on_form_error(interaction, error)


class CardModal(GatedForm):
    """A story card's title, keys, entry and type; ``card`` given means editing it."""

    def __init__(
        self,
        *,
        adventure_id: int,
        always_on: bool,
        card: CardView | None = None,
        draft: CardDraft | None = None,
    ) -> None:
        title = "New story card" if card is None else f"Edit card: {card.title}"
        super().__init__(title=echo(title, MODAL_TITLE_MAX), timeout=FORM_TIMEOUT_S)
        self.adventure_id = adventure_id
        self.always_on = always_on
        self.card = card
        if draft is None and card is not None:
            draft = CardDraft(card.title, card.keys, card.entry, card.type, card.always_on)
        draft = draft or CardDraft("", type=DEFAULT_CARD_TYPE)

        def box(
            label: str, custom_id: str, value: str, cap: int, **kw: Any
        ) -> discord.ui.TextInput[CardModal]:
            item: discord.ui.TextInput[CardModal] = discord.ui.TextInput(
                label=label,
                custom_id=custom_id,
                default=value or None,
                # Room for a longer stored value (an imported card), so the form can show it;
                # the engine then says what is too long.
                max_length=min(TEXT_INPUT_MAX, max(cap, len(value))),
                **kw,
            )
            self.add_item(item)
            return item

        self.title_box = box("Title", "title", draft.title, CARD_TITLE_MAX, required=True)
        self.keys_box = box(
            "Keys (comma-separated)",
            "keys",
            draft.keys,
            CARD_KEYS_MAX,
            required=False,
            placeholder="Wenna, innkeeper, the inn",
        )
        self.entry_box = box(
            "Entry (what the narrator reads)",
            "entry",
            draft.entry,
            CARD_ENTRY_MAX,
            required=False,
            style=discord.TextStyle.paragraph,
        )
        self.type_box = box(
            "Type",
            "type",
            draft.type,
            CARD_TYPE_MAX,
            required=False,
            placeholder="character, location, faction, race, class or custom",
        )

    def draft(self) -> CardDraft:
        return CardDraft(
            title=self.title_box.value,
            keys=self.keys_box.value,
            entry=self.entry_box.value,
            type=self.type_box.value,
            always_on=self.always_on,
        )

    async def on_submit(self, interaction: discord.Interaction) -> None:
        cards = bot_of(interaction).services.story_cards
        where, actor = channel_id_of(interaction), actor_of(interaction)
        draft = self.draft()
        await _defer(interaction)
        try:
            if self.card is None:
                saved = await cards.add(where, actor, draft, adventure_id=self.adventure_id)
                done = "added"
            else:
                saved = await cards.edit(where, actor, self.card.id, draft)
                done = "saved"
        except InvalidInput as error:
            # What was typed is not lost: a button opens the form again with it.
            again = ResubmitView(self, draft)
            await reply(interaction, f"⚠ {error.message}", view=again)
            return
        content = f"Story card “{saved.title}” {done}; it applies from the next turn."
        if not saved.key_list and not saved.always_on:
            content += " It has no keys and is not always on, so the narrator will not see it."
        await _answer(interaction, content, None)

    async def on_error(self, interaction: discord.Interaction, error: Exception) -> None:
        await on_form_error(interaction, error)


class ResubmitView(discord.ui.View):
    """Under a refused card form: reopens it with what the player typed."""

    def __init__(self, modal: CardModal, draft: CardDraft) -> None:
        super().__init__(timeout=FORM_TIMEOUT_S)
        self.modal = modal
        self.draft = draft

    @discord.ui.button(label="Fix and send again", emoji="✏️", style=discord.ButtonStyle.primary)
    async def again(self, interaction: discord.Interaction, button: discord.ui.Button) -> None:
        modal = self.modal
        await interaction.response.send_modal(
            CardModal(
                adventure_id=modal.adventure_id,
                always_on=modal.always_on,
                card=modal.card,
                draft=self.draft,
            )
        )


async def _defer(interaction: discord.Interaction) -> None:
    """Before a change is written: the answer is for the player alone, as ever."""
    await interaction.response.defer(thinking=True, ephemeral=True)


async def _answer(
    interaction: discord.Interaction, content: str, embed: discord.Embed | None
) -> None:
    kwargs: dict[str, Any] = {"content": fit_text(content), "ephemeral": True}
    if embed is not None:
        kwargs["embed"] = fit_embed(embed)
    if interaction.response.is_done():  # deferred before a write
        await interaction.followup.send(**kwargs)
    else:
        await interaction.response.send_message(**kwargs)


# --- the cog -------------------------------------------------------------------------------------


class SteeringCog(commands.Cog):
    card = app_commands.Group(name="card", description="The story cards of the adventure here")
    #: The one /adventure group; other cogs add to it (``cogs.ui.adventure_group``).
    adventure = app_commands.Group(name="adventure", description=ADVENTURE_GROUP)

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    # --- steering text ------------------------------------------------------------------------

    @app_commands.command(name="note")
    @app_commands.describe(text="The new author's note; leave empty to edit it in a form")
    async def note(
        self,
        interaction: discord.Interaction,
        text: app_commands.Range[str, 1, TEXT_MAX_CHARS] | None = None,
    ) -> None:
        """Read or change the author's note: style and tone, placed near the story's end."""
        await self._steer(interaction, SteeringField.AUTHORS_NOTE, text)

    @app_commands.command(name="essentials")
    @app_commands.describe(text="The new plot essentials; leave empty to edit them in a form")
    async def essentials(
        self,
        interaction: discord.Interaction,
        text: app_commands.Range[str, 1, TEXT_MAX_CHARS] | None = None,
    ) -> None:
        """Read or change the plot essentials: what the narrator must always remember."""
        await self._steer(interaction, SteeringField.PLOT_ESSENTIALS, text)

    @app_commands.command(name="instructions")
    @app_commands.describe(text="The new AI instructions; leave empty to edit them in a form")
    async def instructions(
        self,
        interaction: discord.Interaction,
        text: app_commands.Range[str, 1, TEXT_MAX_CHARS] | None = None,
    ) -> None:
        """Read or change the AI instructions: how the narrator should write."""
        await self._steer(interaction, SteeringField.AI_INSTRUCTIONS, text)

    async def _steer(
        self, interaction: discord.Interaction, field: SteeringField, text: str | None
    ) -> None:
        steering = self.bot.services.steering_text
        where, actor = channel_id_of(interaction), actor_of(interaction)
        if text is not None:
            await _defer(interaction)
            change = await steering.set(where, actor, field, text)
            content, embed = change_reply(change)
            await _answer(interaction, content, embed)
            return
        current = await steering.get(where, actor, field)
        if len(current.text) > TEXT_INPUT_MAX:
            # A Discord form cannot hold it, and a cut copy would lose the rest on submit.
            await _answer(
                interaction,
                f"{field.label} is {len(current.text):,} characters long, more than a Discord "
                f"form holds ({TEXT_INPUT_MAX:,}). Replace it with the command's `text` option.",
                steering_embed(field.label, current.text),
            )
            return
        await interaction.response.send_modal(
            SteeringModal(field, current.text, current.adventure_id)
        )

    # --- story cards --------------------------------------------------------------------------

    @card.command(name="add")
    @app_commands.describe(
        always_on="Always give this card to the narrator, not only when its keys come up"
    )
    async def card_add(self, interaction: discord.Interaction, always_on: bool = False) -> None:
        """Add a story card: a title, keys that bring it in, and what the narrator reads."""
        adventure_id = await self.bot.services.story_cards.check_room(
            channel_id_of(interaction), actor_of(interaction)
        )
        await interaction.response.send_modal(
            CardModal(adventure_id=adventure_id, always_on=always_on)
        )

    @card.command(name="edit")
    @app_commands.describe(
        card="The card to edit",
        always_on="Always give it to the narrator; leave empty to keep it as it is",
    )
    async def card_edit(
        self,
        interaction: discord.Interaction,
        card: str,
        always_on: bool | None = None,
    ) -> None:
        """Edit a story card in a form."""
        found = await self.bot.services.story_cards.get(
            channel_id_of(interaction), actor_of(interaction), card
        )
        if max(len(found.entry), len(found.keys), len(found.title)) > TEXT_INPUT_MAX:
            raise InvalidInput(
                f"“{found.title}” is longer than a Discord form holds "
                f"({TEXT_INPUT_MAX:,} characters), so it cannot be edited here."
            )
        await interaction.response.send_modal(
            CardModal(
                adventure_id=found.adventure_id,
                always_on=found.always_on if always_on is None else always_on,
                card=found,
            )
        )

    @card.command(name="remove")
    @app_commands.describe(card="The card to remove")
    async def card_remove(self, interaction: discord.Interaction, card: str) -> None:
        """Remove a story card."""
        await _defer(interaction)
        removed = await self.bot.services.story_cards.remove(
            channel_id_of(interaction), actor_of(interaction), card
        )
        title = removed.title or f"#{removed.id}"
        await _answer(
            interaction, f"Story card “{title}” removed; it applies from the next turn.", None
        )

    @card.command(name="list")
    @app_commands.describe(page="Which page of cards to show")
    async def card_list(
        self, interaction: discord.Interaction, page: app_commands.Range[int, 1] = 1
    ) -> None:
        """Show the adventure's story cards (to you alone)."""
        await show_list(interaction, "cards", page)

    @card_edit.autocomplete("card")
    async def card_edit_choices(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return await card_choices(interaction, current)

    @card_remove.autocomplete("card")
    async def card_remove_choices(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return await card_choices(interaction, current)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(SteeringCog(bot))
