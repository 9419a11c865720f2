"""/adventure export as prose (``format: text|markdown|html``) through the Discord stand-in: the
story's current line, opening first, each action set apart from the narration, a heading where
each chapter began, nothing of a retried take or an undone turn; player text escaped in Markdown
and HTML; the page self-contained; refused where the JSON export is. Real discord.py over the
local stand-in, the fake model server behind the bot."""

from __future__ import annotations

import html
import re

import markdown_it
import pytest

from bot.standin import StandinFile
from bot.standin.records import AttachmentRecord
from engine.library.formats.prose_render import escape_markdown
from tests.discord_env import DiscordEnv, answered
from tests.test_chapters_discord import said
from tests.test_host_commands import act, refused

OPENING = "The supply boat leaves you on the landing of Tidewatch rock"
#: An action a player typed to break out of the text: markup in every format it could reach.
HOSTILE = '<script>alert("x")</script> **loud** [a link](http://evil.example) #tag'


async def slash(env: DiscordEnv, user: int, place: int, command: str, **options):
    record = await env.fake.slash(user, place, command, **options)
    await env.done()
    assert record.failed is None, record.failed
    return record


async def exported(env: DiscordEnv, user: int, place: int, kind: str) -> AttachmentRecord:
    """The file ``/adventure export format:kind`` sends, checked to go to ``user`` alone."""
    message = await answered(env, await slash(env, user, place, "adventure export", format=kind))
    assert message.visible_to == user
    (file,) = message.attachments
    return file


def in_order(text: str, *pieces: str) -> None:
    """Each piece is in ``text``, once, after the one before it."""
    at = -1
    for piece in pieces:
        assert text.count(piece) == 1, f"{piece!r} not once in:\n{text}"
        found = text.index(piece)
        assert found > at, f"{piece!r} out of order in:\n{text}"
        at = found


async def played_story(env: DiscordEnv, fake_model) -> int:
    """The Tidewatch Light played into its second chapter, with a take that was retried away
    and a turn that was undone: its thread."""
    thread = await env.start_thread(scenario="tidewatch")
    fake_model.queue(said("The stair groans: RETRIED AWAY.", "searched:lamp_room"))
    await act(env, thread, env.alice, "climb the stair")
    fake_model.queue(said("You climb to the lamp room.", "searched:lamp_room"))
    await slash(env, env.alice, thread, "retry")
    fake_model.queue(
        said("Wren waves from the slip.\n\nShe points at the lens.", "met_wren", "found_clue"),
        said("Chisel marks on the lens.", "found_clue"),
        "The apprentice learned the light was put out on purpose.",  # the chapter's recap
    )
    await act(env, thread, env.alice, "call to the girl")
    await act(env, thread, env.bob, "look at the lens")
    assert "Chapter 1 “The Dark Lamp” complete" in env.narration(thread)[-1]
    fake_model.queue("The causeway waits under the fog.", "A gull answers: UNDONE.")
    await act(env, thread, env.bob, HOSTILE)
    await act(env, thread, env.alice, "shout into the fog")
    await slash(env, env.alice, thread, "undo")
    return thread


