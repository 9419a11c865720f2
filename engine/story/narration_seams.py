"""The seams a narration shows, sentence by sentence: where the model steps out of the story.

Seen from the embedded 135M model on the shipped *Lantern Road* (issue 39):

* it reads its standing instructions back as narration ("The player is the lamplighter of the
  Lantern Road, …" is the scenario's plot essentials word for word);
* it talks about the story to its writer ("I love how you've woven in the details…");
* it slips into "I", as the narrator or as the player's character, in a story told as "you".

Each sentence is read without its quoted words (speech, and ``*italic*`` thoughts or written
words), so ``"I will," she said.`` is the character's and stays. A sentence that echoes the
prompt or remarks on the story goes. A slip into the first person depends on the story's voice
(``engine.prompt.narrator.Voice``): in a story told as "you" a sentence where "I" speaks to
"you" is the narrator's and goes, and one where "I" acts is the player's character, put back
into the second person ("I shoulder my ladder." → "You shoulder your ladder."); in a story
told in the third person it goes; in a first-person story (the scenario asks for it, or the
story so far is told so) "I" is the story's own and nothing is done.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.prompt.inputs import ContextInputs
from engine.prompt.narrator import Voice
from engine.storage.models import Role

#: A sentence's end: terminal punctuation, the closing quotes and brackets after it, then a space.
_END = re.compile(r"[.!?…]+['\"”’)\]*_]*(?=\s|$)")
_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
#: The prompt's n-grams a sentence is compared by, and the share of its own that make it an
#: echo. Four words: "the lamplighter of the" is an echo; "the old road" is not.
ECHO_N = 4
ECHO_SHARE = 0.6
#: Shorter sentences are never taken for an echo ("The bell tolls." may well be in a prompt).
ECHO_MIN_WORDS = 5

#: The first person (the capital "I" alone: "i" is rarely the pronoun in prose). "mine" is left
#: out: "the old mine" is a place.
_FIRST = re.compile(r"(?<![\w'’])(?-i:I)(?!\w)|\b(?:me|my|myself)\b", re.IGNORECASE)
_YOU = re.compile(r"\byou(?:r|rs|rself)?\b", re.IGNORECASE)
#: The first person in the second, as AI Dungeon writes a player's "I" (engine.story.actions).
_SWAP = re.compile(
    r"(?<![\w'’])(?-i:I)(?: am\b| was\b|['’]m\b|(?!\w))|\b(?:me|my|myself)\b", re.IGNORECASE
)
_SWAPPED = {
    "i am": "you are",
    "i'm": "you're",
    "i’m": "you’re",
    "i was": "you were",
    "i": "you",
    "me": "you",
    "my": "your",
    "myself": "yourself",
}

#: A remark on the story, addressed to its writer rather than told in it.
_REMARK = re.compile(
    r"\b(?:i|we)\s+(?:really\s+|just\s+|absolutely\s+)?(?:love|like|enjoy|adore|appreciate)\s+"
    r"(?:how|the way|that)\s+you\b"
    r"|\byou(?:['’]ve| have)\s+(?:\w+ly\s+)?(?:woven|weaved|crafted|written|described|set up|"
    r"built|created|captured|included|added)\s+(?:in\s+)?(?:(?:the|this|a|an|some|such|your|"
    r"all the)\s+)?(?:\w+\s+){0,2}(?:details?|story|tale|scene|world|narrative|setting|atmosphere|"
    r"mood|mystery|plot|elements?|prompt|lore|tension)\b"
    r"|\bwhat an?\s+(?:great|wonderful|lovely|fantastic|amazing|beautiful|fun|delightful|"
    r"fascinating|intriguing|interesting|compelling|creative|captivating|brilliant)\s+"
    r"(?:story|start|beginning|idea|twist|prompt|setup|premise|concept|scenario)\b"
    r"|\b(?:great|nice|good|excellent|wonderful)\s+(?:job|writing|prompt|premise|setup)\b"
    r"|\b(?:thank you|thanks)\s+for\s+(?:sharing|reading|playing|letting me|the story|"
    r"this story|the prompt)\b"
    r"|\blet me know\b|\bfeel free to\b"
    r"|\b(?:i|we)\s+hope\s+you(?:['’]ll| will)?\s+(?:enjoy|like|love)\b"
    r"|\b(?:i|we)\s+can(?:['’]t|not)\s+wait\s+to\s+(?:see|hear|read|find out)\b"
    r"|\b(?:the|this)\s+story\s+so\s+far\b"
    r"|\b(?:i(?:['’]ll| will| can| shall)?|we|let['’]s|shall i)\s+continue\s+(?:the|this|our)\s+"
    r"story\b"
    r"|\bas\s+(?:an ai|a language model|the narrator|your narrator)\b",
    re.IGNORECASE,
)
#: "The player is …", "the player's character": the prompt's words for the player, never the
#: story's (a story names its characters, or says "you"). "The player lowers his flute" is
#: a musician's story, and stays.
_PLAYER = re.compile(
    r"^\W*the\s+(?:player|players|user)\s+(?:is|are|was|were|has|have|can|must|should|will)\b"
    r"|\bplayer(?:['’]s)?\s+character\b",
    re.IGNORECASE,
)
#: A first-person story: its narration says "I" this many times, and more often than "you".
FIRST_PERSON_STORY = 3


@dataclass(frozen=True, slots=True)
class Seams:
    """What the turn's prompt tells the tidying: its standing texts, which the narration must
    not read back, and the voice the story is told in."""

    standing: tuple[str, ...] = ()
    voice: Voice = Voice.SECOND


def seams_of(inputs: ContextInputs) -> Seams:
    """What a turn's inputs say of its seams: the standing instructions and plot essentials the
    narration must not read back (not the chapter's notes and nudges, which the narration is
    meant to tell), and the voice."""
    standing = (
        inputs.narrator_prompt,
        inputs.content_rule,
        inputs.ai_instructions,
        inputs.plot_essentials,
        inputs.authors_note,
        *(part.rule for part in inputs.block_parts),
    )
    narrations = [entry.text for entry in inputs.history if entry.role == Role.NARRATOR]
    return Seams(
        tuple(text for text in standing if text.strip()), story_voice(inputs.voice, narrations)
    )


def story_voice(asked: Voice, narrations: Iterable[str]) -> Voice:
    """The voice to hold the narration to: the one the prompt asks for, unless the story so far
    (its narrations) is told in the first person, as an imported story may be."""
    if asked is Voice.FIRST:
        return asked
    said_i = said_you = 0
    for text in narrations:
        bare = _unquoted(text)
        said_i += len(_FIRST.findall(bare))
        said_you += len(_YOU.findall(bare))
    return Voice.FIRST if said_i >= FIRST_PERSON_STORY and said_i > said_you else asked


def mend_seams(text: str, seams: Seams) -> str:
    """``text`` without its seams (see the module's note); unchanged where it shows none."""
    echo = _grams(seams.standing)
    return "\n".join(_mend_paragraph(line, echo, seams.voice) for line in text.split("\n"))


def _mend_paragraph(paragraph: str, echo: set[tuple[str, ...]], voice: Voice) -> str:
    inside, open_after = _quotes(paragraph)
    # Each sentence with the space before it, so one taken out takes its space along.
    bounds: list[tuple[int, int]] = []
    start = 0
    for end in _END.finditer(paragraph):
        if open_after[end.end() - 1]:
            continue  # a sentence's end inside a quote: the speech goes on
        bounds.append((start, end.end()))
        start = end.end()
    if start < len(paragraph):
        bounds.append((start, len(paragraph)))
    kept: list[str] = []
    changed = False
    for start, end in bounds:
        span = paragraph[start:end]
        mended = _mend_sentence(span, inside[start:end], echo, voice)
        changed = changed or mended != span
        if mended:
            kept.append(mended)
    if not changed:
        return paragraph
    return "".join(kept).strip()


def _mend_sentence(
    span: str, mask: Sequence[bool], echo: set[tuple[str, ...]], voice: Voice
) -> str:
    bare = "".join(" " if quoted else ch for ch, quoted in zip(span, mask, strict=True))
    if _REMARK.search(bare) or _PLAYER.search(bare) or _echoes(span, echo):
        return ""
    if voice is Voice.FIRST or not _FIRST.search(bare):
        return span
    if voice is Voice.THIRD or _YOU.search(bare):
        return ""
    return _in_second_person(span, mask)


def _in_second_person(span: str, mask: Sequence[bool]) -> str:
    """The sentence's own words (not its quoted ones) in the second person, as it began."""
    pieces: list[str] = []
    run_start = 0
    for i in range(1, len(span) + 1):
        if i == len(span) or mask[i] != mask[run_start]:
            piece = span[run_start:i]
            pieces.append(piece if mask[run_start] else _SWAP.sub(_swap, piece))
            run_start = i
    out = "".join(pieces)
    first = next((i for i, ch in enumerate(out) if ch.isalpha()), None)
    if first is not None and span[first:].lstrip()[:1].isupper():
        out = out[:first] + out[first].upper() + out[first + 1 :]
    return out


def _swap(found: re.Match[str]) -> str:
    return _SWAPPED[found[0].lower()]


def _grams(texts: Iterable[str]) -> set[tuple[str, ...]]:
    grams: set[tuple[str, ...]] = set()
    for text in texts:
        words = _WORD.findall(text.lower())
        grams.update(tuple(words[i : i + ECHO_N]) for i in range(len(words) - ECHO_N + 1))
    return grams


def _echoes(sentence: str, echo: set[tuple[str, ...]]) -> bool:
    """Whether most of the sentence is the prompt's own words, read back."""
    if not echo:
        return False
    words = _WORD.findall(sentence.lower())
    if len(words) < ECHO_MIN_WORDS:
        return False
    grams = [tuple(words[i : i + ECHO_N]) for i in range(len(words) - ECHO_N + 1)]
    return sum(gram in echo for gram in grams) >= ECHO_SHARE * len(grams)


def _unquoted(text: str) -> str:
    mask, _ = _quotes(text)
    return "".join(" " if quoted else ch for ch, quoted in zip(text, mask, strict=True))


def _quotes(text: str) -> tuple[list[bool], list[bool]]:
    """For each character, whether it is quoted: inside "…", “…”, '…', ‘…’ or *…* (the marks
    included), and whether a quote is open after it. A single quote opens only at a word's
    start, so "don't" and "players'" do not; a quote left open runs to the end of the
    paragraph, as speech that goes on does."""
    mask: list[bool] = []
    open_after: list[bool] = []
    closing = ""
    for i, ch in enumerate(text):
        before = text[i - 1] if i else " "
        after = text[i + 1] if i + 1 < len(text) else " "
        if closing:
            mask.append(True)
            if ch in closing and (ch not in "'’" or not after.isalpha()):
                closing = ""
            open_after.append(bool(closing))
            continue
        if ch == '"':
            closing = '"'
        elif ch == "“":
            closing = "”"
        elif ch == "*":
            closing = "*"
        elif ch in "'‘" and (before.isspace() or before in "([—–-") and not after.isspace():
            closing = "'’"
        mask.append(bool(closing))
        open_after.append(bool(closing))
    return mask, open_after
