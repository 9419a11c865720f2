"""Lists as paged embeds: one pager, ◀ page n/m ▶, for every list command.

A list (branches, save points, scripts, story cards, memories, scenarios, the story's tree) can
grow past what one message holds (4096 characters of embed description; Discord refuses more
whole, and the interaction fails). Each list kind registers how to read one page of itself
(:func:`list_source`); :func:`show_list` answers the command with the first page (or the one
asked for) and the pager's buttons.

The buttons are stateless: a ``DynamicItem`` whose ``custom_id`` names the list kind, the
adventure the list was drawn for and the page (``cf:list:<kind>:<adventure>:<page>:<p|c|n>``,
well under Discord's 100 characters). A press reads the list again, where it is pressed, as its
command does, so it works in any process and after a restart, and always shows the list as it
is now. A ``custom_id`` is whatever the client sends: the adventure it names must be the one
running where it is pressed (the engine's ``may_press`` rule, as for the story buttons), and
its numbers are bounded (``row_id``) before anything is read.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import discord

from cogs.ui import bot_of
from cogs.ui.content import fit_embed
from cogs.ui.gate import refused_as_blocked
from cogs.ui.interaction import channel_id_of
from cogs.ui.replies import reply
from engine.errors import CampfireError
from engine.platform.sanitise import ROW_ID_MAX, echo, row_id

if TYPE_CHECKING:
    pass

#: Entries on one page of a whole list, and the characters they may take: a page reads at a
#: glance, and stays far under the 4096 of an embed's description.
PAGE_ENTRIES = 15
PAGE_CHARS = 3000
#: The most pages a ``custom_id`` may name; a forged larger number reads as the last page.
PAGE_MAX = 100_000


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a list, ready to show."""

    embed: discord.Embed
    page: int
    pages: int
    #: A file shown with the list's first answer (a picture of it); a page turn edits the
    #: embed and keeps the file already attached.
    file: discord.File | None = None


#: Reads page ``page`` of a list where the interaction happens (the list's rights are its
#: service's, as for its command); raises ``CampfireError`` with the player's answer.
ListReader = Callable[[discord.Interaction, int], Awaitable[ListPage]]


@dataclass(frozen=True, slots=True)
class ListSource:
    read: ListReader
    #: Whether the list is of the adventure running where it is shown (a press must be where
    #: that adventure still runs); otherwise it is the presser's own (their scenarios).
    of_adventure: bool = True


# Which list kinds there are: filled once, as each cog module is imported, never changed after.
_SOURCES: dict[str, ListSource] = {}

_KIND = re.compile(r"[a-z]{1,16}")


def list_source(kind: str, *, of_adventure: bool = True) -> Callable[[ListReader], ListReader]:
    """Register how to read a list kind (a decorator on its reader)."""
    assert _KIND.fullmatch(kind), kind

    def register(read: ListReader) -> ListReader:
        _SOURCES[kind] = ListSource(read, of_adventure)
        return read

    return register


def paged(
    entries: list[str],
    page: int,
    *,
    title: str,
    empty: str,
    colour: discord.Colour | None = None,
    footer: str = "",
    separator: str = "\n",
    code_block: bool = False,
    per_page: int = PAGE_ENTRIES,
) -> ListPage:
    """Page ``page`` (clamped to the pages there are) of a whole list of ``entries``: at most
    ``per_page`` entries and :data:`PAGE_CHARS` characters a page, an entry never split (one
    longer than a page is cut, the only thing cut)."""
    limit = PAGE_CHARS - (8 if code_block else 0)
    chunks: list[list[str]] = []
    size = 0
    for entry in entries:
        entry = echo(entry, limit)
        grown = size + len(separator) + len(entry)
        if not chunks or len(chunks[-1]) >= per_page or grown > limit:
            chunks.append([entry])
            size = len(entry)
        else:
            chunks[-1].append(entry)
            size = grown
    pages = max(1, len(chunks))
    page = min(max(1, page), pages)
    if chunks:
        body = separator.join(chunks[page - 1])
        description = f"```\n{body}\n```" if code_block else body
    else:
        description = empty
    embed = discord.Embed(title=title, description=description, colour=colour)
    notes = [f"Page {page}/{pages}"] if pages > 1 else []
    if footer:
        notes.append(footer)
    if notes:
        embed.set_footer(text=" · ".join(notes))
    return ListPage(embed, page, pages)


