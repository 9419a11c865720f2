"""What content a place allows: its rating, and the words no one may use there.

A rating at each level that owns one, the strictest applying (AI Dungeon's safety settings are
the model: Safe, Moderate, Mature):

- the operator's default and ceiling (``CAMPFIRE_CONTENT_RATING``, ``CAMPFIRE_CONTENT_CEILING``):
  nothing anywhere is rated above the ceiling;
- a server's own (``/server rating``, its managers), else the operator's default;
- the channel: Discord's developer policy keeps adult content to channels it marks
  age-restricted (the channel's ``nsfw`` flag; a thread is marked as its parent is, Discord's
  "Age-Restricted Content" help article and Channel: "nsfw"), so elsewhere a server adventure
  is at most moderate;
- in a DM, the player's own (``/profile rating``), else the operator's default;
- a scenario's (its file's ``content_rating``): it starts only where the place's rating is at
  least as high; an unrated scenario starts anywhere.

Banned words: the operator's list always applies, with the server's and the adventure's
(``/server banned``, ``/host banned``). An action holding one is refused before anything is
stored; a narration's are kept out by logit bias where the model allows it, and a narration
still holding one is written again once, then masked (``BannedWords.mask``;
``engine.turns.generate``). Matched case-insensitively on whole words, so "ass" bans "ass"
but not "class".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from sqlalchemy.ext.asyncio import AsyncSession

from engine.errors import InvalidInput
from engine.people.access.rules import Actor
from engine.storage.models import Adventure, Server, User


class Rating(IntEnum):
    SAFE = 0
    MODERATE = 1
    MATURE = 2

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str | None) -> Rating | None:
        """A rating by its name (``safe``, ``moderate``, ``mature``); AI Dungeon's own labels
        (Everyone, Teen, Mature) are read as the nearest. None: unrated or unknown."""
        if not text:
            return None
        name = text.strip().lower()
        return _NAMES.get(name)


_NAMES = {
    "safe": Rating.SAFE,
    "everyone": Rating.SAFE,
    "moderate": Rating.MODERATE,
    "teen": Rating.MODERATE,
    "mature": Rating.MATURE,
}

#: What the narrator is told each rating allows (the stable part of the prompt).
RATING_RULES = {
    Rating.SAFE: (
        "Content rating: safe. Keep the story suitable for all ages: no graphic violence or "
        "gore, no sexual content, no slurs or strong profanity, no detailed drug use. Danger "
        "and conflict are fine, told without graphic detail."
    ),
    Rating.MODERATE: (
        "Content rating: moderate. Violence and peril may be described, without lingering "
        "gore; no explicit sexual content; mild profanity only."
    ),
    Rating.MATURE: (
        "Content rating: mature. The players are adults in an age-restricted place: mature "
        "themes and graphic description are allowed where the story calls for them."
    ),
}

#: What replaces a banned word in a narration.
MASK = "▇▇▇"
#: The most words or phrases one list holds, and the longest one.
MAX_BANNED = 200
MAX_BANNED_CHARS = 60


@dataclass(frozen=True)
class ContentPolicy:
    """The operator's part: the default rating, the ceiling, the words banned everywhere."""

    default: Rating = Rating.MODERATE
    ceiling: Rating = Rating.MATURE
    banned: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlaceRating:
    """A place's rating and, when something held it down, what did (said to players)."""

    rating: Rating
    held_by: str = ""


def place_rating(
    policy: ContentPolicy,
    *,
    in_dm: bool,
    chosen: Rating | None,
    age_restricted: bool,
) -> PlaceRating:
    """The rating where an adventure runs: ``chosen`` is the server's rating (in a DM, the
    player's own), None for the operator's default; the strictest of the levels applies."""
    rating = policy.default if chosen is None else chosen
    held_by = ""
    if chosen is not None:
        held_by = (
            "your own rating (`/profile rating`)"
            if in_dm
            else "the server's rating (its managers change it with `/server rating`)"
        )
    else:
        held_by = "the bot operator's default rating"
    if rating > policy.ceiling:
        rating, held_by = policy.ceiling, "the bot operator's ceiling"
    if not in_dm and not age_restricted and rating > Rating.MODERATE:
        rating = Rating.MODERATE
        held_by = (
            "this channel, which Discord does not mark age-restricted (the channel's "
            "moderators change that in its settings)"
        )
    return PlaceRating(rating, held_by)


async def rating_for(session: AsyncSession, actor: Actor, policy: ContentPolicy) -> PlaceRating:
    """The rating where ``actor`` acts: their server's (in a DM, their own)."""
    if actor.server_id is None:
        user = await session.get(User, actor.user_id)
        chosen = Rating.parse(user.content_rating) if user is not None else None
        return place_rating(policy, in_dm=True, chosen=chosen, age_restricted=False)
    server = await session.get(Server, actor.server_id)
    chosen = Rating.parse(server.content_rating) if server is not None else None
    return place_rating(
        policy, in_dm=False, chosen=chosen, age_restricted=bool(actor.age_restricted)
    )


async def check_scenario_here(
    session: AsyncSession, rated: str | None, actor: Actor, policy: ContentPolicy
) -> None:
    """A scenario rated ``rated`` may start where ``actor`` acts (``check_scenario_rating``)."""
    check_scenario_rating(Rating.parse(rated), await rating_for(session, actor, policy))


