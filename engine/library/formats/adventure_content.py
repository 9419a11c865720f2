"""An imported adventure under the content rules of the place it will run in.

An imported story goes through the same checks as the model's words (``engine.people.content``):
the words banned where it will run (the operator's, the importing server's, and the file's own
``banned_words`` setting, which becomes the adventure's) are masked in its story text as they
are in a narration, before anything is stored. The passages are also given, newest first, to
whoever checks them further (the operator's moderation check, ``engine.play.imports``; the
check lives above this floor, with the turns it was made for).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlalchemy.ext.asyncio import AsyncSession

from engine.library.formats.adventure import ParsedAdventure
from engine.people.access.rules import Actor
from engine.people.content import BannedWords, ContentPolicy
from engine.prompt.tokens import tokens_in
from engine.storage.models import Role, Server

#: The story cards' fields players and the model read.
_CARD_FIELDS = ("title", "keys", "entry", "description")


async def banned_here(
    session: AsyncSession, actor: Actor, parsed: ParsedAdventure, policy: ContentPolicy
) -> BannedWords:
    """The words banned where ``actor`` imports ``parsed``: the lists ``banned_words`` will
    gather for the adventure once it is stored (``engine.people.content``)."""
    server = None if actor.server_id is None else await session.get(Server, actor.server_id)
    return BannedWords.of(
        policy.banned,
        server.banned_words if server is not None else (),
        parsed.fields.get("banned_words") or (),
    )


def masked_story(parsed: ParsedAdventure, banned: BannedWords) -> tuple[ParsedAdventure, int]:
    """``parsed`` with the banned words masked in its story text (every node and take, the
    memories, the story summary, the story cards, the chapter recaps), and how many passages
    had one. The parsed file itself is left as it was: a refused or failed write may be tried
    again."""
    if not banned:
        return parsed, 0
    count = 0

    def mask(text: str) -> str:
        nonlocal count
        clean = banned.mask(text)
        count += clean != text
        return clean

    nodes = []
    for row in parsed.nodes:
        text = mask(row["text"])
        # The history window is sized by the stored count: the masked text's.
        nodes.append(
            row if text == row["text"] else {**row, "text": text, "token_count": tokens_in(text)}
        )
    takes = [{**row, "text": mask(row["text"])} for row in parsed.takes]
    memories = [{**row, "text": mask(row["text"])} for row in parsed.memories]
    # The model wrote the recaps as it wrote the story; /chapters shows them to the players.
    recaps = [
        {**row, "text": mask(row["text"]), "epilogue": mask(row["epilogue"])}
        for row in parsed.recaps
    ]
    fields = {**parsed.fields, "story_summary": mask(parsed.fields.get("story_summary") or "")}
    cards = [
        replace(card, **{name: mask(getattr(card, name)) for name in _CARD_FIELDS})
        for card in parsed.steering.cards
    ]
    steering = replace(parsed.steering, cards=cards)
    masked = replace(
        parsed,
        fields=fields,
        steering=steering,
        nodes=nodes,
        takes=takes,
        memories=memories,
        recaps=recaps,
    )
    return masked, count


@dataclass(frozen=True, slots=True)
class Passage:
    """A story text of an imported adventure, with the turn players would call it by: the
    narrator's replies counted along its own line (0: the opening), an action counted with the
    reply it asks for, as Insights counts turns."""

    turn: int
    text: str


def newest_passages(parsed: ParsedAdventure) -> list[Passage]:
    """Every node's text and every other take's, newest first: the line the story stands on
    from its head back to the opening (what the model reads first), then the rest of the tree
    from the end of the file (nodes are listed parents first), then the other takes. Empty
    texts and takes that repeat their node's text are left out."""
    nodes = parsed.nodes
    turns: list[int] = []
    replies: list[int] = []  # narrator replies on each node's line, the opening not counted
    for row in nodes:
        parent = row["parent"]
        before = replies[parent] if parent is not None else 0
        narrator = row["role"] == Role.NARRATOR and parent is not None
        replies.append(before + narrator)
        # A reply is the next turn on its line; an action belongs to the reply it asks for.
        turns.append(0 if parent is None else before + 1)
    order: list[int] = []
    seen: set[int] = set()
    at: int | None = parsed.head
    while at is not None:
        order.append(at)
        seen.add(at)
        at = nodes[at]["parent"]
    order.extend(i for i in reversed(range(len(nodes))) if i not in seen)
    out = [Passage(turns[i], nodes[i]["text"]) for i in order if nodes[i]["text"].strip()]
    out.extend(
        Passage(turns[take["node"]], take["text"])
        for take in reversed(parsed.takes)
        if take["text"].strip() and take["text"] != nodes[take["node"]]["text"]
    )
    return out