async def show_list(
    interaction: discord.Interaction,
    kind: str,
    page: int = 1,
    *,
    ephemeral: bool = True,
) -> None:
    """Answer a list command with page ``page`` of list ``kind`` and, when it has more than
    one, the pager. A refusal (no adventure here, no such page) propagates to the command's
    error handler, which answers it privately."""
    source = _SOURCES[kind]
    scope = 0
    if source.of_adventure:
        scope = await bot_of(interaction).services.play.check_list(channel_id_of(interaction))
    shown = await source.read(interaction, page)
    await reply(
        interaction,
        embed=shown.embed,
        view=pager(kind, scope, shown),
        ephemeral=ephemeral,
        file=shown.file,
    )


def pager(kind: str, scope: int, shown: ListPage) -> discord.ui.View | None:
    """◀ page n/m ▶ under a page; none for a list of one page."""
    if shown.pages <= 1:
        return None
    page, pages = shown.page, shown.pages
    view = discord.ui.View(timeout=None)
    view.add_item(ListPageButton(kind, scope, max(1, page - 1), "p", disabled=page <= 1))
    view.add_item(ListPageButton(kind, scope, page, "c", label=f"page {page}/{pages}"))
    view.add_item(ListPageButton(kind, scope, min(pages, page + 1), "n", disabled=page >= pages))
    return view


class ListPageButton(
    discord.ui.DynamicItem[discord.ui.Button],
    template=r"cf:list:(?P<kind>[a-z]{1,16}):(?P<scope>\d+):(?P<page>\d+):(?P<way>[pcn])",
):
    """◀ or ▶ of a list's pager, or its page counter (drawn disabled: it only says where the
    reader is). ``scope`` is the adventure the list was drawn for (0 for a player's own list)."""

    def __init__(
        self,
        kind: str,
        scope: int,
        page: int,
        way: str,
        *,
        disabled: bool = False,
        label: str | None = None,
    ) -> None:
        self.kind = kind
        self.scope = scope
        self.page = page
        super().__init__(
            discord.ui.Button(
                label=label or ("◀" if way == "p" else "▶"),
                style=discord.ButtonStyle.secondary,
                custom_id=f"cf:list:{kind}:{scope}:{page}:{way}",
                disabled=disabled or way == "c",
            )
        )

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return not await refused_as_blocked(interaction)

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> ListPageButton:
        # Forged numbers are bounded before anything reads them: a scope beyond any row's id
        # names no adventure (0), a page beyond any list's is its last.
        scope = row_id(match["scope"], ROW_ID_MAX) or 0
        page = row_id(match["page"], PAGE_MAX) or PAGE_MAX
        return cls(match["kind"], scope, page, match["way"])

    async def callback(self, interaction: discord.Interaction) -> None:
        bot_interaction = cast(discord.Interaction, interaction)
        source = _SOURCES.get(self.kind)
        if source is None:
            await reply(
                interaction, "⚠ That list is no longer shown this way; run its command again."
            )
            return
        try:
            if source.of_adventure:
                await bot_of(bot_interaction).services.play.check_list(
                    channel_id_of(interaction), drawn_for=self.scope
                )
            shown = await source.read(bot_interaction, self.page)
        except CampfireError as error:
            await reply(interaction, f"⚠ {error.message}")
            return
        await interaction.response.edit_message(
            embed=fit_embed(shown.embed), view=pager(self.kind, self.scope, shown)
        )
