"""Story cards the story writes: ``/card generate`` asks the adventure's model for a card about
someone or something the story has met, in the style of the adventure's own cards.

AI Dungeon writes cards for its players (its story-card generator; the Auto-Cards script is
popular for the same reason). Here the player names the subject, or leaves it to the story: the
name the recent story mentions most that no card covers yet. The model is asked for one JSON
object (title, type, keys, entry); the answer is read leniently (a fenced block, the first
object in the text), bounded by the card's own limits, masked for the words banned where the
adventure runs, and returned as a draft for the player to look at. Nothing is stored here: the
player's confirmation adds it through ``StoryCards.add``, which checks the rights again.

It is the model's work, asked for by a player, so it is paid for: on the operator's model it
waits when the player's or the server's day is used, and what the call cost is counted against
both (``MeteredProvider``, as a chapter recap is); a rate limit bounds how often a player asks.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlmodel import col

from engine.errors import CampfireError, InvalidInput, ModelError
from engine.llm.providers.base import (
    ChatMessage,
    ChatProvider,
    GenerationParams,
    ReplyLimits,
    whole_text,
)
from engine.people.access.checks import check_may_steer
from engine.people.access.rules import adventure_here
from engine.people.content import BannedWords, ContentPolicy, banned_words
from engine.people.limits import Charge, Kind, TokenCapReached, next_midnight
from engine.platform.sanitise import sanitise
from engine.prompt.cards import parse_keys
from engine.storage.models import Adventure, AdventureCard, User
from engine.story.background_spend import MeteredProvider, charge_of
from engine.story.characters import party_sheets
from engine.story.line.read import line_window
from engine.story.steering.cards import (
    CARD_ENTRY_MAX,
    CARD_KEYS_MAX,
    CARD_TITLE_MAX,
    CARD_TYPE_MAX,
    DEFAULT_CARD_TYPE,
    CardDraft,
    check_card_room,
)

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from engine.llm.providers.resolver import ProviderResolver
    from engine.people.access.rules import Actor
    from engine.people.limits import UsageLimits
    from engine.storage.database import Database

#: What the model reads of the story: the newest entries, within this many tokens.
STORY_TOKENS = 1_500
STORY_ENTRIES = 24
#: The reply's ceiling: a card's entry is a paragraph, and the JSON around it is short.
CARD_REPLY_TOKENS = 350
CARD_REPLY_SECONDS = 90.0
#: How many of the adventure's cards are shown to the model as examples of its style.
STYLE_EXAMPLES = 2
STYLE_EXAMPLE_CHARS = 600

# A name: capitalised words ("Brother Tomas", "the Lantern Road" → "Lantern Road"), read from
# the story itself. The start of a sentence is no evidence of a name, so a word counts only
# where it does not open one (or where it also occurs mid-sentence elsewhere).
_NAME = re.compile(r"\b[A-Z][a-z'’]+(?:\s+(?:of\s+|the\s+)?[A-Z][a-z'’]+)*")
_SENTENCE_START = re.compile(r"(?:^|[.!?…]\s+|[\"“]\s*|\n\s*)$")
#: Capitalised words that are no one's name.
_NOT_NAMES = frozenset(
    "I You He She It We They The A An And But Or So Then When While As If Yet Your His Her "
    "Its Our Their This That These Those There Here What Who Why How Where Which Nothing "
    "Something Someone Everyone Nobody Somewhere Tonight Today Now Still Suddenly Perhaps Maybe "
    "Yes No Oh Ah Mr Mrs Ms Sir Lady Lord".split()
)

SYSTEM = (
    "You write story cards for an interactive story: short reference notes the narrator reads "
    "when a card's keys come up. Answer with one JSON object and nothing else: "
    '{"title": "...", "type": "...", "keys": ["...", "..."], "entry": "..."}. '
    "title: the subject's name. type: one word such as character, location, faction, item or "
    "custom. keys: two to five words or names that bring the subject up in the story. entry: "
    "two to four sentences of facts in the present tense, from what the story says, consistent "
    "with it, written like the example cards when there are any."
)


@dataclass(frozen=True, slots=True)
class CardProposal:
    """A card the model wrote, for the player to add or discard."""

    adventure_id: int
    subject: str
    draft: CardDraft
    #: The story's subject was chosen by Campfire (the player named none).
    chosen: bool


class CardWriter:
    """What the front end calls for ``/card generate``."""

    def __init__(
        self,
        db: Database,
        providers: ProviderResolver,
        *,
        max_cards: int,
        rate_limits: UsageLimits | None = None,
        content: ContentPolicy | None = None,
    ) -> None:
        self.db = db
        self.providers = providers
        self.max_cards = max_cards
        self.rate_limits = rate_limits
        self.content = content or ContentPolicy()

    async def propose(self, channel_id: int, actor: Actor, name: str | None) -> CardProposal:
        """A card about ``name`` (or the story's most mentioned uncovered name), written by the
        adventure's model; raises the refusal when the player may not add cards here, the
        adventure has no room, the subject is unclear, or the model's answer is no card."""
        subject = " ".join(sanitise(name or "").split())
        if len(subject) > CARD_TITLE_MAX:
            raise InvalidInput(
                f"A card's name can be at most {CARD_TITLE_MAX} characters; "
                f"this one has {len(subject):,}."
            )
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            await check_may_steer(session, adventure, actor)
            await check_card_room(session, adventure.id or 0, self.max_cards)
            story = await self._story(session, adventure)
        chosen = not subject
        if chosen:
            subject = story.subject or ""
            if not subject:
                raise InvalidInput(
                    "The story has not yet named anyone or anything without a card. "
                    "Name the card's subject: `/card generate name:`."
                )
        if subject.casefold() in story.existing:
            raise InvalidInput(
                f"This adventure already has a card called **{subject}**; `/card edit` changes it."
            )
        if self.rate_limits is not None:
            await self.rate_limits.use(Kind.CARD_WRITE, actor)
        provider: ChatProvider = self.providers.for_adventure(adventure)
        if self.rate_limits is not None and self.providers.is_operator_default(adventure):
            charge = Charge(actor.user_id, adventure.server_id)
            if not await self.rate_limits.background_allowed(charge):
                resets = next_midnight(self.rate_limits.clock())
                raise TokenCapReached("Today's tokens on Campfire's model are used.", resets)
            provider = MeteredProvider(provider, self.rate_limits, charge)
        return await self._write(provider, adventure, story, subject, chosen)

    async def propose_unasked(self, adventure_id: int, host: Actor) -> CardProposal | None:
        """A card about the story's most mentioned uncovered name, for ``host`` to look at
        (``engine.story.steering.card_proposals``: every few turns, nobody asked). None when
        there is nothing to propose or it may not be paid for now: the adventure ended, has no
        room, names no one new, the host's rate limit or the day's tokens are used. Charged as
        background work is (``charge_of``: the host and the server). Raises ``ModelError``
        when the model's answer is no card."""
        async with self.db.session() as session:
            adventure = await session.get(Adventure, adventure_id)
            if adventure is None or adventure.ended_at is not None or not adventure.head_node_id:
                return None
            try:
                await check_card_room(session, adventure_id, self.max_cards)
            except InvalidInput:
                return None
            story = await self._story(session, adventure)
        if story.subject is None:
            return None
        provider: ChatProvider = self.providers.for_adventure(adventure)
        if self.rate_limits is not None:
            try:
                await self.rate_limits.use(Kind.CARD_WRITE, host, asked=False)
            except CampfireError:
                return None
            if self.providers.is_operator_default(adventure):
                charge = charge_of(adventure)
                if not await self.rate_limits.background_allowed(charge):
                    return None
                provider = MeteredProvider(provider, self.rate_limits, charge)
        return await self._write(provider, adventure, story, story.subject, True)

    async def _story(self, session: AsyncSession, adventure: Adventure) -> _Story:
        """What the model reads, and the name it would be asked about if none is given."""
        assert adventure.id is not None and adventure.head_node_id is not None
        cards = list(
            await session.scalars(
                select(AdventureCard)
                .where(col(AdventureCard.adventure_id) == adventure.id)
                .order_by(col(AdventureCard.position), col(AdventureCard.id))
            )
        )
        nodes = await line_window(
            session, adventure.head_node_id, token_limit=STORY_TOKENS, max_entries=STORY_ENTRIES
        )
        banned = await banned_words(session, adventure, self.content)
        # The players' own characters are the party's, told to the narrator every turn:
        # never a card's subject the story chooses.
        party = [sheet.name for sheet in await party_sheets(session, adventure.id)]
        # Nor a player without a character, whose actions are written with their display name
        # ("> Ann waves."): the names of those who wrote the window's entries.
        authors = {node.author_id for node in nodes if node.author_id is not None}
        if authors:
            names = await session.scalars(select(col(User.name)).where(col(User.id).in_(authors)))
            party += [name for name in names if name]
        await self.providers.read(session, adventure)
        text = "\n\n".join(node.text.strip() for node in nodes if node.text.strip())
        return _Story(
            text,
            cards,
            banned,
            most_mentioned_uncovered(text, cards, besides=party),
            {card.title.casefold() for card in cards},
        )

    async def _write(
        self,
        provider: ChatProvider,
        adventure: Adventure,
        story: _Story,
        subject: str,
        chosen: bool,
    ) -> CardProposal:
        assert adventure.id is not None
        messages = _messages(subject, story.text, adventure.plot_essentials, story.cards)
        draft = read_card(await _ask(provider, messages), subject)
        banned = story.banned
        draft = CardDraft(
            title=banned.mask(draft.title),
            keys=banned.mask(draft.keys),
            entry=banned.mask(draft.entry),
            type=draft.type,
        )
        if draft.title.casefold() in story.existing:
            draft = CardDraft(subject, draft.keys, draft.entry, draft.type)
        return CardProposal(adventure.id, subject, draft, chosen)


@dataclass(frozen=True, slots=True)
class _Story:
    """What the model is shown of an adventure to write a card from."""

    text: str
    cards: list[AdventureCard]
    banned: BannedWords
    #: The name the story mentions most with no card (None: none yet).
    subject: str | None
    #: The adventure's card titles, casefolded.
    existing: set[str]


def most_mentioned_uncovered(
    story: str, cards: list[AdventureCard], *, besides: Sequence[str] = ()
) -> str | None:
    """The name the story mentions most (twice at least) that no card's title or keys cover,
    nor ``besides`` (the players' characters)."""
    covered: set[str] = {name.casefold() for name in besides}
    for card in cards:
        covered.add(card.title.casefold())
        covered.update(key.casefold().strip() for key in parse_keys(card.keys))
    counts: Counter[str] = Counter()
    mid_sentence: set[str] = set()
    for found in _NAME.finditer(story):
        name = found.group(0)
        words = name.split()
        while words and words[0] in _NOT_NAMES:
            words = words[1:]
        if not words:
            continue
        name = " ".join(words)
        counts[name] += 1
        # What comes just before is enough to tell a sentence's start (and keeps this linear).
        if not _SENTENCE_START.search(story[max(0, found.start() - 8) : found.start()]):
            mid_sentence.add(name)
    for name, count in counts.most_common():
        folded = name.casefold()
        if count < 2 or name not in mid_sentence:
            continue
        if folded in covered or any(part.casefold() in covered for part in name.split()):
            continue
        return name
    return None


def _messages(
    subject: str, story: str, essentials: str, cards: list[AdventureCard]
) -> list[ChatMessage]:
    examples = [
        json.dumps(
            {
                "title": card.title,
                "type": card.type,
                "keys": list(parse_keys(card.keys)),
                "entry": card.entry[:STYLE_EXAMPLE_CHARS],
            },
            ensure_ascii=False,
        )
        for card in cards
        if card.entry.strip()
    ][:STYLE_EXAMPLES]
    parts = []
    if essentials.strip():
        parts.append(f"What the story is about:\n{essentials.strip()[:2000]}")
    if examples:
        parts.append("Example cards of this story:\n" + "\n".join(examples))
    parts.append(f"The story so far (newest last):\n{story or '(it has just begun)'}")
    parts.append(f"Write the card for: {subject}")
    return [ChatMessage("system", SYSTEM), ChatMessage("user", "\n\n".join(parts))]


async def _ask(provider: ChatProvider, messages: list[ChatMessage]) -> str:
    params = GenerationParams(max_tokens=CARD_REPLY_TOKENS, temperature=0.6)
    return await whole_text(provider, messages, params, ReplyLimits(seconds=CARD_REPLY_SECONDS))


def read_card(reply: str, subject: str) -> CardDraft:
    """The card in the model's answer: the first JSON object in it (a fenced block or bare),
    its fields bounded by a card's limits. Raises ``ModelError`` (try again) when there is none
    or it has no entry."""
    found = _first_object(sanitise(reply))
    if found is None:
        raise ModelError("The model's answer was not a story card. Try again.")
    entry = _text(found.get("entry") or found.get("content") or found.get("description"))
    if not entry:
        raise ModelError("The model wrote a card with no entry. Try again.")
    title = _text(found.get("title") or found.get("name")) or subject
    raw_keys = found.get("keys") or found.get("key") or []
    keys = raw_keys if isinstance(raw_keys, list) else str(raw_keys).split(",")
    key_text = ",".join(_text(key)[:60] for key in keys if _text(key))
    # A card comes up by its own name at least (the model's title, which may spell the
    # subject its own way).
    if title.casefold() not in key_text.casefold():
        key_text = f"{title},{key_text}" if key_text else title
    kind = _text(found.get("type")).lower().split(" ")[0] if found.get("type") else ""
    return CardDraft(
        title=title[:CARD_TITLE_MAX],
        keys=_bounded_keys(key_text),
        entry=entry[:CARD_ENTRY_MAX],
        type=(kind or DEFAULT_CARD_TYPE)[:CARD_TYPE_MAX],
    )


def _first_object(text: str) -> dict[str, Any] | None:
    """The first JSON object the text holds (``raw_decode`` from each ``{``: bounded by the
    reply's own ceiling of a few hundred tokens)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _text(value: object) -> str:
    return " ".join(str(value).split()) if isinstance(value, str | int | float) else ""


def _bounded_keys(keys: str) -> str:
    kept: list[str] = []
    for key in keys.split(","):
        if len(",".join([*kept, key])) > CARD_KEYS_MAX:
            break
        kept.append(key)
    return ",".join(kept)
