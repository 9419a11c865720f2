"""Lexical retrieval: which memories share meaningful words with the recent story.

The database does the matching with its own stemmer: SQLite's FTS5 table with the porter
tokenizer, PostgreSQL's ``english`` text search over the stored ``search_vector`` column (both
built by migration 0006). Each query term
is matched on its own, in one ``UNION ALL`` statement, so we learn which terms each memory
shares and how many memories each term matches (its rarity in this bank).

Admission comes before ranking: a memory is admitted when it shares two distinct meaningful
terms with the query, or one rare term. A term is rare when at most 5% of the bank matches it
(at least one memory) and either the bank is large enough for that share to mean something
(20 memories) or the term is a name in the query (capitalised mid-sentence: "Mira", "Brindle"),
so that in a young bank one shared common word ("cross", "night") admits nothing. Function
words never count: they are on the stop list and never reach the database.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

#: Most query terms looked up per turn; the newest text's terms come first.
MAX_TERMS = 32
#: A term is rare when at most this share of the bank matches it (and at least one memory).
RARE_SHARE = 0.05
#: Terms shorter than this are never meaningful enough to admit a memory on their own.
MIN_TERM_CHARS = 3
#: Below this many memories, only names can be rare (5% of a small bank is one memory).
MIN_BANK_FOR_RARITY = 20

# Function words (and a few story-text fillers) that say nothing about what a memory is about.
STOP_WORDS = frozenset(
    """
    a about above after again against all almost also am an and any are aren't around as at
    back be became because become been before being below beneath beside between beyond both
    but by can cannot could couldn't did didn't do does doesn't doing don't down during each
    either else even ever every few for from further get gets got had hadn't has hasn't have
    haven't having he he'd he'll he's her here here's hers herself him himself his how how's
    however i i'd i'll i'm i've if in into is isn't it it's its itself just let let's like
    may me might mine more most much must mustn't my myself near neither never no nor not now
    of off on once one only onto or other others ought our ours ourselves out over own per
    quite rather really said same say says shall shan't she she'd she'll she's should
    shouldn't since so some still such than that that's the their theirs them themselves then
    there there's these they they'd they'll they're they've this those though through thus to
    too toward towards under until up upon us very was wasn't we we'd we'll we're we've were
    weren't what what's whatever when when's where where's whether which while who who's whom
    whose why why's will with within without won't would wouldn't yet you you'd you'll you're
    you've your yours yourself yourselves
    """.split()
)

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?", re.UNICODE)


def query_terms(texts: Iterable[str], limit: int = MAX_TERMS) -> list[str]:
    """The meaningful words of ``texts`` (newest text first), lower-cased, one per stem-ish key.

    The key only merges obvious inflections ("lantern"/"lanterns") so they count as one term;
    the matching itself is the database's stemmer.
    """
    seen: set[str] = set()
    terms: list[str] = []
    for chunk in texts:
        for match in _WORD.finditer(chunk):
            word = match.group(0).lower().replace("’", "'")
            if word in STOP_WORDS:
                continue
            word = word.split("'", 1)[0]  # "mira's" → "mira"
            if len(word) < MIN_TERM_CHARS or word in STOP_WORDS:
                continue
            key = _key(word)
            if key in seen:
                continue
            seen.add(key)
            terms.append(word)
            if len(terms) >= limit:
                return terms
    return terms


_CAPITALISED = re.compile(r"[^\W\d_]+", re.UNICODE)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;>\"“”(\n]\s*)$")


def names_in(texts: Iterable[str]) -> set[str]:
    """Words written capitalised where a sentence does not start: names, lower-cased."""
    names = set()
    for chunk in texts:
        for match in _CAPITALISED.finditer(chunk):
            word = match.group(0)
            if not word[0].isupper() or word.lower() in STOP_WORDS:
                continue
            if _SENTENCE_START.search(chunk[: match.start()]) is None:
                names.add(word.lower())
    return names


def _key(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_TERM_CHARS:
            return word[: -len(suffix)]
    return word


@dataclass(frozen=True, slots=True)
class LexicalScore:
    terms: tuple[str, ...]  # the query terms this memory shares
    score: float  # the sum of their inverse document frequencies (BM25's idf)
    admitted: bool
    rare: tuple[str, ...] = ()


async def term_matches(
    session: AsyncSession, adventure_id: int, terms: Sequence[str]
) -> dict[str, set[int]]:
    """For each term, the ids of the adventure's live memories that match it."""
    if not terms:
        return {}
    sqlite = session.get_bind().dialect.name == "sqlite"
    parts = []
    params: dict[str, object] = {"adventure": adventure_id}
    for i, term in enumerate(terms):
        params[f"q{i}"] = f'"{term}"' if sqlite else term
        # The term's number is inlined (it is ours, an int): a bound parameter in a select
        # list has no type PostgreSQL could infer.
        if sqlite:
            # The full-text index drives (one lookup per term); joined the other way round,
            # SQLite would run the MATCH once per memory of the adventure.
            parts.append(
                f"SELECT {i} AS term, m.id AS id FROM memories AS m "
                f"WHERE m.id IN (SELECT rowid FROM memories_fts WHERE memories_fts MATCH :q{i}) "
                f"AND m.adventure_id = :adventure AND NOT m.forgotten"
            )
        else:
            parts.append(
                f"SELECT {i} AS term, m.id AS id FROM memories AS m "
                f"WHERE m.adventure_id = :adventure AND NOT m.forgotten "
                f"AND m.search_vector @@ plainto_tsquery('english', :q{i})"
            )
    rows = await session.execute(text(" UNION ALL ".join(parts)), params)
    found: dict[str, set[int]] = defaultdict(set)
    for row in rows:
        found[terms[row.term]].add(row.id)
    return dict(found)


def score_lexical(
    matches: dict[str, set[int]], bank_size: int, names: set[str] = frozenset()
) -> dict[int, LexicalScore]:
    """Admission and score for every memory that matched at least one term; ``names`` are the
    query's names (``names_in``)."""
    if bank_size <= 0:
        return {}
    rare_limit = max(1, int(bank_size * RARE_SHARE))
    big_bank = bank_size >= MIN_BANK_FOR_RARITY
    idf = {
        term: math.log(1 + (bank_size - len(ids) + 0.5) / (len(ids) + 0.5))
        for term, ids in matches.items()
    }
    per_memory: dict[int, list[str]] = defaultdict(list)
    for term, ids in matches.items():
        for memory_id in ids:
            per_memory[memory_id].append(term)
    scores = {}
    for memory_id, terms in per_memory.items():
        terms.sort(key=lambda t: -idf[t])
        rare = tuple(t for t in terms if len(matches[t]) <= rare_limit and (big_bank or t in names))
        scores[memory_id] = LexicalScore(
            terms=tuple(terms),
            score=sum(idf[t] for t in terms),
            admitted=len(terms) >= 2 or bool(rare),
            rare=rare,
        )
    return scores
