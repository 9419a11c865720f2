"""A story's prose (``engine.library.formats.story_prose``) written out as a file to read: plain
text, Markdown or one web page.

Every word in these files came from players, a scenario's author or a model a player steered,
so none of it is trusted as markup. Markdown escapes it character by character, so that text
typed as an action renders as that text and nothing else (no emphasis, heading, list, link,
image, table, raw HTML or autolink); the web page escapes it as HTML and carries no script and
no resource from anywhere (a Content-Security-Policy says so to the browser too), so that it
can be opened from a download or a chat on any phone without reaching out to anyone.
"""

from __future__ import annotations

import html
import re
from enum import StrEnum

from engine.library.formats.story_prose import Passage, PassageKind, StoryProse


class ProseFormat(StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    HTML = "html"


#: The end of each format's file name.
EXTENSIONS = {ProseFormat.TEXT: "txt", ProseFormat.MARKDOWN: "md", ProseFormat.HTML: "html"}


def render(prose: StoryProse, kind: ProseFormat) -> str:
    if kind is ProseFormat.MARKDOWN:
        return _markdown(prose)
    if kind is ProseFormat.HTML:
        return _html(prose)
    return _text(prose)


def _paragraphs(text: str) -> list[list[str]]:
    """A passage's paragraphs (split at blank lines), each as its lines without trailing
    spaces; a renderer keeps the lines, which in a story are often meant (verse, a list of
    what is in a chest)."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


def _action_lines(passage: Passage) -> list[list[str]]:
    """An action's paragraphs without the "> " a do or say action is stored with: each format
    marks an action its own way (a story action, stored as written, gets the same mark)."""
    paragraphs = _paragraphs(passage.text)
    if paragraphs and paragraphs[0][0].startswith(">"):
        paragraphs[0][0] = paragraphs[0][0][1:].lstrip()
    return [p for p in paragraphs if any(line.strip() for line in p)]


# --- plain text ----------------------------------------------------------------------------------


def _text(prose: StoryProse) -> str:
    # Underlined headings, as plain text has long marked them; an action's lines all begin with
    # "> ", as the stored action's first does, so it stands apart from the narration.
    blocks = [f"{prose.title}\n{'=' * max(len(prose.title), 3)}"]
    for passage in prose.passages:
        if passage.kind is PassageKind.CHAPTER:
            blocks.append(f"{passage.text}\n{'-' * max(len(passage.text), 3)}")
        elif passage.kind is PassageKind.ACTION:
            paragraphs = _action_lines(passage)
            blocks.append("\n>\n".join("\n".join(f"> {line}" for line in p) for p in paragraphs))
        else:
            blocks += ["\n".join(p) for p in _paragraphs(passage.text)]
    return "\n\n".join(block for block in blocks if block) + "\n"


# --- Markdown ------------------------------------------------------------------------------------

# Escaped wherever they stand: what opens emphasis, code, links and images, raw HTML and
# autolinks (<…>), entities (&amp;), headings (a "#" that ends a heading would be dropped from
# it), tables and strikethrough (GitHub's), spoilers (||…||, Discord's) and math ($…$,
# GitHub's). Any ASCII punctuation may be escaped in CommonMark.
_MD_ANYWHERE = re.compile(r"([\\`*_\[\]<>&|~$#])")
# Autolinks GitHub makes without any markup: a scheme's "://", "www." and an e-mail's "@".
_MD_AUTOLINK = re.compile(r"(?i)(?<=[a-z])(:)(?=//)|(?<=\bwww)(\.)|(@)")
# Escaped only where a line begins: block quotes, lists, setext underlines and thematic breaks
# (">", "-", "+", "="), and ordered lists ("1." and "1)").
_MD_LINE_START = re.compile(r"^([>\-+=])|^(\d+)([.)])")


def escape_markdown(line: str) -> str:
    """One line of untrusted text as Markdown that renders as exactly that text."""
    # Leading whitespace is dropped: four spaces would make a code block of the line.
    line = _MD_ANYWHERE.sub(r"\\\1", line.lstrip())
    line = _MD_AUTOLINK.sub(lambda m: "\\" + m.group(0), line)
    return _MD_LINE_START.sub(
        lambda m: "\\" + m.group(1) if m.group(1) else m.group(2) + "\\" + m.group(3), line
    )


def _md_paragraph(lines: list[str]) -> str:
    # A backslash at a line's end is CommonMark's hard line break: the passage's lines stay
    # lines (a trailing escaped backslash is "\\", so it cannot be taken for one).
    return "\\\n".join(escape_markdown(line) for line in lines)


def _markdown(prose: StoryProse) -> str:
    blocks = [f"# {escape_markdown(prose.title)}"]
    for passage in prose.passages:
        if passage.kind is PassageKind.CHAPTER:
            blocks.append(f"## {escape_markdown(passage.text)}")
        elif passage.kind is PassageKind.ACTION:
            # The block quote's "> " is this file's own mark; the action's words are escaped.
            quoted = [
                "\n".join(f"> {line}" for line in _md_paragraph(p).split("\n"))
                for p in _action_lines(passage)
            ]
            blocks.append("\n>\n".join(quoted))
        else:
            blocks += [_md_paragraph(p) for p in _paragraphs(passage.text)]
    return "\n\n".join(block for block in blocks if block) + "\n"


# --- one web page --------------------------------------------------------------------------------

# Readable on a phone: the page is as wide as the screen (the viewport), the text a column of
# comfortable measure, long words wrap rather than scroll, and a dark screen gets dark colours.
_STYLE = """
:root { color-scheme: light dark; --ink: #222; --paper: #fbf8f1; --muted: #6b5d4a;
  --rule: #d8c9a8; }
@media (prefers-color-scheme: dark) {
  :root { --ink: #e8e2d6; --paper: #1b1a18; --muted: #b8a98f; --rule: #5a4d38; }
}
html { -webkit-text-size-adjust: 100%; text-size-adjust: 100%; }
body { margin: 0; background: var(--paper); color: var(--ink);
  font: 1.0625rem/1.6 Georgia, "Times New Roman", serif; }
main { max-width: 38rem; margin: 0 auto; padding: 1.25rem 1rem 3rem; }
h1 { font-size: 1.75rem; line-height: 1.25; margin: 0.5rem 0 1.5rem; }
h2 { font-size: 1.25rem; line-height: 1.3; margin: 2.5rem 0 1rem; color: var(--muted); }
p { margin: 0 0 1rem; }
h1, h2, p { overflow-wrap: anywhere; }
.action { margin: 0 0 1rem; padding: 0.1rem 0 0.1rem 0.9rem; border-left: 3px solid var(--rule);
  color: var(--muted); font-style: italic; }
.action p { margin: 0.25rem 0; }
""".strip()

# No scripts and nothing fetched: what the page is made of is all in it.
_POLICY = "default-src 'none'; style-src 'unsafe-inline'"


def _h(text: str) -> str:
    return html.escape(text, quote=True)


def _html_paragraph(lines: list[str]) -> str:
    return "<p>" + "<br>\n".join(_h(line) for line in lines) + "</p>"


def _html(prose: StoryProse) -> str:
    body = [f"<h1>{_h(prose.title)}</h1>"]
    for passage in prose.passages:
        if passage.kind is PassageKind.CHAPTER:
            body.append(f"<h2>{_h(passage.text)}</h2>")
        elif passage.kind is PassageKind.ACTION:
            # The stored "> " becomes the quote's rule; the words keep their own text.
            paragraphs = "\n".join(_html_paragraph(p) for p in _action_lines(passage))
            body.append(f'<blockquote class="action">\n{paragraphs}\n</blockquote>')
        else:
            body += [_html_paragraph(p) for p in _paragraphs(passage.text)]
    head = "\n".join(
        (
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">',
            '<meta name="referrer" content="no-referrer">',
            f"<title>{_h(prose.title)}</title>",
            f"<style>\n{_STYLE}\n</style>",
        )
    )
    main = "\n".join(body)
    return (
        f"<!DOCTYPE html>\n<html>\n<head>\n{head}\n</head>\n"
        f"<body>\n<main>\n{main}\n</main>\n</body>\n</html>\n"
    )