async def test_the_story_as_text_markdown_and_html(env: DiscordEnv, fake_model):
    thread = await played_story(env, fake_model)

    # bob neither hosts nor manages anything: the same right as the JSON export's.
    text_file = await exported(env, env.bob, thread, "text")
    assert text_file.filename == "the-tidewatch-light.adventure.txt"
    text = text_file.content.decode("utf-8")
    in_order(
        text,
        "The Tidewatch Light\n===",
        "Chapter 1: The Dark Lamp\n---",
        OPENING,
        "> alice climbs the stair.",
        "You climb to the lamp room.",
        "> alice calls to the girl.",
        "Wren waves from the slip.\n\nShe points at the lens.",
        "> bob looks at the lens.",
        "Chisel marks on the lens.",
        "Chapter 2: The Drowned Chapel\n---",
        '> bob <script>alert("x")</script>',
        "The causeway waits under the fog.",
    )
    assert text.rstrip().endswith("The causeway waits under the fog.")
    for gone in ("RETRIED AWAY", "UNDONE", "shout", "Light the Tidewatch", "recap"):
        assert gone not in text

    md_file = await exported(env, env.bob, thread, "markdown")
    assert md_file.filename == "the-tidewatch-light.adventure.md"
    markdown = md_file.content.decode("utf-8")
    in_order(
        markdown,
        "# The Tidewatch Light\n",
        "## Chapter 1: The Dark Lamp\n",
        OPENING,
        "> alice climbs the stair.",
        "You climb to the lamp room.",
        "Chisel marks on the lens.",
        "## Chapter 2: The Drowned Chapel\n",
        "> bob \\<script\\>",
        "The causeway waits under the fog.",
    )
    assert "RETRIED AWAY" not in markdown and "UNDONE" not in markdown
    # The player's markup is text: escaped, every piece of it.
    hostile = next(line for line in markdown.splitlines() if "script" in line)
    assert "\\*\\*loud\\*\\*" in hostile and "\\[a link\\](http\\://evil.example)" in hostile
    assert "\\#tag" in hostile and "<script>" not in markdown

    page_file = await exported(env, env.bob, thread, "html")
    assert page_file.filename == "the-tidewatch-light.adventure.html"
    page = page_file.content.decode("utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    in_order(
        page,
        "<title>The Tidewatch Light</title>",
        "<h1>The Tidewatch Light</h1>",
        "<h2>Chapter 1: The Dark Lamp</h2>",
        OPENING,
        '<blockquote class="action">\n<p>alice climbs the stair.</p>',
        "<p>You climb to the lamp room.</p>",
        "<p>Wren waves from the slip.</p>\n<p>She points at the lens.</p>",
        "<h2>Chapter 2: The Drowned Chapel</h2>",
        html.escape(f"bob {HOSTILE}"[:20]),
        "<p>The causeway waits under the fog.</p>",
    )
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    # Self-contained: no script, and nothing the page would fetch from anywhere.
    assert "<script" not in page.lower()
    assert not re.search(r"""\b(src|href)\s*=|url\(|@import""", page, re.IGNORECASE)
    assert "RETRIED AWAY" not in page and "UNDONE" not in page

    # The default stays the lossless JSON export; brought back by an import (which keeps no
    # recaps), the story reads the same, its chapters where they began.
    whole = await exported(env, env.bob, thread, "json")
    assert whole.filename == "the-tidewatch-light.adventure.json"
    dm = env.fake.dm_channel(env.bob)
    upload = StandinFile(whole.filename, whole.content, "application/json")
    await slash(env, env.bob, dm, "adventure import", file=upload)
    assert (await exported(env, env.bob, dm, "text")).content == text_file.content


async def test_prose_export_is_refused_where_the_json_export_is(env: DiscordEnv):
    for kind in ("json", "html"):
        record = await env.fake.slash(env.bob, env.channel, "adventure export", format=kind)
        said_to_bob = await refused(env, record)
        assert "no adventure running here to export" in said_to_bob
        assert (await answered(env, record)).attachments == []


async def test_a_story_without_chapters_has_no_headings(env: DiscordEnv, fake_model):
    thread = await env.start_thread(scenario="lantern")
    fake_model.queue("The lantern hums.")
    await act(env, thread, env.alice, "listen")
    text = (await exported(env, env.alice, thread, "text")).content.decode("utf-8")
    assert "Chapter" not in text
    in_order(text, "The Lantern Road\n===", "> alice listens.", "The lantern hums.")
    page = (await exported(env, env.alice, thread, "markdown")).content.decode("utf-8")
    assert "##" not in page


@pytest.mark.parametrize(
    "typed",
    [
        HOSTILE,
        "# a heading",
        "- a list",
        "1. a list",
        "> a quote",
        "    indented code",
        "---",
        "a | table | row",
        "~~struck~~ ||spoiler|| $x^2$",
        "&amp; &#60; <!-- a comment -->",
        "www.example.com and http://example.com and a@example.com",
        "![an image](http://example.com/x.png) <http://example.com>",
        "a line ending in a backslash\\",
    ],
)
def test_escaped_markdown_renders_as_the_text_typed(typed: str):
    """What a CommonMark renderer (with GitHub's tables and strikethrough) makes of an escaped
    line: one paragraph holding the typed text, no other element."""
    renderer = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])
    rendered = renderer.render(escape_markdown(typed))
    shown = html.escape(typed.lstrip(), quote=False).replace('"', "&quot;")
    assert rendered == f"<p>{shown}</p>\n"
