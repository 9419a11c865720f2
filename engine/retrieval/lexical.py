"""Lexical search: which rows of a table share meaningful words with the recent story.

Written once for any table with text and full-text structures over it (memories today), which a
``FullTextTable`` describes. The database does the matching with its own stemmer: SQLite's FTS5
table with the porter tokenizer, PostgreSQL's ``english`` text search over a stored ``tsvector``
column (the statement is engine.storage.dialect's). Each query term is matched on its own, in
one statement, so we learn which terms each row shares and how many rows each term matches (its
rarity in this bank: the rows in scope, such as one adventure's live memories).

Admission comes before ranking: a row is admitted when it shares two distinct meaningful terms
with the query, or one rare term. A term is rare when at most 5% of the bank matches it (at
least one row) and either the bank is large enough for that share to mean something (20 rows)
or the term is a name in the query (capitalised mid-sentence: "Mira", "Brindle"), so that in a
young bank one shared common word ("cross", "night") admits nothing. Function words never
count: they are on the stop list and never reach the database.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from engine.storage.dialect import FullTextTable, term_matches_query

#: Most query terms looked up per turn; the newest text's terms come first.
MAX_TERMS = 32
#: A term is rare when at most this share of the bank matches it (and at least one row).
RARE_SHARE = 0.05
#: Terms shorter than this are never meaningful enough to admit a row on their own.
MIN_TERM_CHARS = 3
#: Below this many rows, only names can be rare (5% of a small bank is one row).
MIN_BANK_FOR_RARITY = 20

# Function words (and a few story-text fillers) that say nothing about what a text is about.
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
    terms: tuple[str, ...]  # the query terms this row shares
    score: float  # the sum of their inverse document frequencies (BM25's idf)
    admitted: bool
    rare: tuple[str, ...] = ()


async def search(
    session: AsyncSession,
    table: FullTextTable,
    texts: Sequence[str],
    bank_size: int,
    scope: Mapping[str, object],
) -> dict[int, LexicalScore]:
    """Admission and score for every row in ``scope`` that shares a term with ``texts`` (the
    newest text first); ``bank_size`` is how many rows the scope holds."""
    terms = query_terms(texts)
    return score_lexical(
        await term_matches(session, table, terms, scope), bank_size, names_in(texts)
    )


async def term_matches(
    session: AsyncSession,
    table: FullTextTable,
    terms: Sequence[str],
    scope: Mapping[str, object],
) -> dict[str, set[int]]:
    """For each term, the ids of the rows in ``scope`` that match it."""
    if not terms:
        return {}
    statement, params = term_matches_query(session, table, terms, scope)
    found: dict[str, set[int]] = {}
    for row in await session.execute(text(statement), params):
        if row.ids:
            found.setdefault(terms[int(row.term)], set()).update(map(int, row.ids.split(",")))
    return found


def score_lexical(
    matches: dict[str, set[int]], bank_size: int, names: AbstractSet[str] = frozenset()
) -> dict[int, LexicalScore]:
    """Admission and score for every row that matched at least one term; ``names`` are the
    query's names (``names_in``)."""
    if bank_size <= 0:
        return {}
    rare_limit = max(1, int(bank_size * RARE_SHARE))
    big_bank = bank_size >= MIN_BANK_FOR_RARITY
    idf = {
        term: math.log(1 + (bank_size - len(ids) + 0.5) / (len(ids) + 0.5))
        for term, ids in matches.items()
    }
    per_row: dict[int, list[str]] = defaultdict(list)
    for term, ids in matches.items():
        for row_id in ids:
            per_row[row_id].append(term)
    scores = {}
    for row_id, terms in per_row.items():
        terms.sort(key=lambda t: -idf[t])
        rare = tuple(t for t in terms if len(matches[t]) <= rare_limit and (big_bank or t in names))
        scores[row_id] = LexicalScore(
            terms=tuple(terms),
            score=sum(idf[t] for t in terms),
            admitted=len(terms) >= 2 or bool(rare),
            rare=rare,
        )
    return scores
