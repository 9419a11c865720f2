"""Tidying the narrator's prose before it is stored: what a model writes that is not story.

Small models, and some large ones, answer a story prompt with more than the story: they echo
the player's action as their first line ("> You look around."), go on to write the player's next
action themselves (a later line starting "> "), talk about the task ("Here it goes:"), mark up
the prose as a document (``# `` headings), read back a part of the prompt (the author's note
line, a section's heading, or only the note's opening bracket) or leave a stop tag
(``<MORE>``, ``</s>``), and when the length limit stops them they end mid-sentence. Each
rule below removes one of those and nothing else; prose that breaks none is kept byte for
byte. Within the lines, the seams where the narrator steps out of the story (an echo of the
prompt, a remark on the story, a slip into "I") are mended sentence by sentence
(``engine.story.narration_seams``), by what the turn's prompt said (``Seams``). A reply that
would be left empty is kept as written (the turn then shows what the model
said rather than nothing).
"""

from __future__ import annotations

import re

from engine.story.narration_seams import Seams, mend_seams

#: Terminal punctuation (a dash that breaks off speech included), with the closing quotes and
#: brackets a sentence may end in.
_SENTENCE_END = re.compile(r"(?:[.!?…]|—(?=['\"”’]))['\"”’)\]*_]*")
_ENDS_WHOLE = re.compile(_SENTENCE_END.pattern + r"\s*$")
#: Stop tags and special tokens a model may leave in its text.
_TAGS = re.compile(
    r"<\s*/?\s*(?:more|end|eos|s|stop)\s*>|<\|[a-z_]+\|>|\[(?:end|more)\]", re.IGNORECASE
)
#: A line that talks about the writing rather than tells the story.
_META = re.compile(
    r"^\s*(?:"
    r"here(?:'s| is| it goes| goes| we go)\b.*:?\s*$"
    r"|(?:the )?(?:player|user)'?s? (?:response|action|input|turn)\b.*$"
    r"|(?:sure|okay|ok|certainly|of course)[,!.]\s.*(?:continu|story|here)\w*.*$"
    r"|as an ai\b.*$"
    r"|\((?:continued|to be continued)\)\s*$"
    # The prompt's own parts read back: the author's note line, a section's heading.
    r"|\[author'?s note:.*\]\s*$"
    r"|(?:recent story|world lore|memories|story summary|world state|knowledge|party):\s*$"
    r")",
    re.IGNORECASE,
)
_HEADING = re.compile(r"^#{1,6}\s+", re.MULTILINE)


def tidy_narration(text: str, seams: Seams | None = None) -> str:
    """``text`` with what is not story removed (see the module's note); ``seams``: what the
    turn's prompt said (its standing texts, the story's voice), a solo story's by default."""
    tidied = _TAGS.sub("", text)
    lines = tidied.split("\n")
    # An echo of the action, or any player's line, before the story starts.
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith(">")):
        lines.pop(0)
    # The model writing the players' next action: the story stops there.
    for at, line in enumerate(lines):
        if at > 0 and line.lstrip().startswith("> "):
            lines = lines[:at]
            break
    lines = [line for line in lines if not _META.match(line)]
    tidied = _HEADING.sub("", "\n".join(lines)).strip()
    tidied = mend_seams(tidied, seams or Seams())
    if tidied.startswith("[") and "]" not in tidied:
        # A bracket opened and never closed: the start of a note that was not written.
        tidied = tidied[1:].lstrip()
    tidied = re.sub(r"\n{3,}", "\n\n", tidied)
    tidied = _whole_sentences(tidied)
    return tidied if tidied.strip() else text


def _whole_sentences(text: str) -> str:
    """A reply stopped mid-sentence, cut back to its last full sentence (when it has one)."""
    if not text or _ENDS_WHOLE.search(text):
        return text
    ends = list(_SENTENCE_END.finditer(text))
    return text[: ends[-1].end()].rstrip() if ends else text