def note_place(adventure: Adventure, actor: Actor) -> None:
    """Keep what the front end saw of the adventure's place (its age restriction) on the
    adventure, so every later turn is narrated under the place's rating as it is now."""
    if actor.age_restricted is not None and adventure.age_restricted != actor.age_restricted:
        adventure.age_restricted = actor.age_restricted


async def adventure_rating(
    session: AsyncSession, adventure: Adventure, policy: ContentPolicy
) -> Rating:
    """The rating an adventure is narrated under now."""
    if adventure.server_id is None:
        owner = None if adventure.owner_id is None else await session.get(User, adventure.owner_id)
        chosen = Rating.parse(owner.content_rating) if owner is not None else None
        return place_rating(policy, in_dm=True, chosen=chosen, age_restricted=False).rating
    server = await session.get(Server, adventure.server_id)
    chosen = Rating.parse(server.content_rating) if server is not None else None
    return place_rating(
        policy, in_dm=False, chosen=chosen, age_restricted=adventure.age_restricted
    ).rating


def check_scenario_rating(scenario: Rating | None, here: PlaceRating) -> None:
    """A scenario rated above the place's rating does not start there; the refusal says who
    can change what."""
    if scenario is None or scenario <= here.rating:
        return
    raise InvalidInput(
        f"This scenario is rated **{scenario.label}**, and adventures here are held to "
        f"**{here.rating.label}** by {here.held_by}. Choose another scenario, or play it where "
        f"{scenario.label} stories are allowed."
    )


def clean_banned(words: Iterable[str]) -> list[str]:
    """A list of banned words or phrases as given (comma-separated pieces), checked: trimmed,
    lower-cased, without repeats."""
    cleaned: list[str] = []
    for word in words:
        word = " ".join(word.split()).lower()
        if not word or word in cleaned:
            continue
        if len(word) > MAX_BANNED_CHARS:
            raise InvalidInput(
                f"A banned word or phrase is at most {MAX_BANNED_CHARS} characters; "
                f"“{word[:20]}…” is longer."
            )
        cleaned.append(word)
    if len(cleaned) > MAX_BANNED:
        raise InvalidInput(f"A list holds at most {MAX_BANNED} banned words or phrases.")
    return cleaned


@dataclass(frozen=True)
class BannedWords:
    """The words and phrases banned where an adventure runs (the operator's, the server's,
    the adventure's), matched on whole words whatever their case."""

    words: tuple[str, ...] = ()
    _pattern: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, *lists: Sequence[str]) -> BannedWords:
        words = tuple(dict.fromkeys(w.lower() for group in lists for w in group if w.strip()))
        if not words:
            return cls()
        # Longest first, so a phrase wins over a word inside it; spaces match any whitespace.
        # Bounded input (MAX_BANNED × MAX_BANNED_CHARS, escaped literals): Python's re runs an
        # alternation of literals without backtracking blow-ups.
        parts = sorted((re.escape(w).replace(r"\ ", r"\s+") for w in words), key=len)
        pattern = re.compile(r"(?<!\w)(?:" + "|".join(reversed(parts)) + r")(?!\w)", re.I)
        return cls(words, pattern)

    def __bool__(self) -> bool:
        return bool(self.words)

    def found(self, text: str) -> str | None:
        """The first banned word or phrase in ``text``, as written there."""
        if self._pattern is None:
            return None
        match = self._pattern.search(text)
        return match.group(0) if match else None

    def mask(self, text: str) -> str:
        return text if self._pattern is None else self._pattern.sub(MASK, text)

    @property
    def longest(self) -> int:
        return max((len(word) for word in self.words), default=0)

    def stream(self) -> MaskedStream:
        return MaskedStream(self)

    def check_action(self, text: str) -> None:
        """An action holding a banned word is refused, before anything is stored."""
        word = self.found(text)
        if word is not None:
            raise InvalidInput(
                f"Your action holds “{word}”, which is banned in this adventure, so it was not "
                "played. Nothing was stored; try other words."
            )


class MaskedStream:
    """A narration's pieces as they may be shown while it streams, no banned word among them.

    The tail that could still become a banned word or phrase waits for what follows; the final
    text, masked whole, replaces the stream at the end anyway (as the held-back state block's
    does, ``engine.story.world.apply.BlockHolder``)."""

    def __init__(self, banned: BannedWords) -> None:
        self._banned = banned
        self._hold = banned.longest + 1
        self._text = ""
        self._shown = ""

    def feed(self, piece: str) -> str:
        """What of the text so far may be shown now, beyond what already was."""
        pattern = self._banned._pattern
        if pattern is None:
            return piece
        self._text += piece
        cut = len(self._text) - self._hold
        while cut > 0 and not self._text[cut - 1].isspace():
            cut -= 1  # never cut a word in two
        # A banned phrase across the cut waits whole.
        for match in pattern.finditer(self._text, max(0, cut - self._hold)):
            if match.start() < cut < match.end():
                cut = match.start()
        if cut <= 0:
            return ""
        shown = self._banned.mask(self._text[:cut])
        if not shown.startswith(self._shown):
            return ""  # cannot happen with whole-word matches; the final text mends it
        new, self._shown = shown[len(self._shown) :], shown
        return new


async def banned_words(
    session: AsyncSession, adventure: Adventure, policy: ContentPolicy
) -> BannedWords:
    """Every list that applies to ``adventure``."""
    server = None if adventure.server_id is None else await session.get(Server, adventure.server_id)
    return BannedWords.of(
        policy.banned,
        server.banned_words if server is not None else (),
        adventure.banned_words,
    )
