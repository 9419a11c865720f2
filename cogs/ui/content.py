"""The content guard: everything Campfire sends or edits in Discord fits Discord's limits.

Discord refuses a message whose content or embeds are over its limits, and refuses it whole
(400, 50035 Invalid Form Body; discord-api-docs ``resources/Message.md``, "Create Message", and
``resources/Channel.md``, "Embed Limits"): an interaction then stays "thinking…" for ever, or
loses its buttons. So every message goes out through here, in one of two ways:

* **cut** (:func:`fit_text`, :func:`fit_embed`): text that is a view of something kept whole
  elsewhere (a quoted name, a turn's text kept in the story, a preview), cut with an ellipsis
  to the room Discord gives it;
* **paged** (:func:`text_pages` here, ``cogs.ui.pages`` for lists): text the player needs whole
  (their
  own action, a list), split into several messages or pages instead of cut.

Lengths are counted in code points, as Discord counts them (and as ``len`` does).
"""

from __future__ import annotations

import discord

from cogs.ui.text_split import DISCORD_LIMIT, display_pieces
from engine.platform.sanitise import echo

#: Message content (``resources/Message.md``, "Create Message": content up to 2000 characters).
CONTENT_MAX = DISCORD_LIMIT
# Embed limits (``resources/Message.md``, "Embed Limits").
EMBED_TITLE_MAX = 256
EMBED_DESCRIPTION_MAX = 4096
EMBED_FIELDS_MAX = 25
EMBED_FIELD_NAME_MAX = 256
EMBED_FIELD_VALUE_MAX = 1024
EMBED_FOOTER_MAX = 2048
EMBED_AUTHOR_MAX = 256
#: The sum of every embed's title, description, field names and values, footer and author
#: name in one message.
EMBEDS_TOTAL_MAX = 6000


def fit_text(text: str, limit: int = CONTENT_MAX) -> str:
    """Message content cut to ``limit`` (an ellipsis marks the cut): for text kept whole
    elsewhere, or a note nobody needs past its first 2000 characters."""
    return echo(text, limit)


def text_pages(text: str, limit: int = CONTENT_MAX) -> list[str]:
    """Text the player needs whole, as the contents of consecutive messages: split at a
    paragraph, line, sentence or word (``cogs.ui.text_split``), nothing lost but whitespace at
    the cuts. At least one piece, even for an empty text."""
    return display_pieces(text, limit) or [text.strip()]


def fit_embed(embed: discord.Embed) -> discord.Embed:
    """``embed`` cut, in place, to every limit Discord sets on an embed (returned too).

    Over the 6,000 characters of a message, the description gives way first (it is the
    longest part, and the fields say what the embed is), then the fields' values, last first,
    then the last fields, then the footer (a title and author name fit by their own limits).
    """
    if embed.title:
        embed.title = echo(embed.title, EMBED_TITLE_MAX)
    if embed.description:
        embed.description = echo(embed.description, EMBED_DESCRIPTION_MAX)
    if embed.author and embed.author.name:
        embed.set_author(
            name=echo(embed.author.name, EMBED_AUTHOR_MAX),
            url=embed.author.url,
            icon_url=embed.author.icon_url,
        )
    if embed.footer and embed.footer.text:
        embed.set_footer(
            text=echo(embed.footer.text, EMBED_FOOTER_MAX), icon_url=embed.footer.icon_url
        )
    fields = embed.fields[:EMBED_FIELDS_MAX]
    embed.clear_fields()
    for field in fields:
        embed.add_field(
            name=echo(field.name or "\u200b", EMBED_FIELD_NAME_MAX),
            value=echo(field.value or "\u200b", EMBED_FIELD_VALUE_MAX),
            inline=bool(field.inline),
        )
    over = embed_size(embed) - EMBEDS_TOTAL_MAX
    if over > 0 and embed.description:
        embed.description = echo(embed.description, max(len(embed.description) - over, 1))
        over = embed_size(embed) - EMBEDS_TOTAL_MAX
    for index in reversed(range(len(embed.fields))):
        if over <= 0:
            break
        field = embed.fields[index]
        value = field.value or ""
        keep = max(len(value) - over, 1)
        embed.set_field_at(
            index, name=field.name, value=echo(value, keep), inline=bool(field.inline)
        )
        over = embed_size(embed) - EMBEDS_TOTAL_MAX
    while over > 0 and embed.fields:
        embed.remove_field(len(embed.fields) - 1)
        over = embed_size(embed) - EMBEDS_TOTAL_MAX
    if over > 0 and embed.footer and embed.footer.text:
        keep = max(len(embed.footer.text) - over, 1)
        embed.set_footer(text=echo(embed.footer.text, keep), icon_url=embed.footer.icon_url)
    return embed


def embed_size(embed: discord.Embed) -> int:
    """What counts towards the 6,000 characters of a message (``len(embed)`` in discord.py)."""
    return len(embed)
