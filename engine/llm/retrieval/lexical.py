"""Lexical search: which rows of a table share meaningful words with the recent story.

Written once for any table with text and full-text structures over it (memories today), which a
``FullTextTable`` describes. The database does the matching with its own stemmer: SQLite's FTS5
table with the porter tokenizer, PostgreSQL's ``english`` text search over a stored ``tsvector``
column (the matching is engine.storage.dialect's). Each query term is matched on its own, so we
learn which terms each row shares and how many rows each term matches (its rarity in this bank:
the rows in scope, such as one adventure's live memories).

One statement a search: the database matches the terms, counts the bank and each term's rows,
and scores and admits each row by the rules below, so only rows worth sending come back, each
as its id and the terms it shares (a bit a term: integer arithmetic, where a list of strings
built for every matching row cost a fifth of the statement), with how many rows each term
matches once on the first row. From those the score and admission are computed once more here,
exactly (the backends sum floats in their own ways), and that is what the caller sees and ranks
by.

A row's score is the sum of its shared terms' BM25 idf, ``ln(1 + (N - n + 0.5) / (n + 0.5))``
for a term ``n`` rows of a bank of ``N`` match.

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
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncSession

from engine.storage.dialect import FullTextTable, in_scope, spelling, term_hits_query

#: Most query terms looked up per turn; the newest text's terms come first.
MAX_TERMS = 32
#: The most terms a search can look up: a row's shared terms are the bits of a 64-bit integer.
MAX_TERM_BITS = 62
#: A term is rare when at most this share of the bank matches it (and at least one row).
RARE_SHARE = 0.05
#: Terms shorter than this are never meaningful enough to admit a row on their own.
MIN_TERM_CHARS = 3
#: Below this many rows, only names can be rare (5% of a small bank is one row).
MIN_BANK_FOR_RARITY = 20
#: An idf sum grows without bound; ranking squashes it to ``score / (score + SQUASH)``, in 0..1.
SQUASH = 2.0

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
        for word, key in _words(chunk):
            if key in seen:
                continue
            seen.add(key)
            terms.append(word)
            if len(terms) >= limit:
                return terms
    return terms


@lru_cache(maxsize=1024)
def _words(chunk: str) -> tuple[tuple[str, str], ...]:
    """The meaningful words of one text, in order, each with its key, the first of each key:
    a story's entries come back turn after turn in the query, so each is read once."""
    seen: set[str] = set()
    words: list[tuple[str, str]] = []
    for match in _WORD.finditer(chunk):
        word = match.group(0).lower().replace("’", "'")
        if word in STOP_WORDS:
            continue
        word = word.split("'", 1)[0]  # "mira's" → "mira"
        if len(word) < MIN_TERM_CHARS or word in STOP_WORDS:
            continue
        key = _key(word)
        if key not in seen:
            seen.add(key)
            words.append((word, key))
    return tuple(words)


_CAPITALISED = re.compile(r"[^\W\d_]+", re.UNICODE)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;>\"“”(\n]\s*)$")


def names_in(texts: Iterable[str]) -> set[str]:
    """Words written capitalised where a sentence does not start: names, lower-cased."""
    names: set[str] = set()
    for chunk in texts:
        names.update(_names(chunk))
    return names


@lru_cache(maxsize=1024)
def _names(chunk: str) -> frozenset[str]:
    """``names_in`` of one text, read once (as ``_words``)."""
    names = set()
    for match in _CAPITALISED.finditer(chunk):
        word = match.group(0)
        if not word[0].isupper() or word.lower() in STOP_WORDS:
            continue
        if _SENTENCE_START.search(chunk[: match.start()]) is None:
            names.add(word.lower())
    return frozenset(names)


def _key(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_TERM_CHARS:
            return word[: -len(suffix)]
    return word


@dataclass(frozen=True, slots=True)
class LexicalScore:
    terms: tuple[str, ...]  # the query terms this row shares, the rarest first
    score: float  # the sum of their inverse document frequencies (BM25's idf)
    admitted: bool
    rare: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LexicalSearch:
    """What one search found."""

    #: How many rows the scope holds (hidden ones left out): the bank the rarities are of.
    bank_size: int
    #: Admission and score of each row that came back and shares a term with the query.
    scores: dict[int, LexicalScore]
    #: The rows of the table's ``always_when`` column, shared terms or not, by id.
    always: tuple[int, ...] = ()


#: How far below the last place's score (as the database sums it) a row still comes back: the
#: database's float sums may differ from Python's in their last bits, so rows tied with the
#: last place come back too, and the caller ranks by the exact scores.
_TIE_MARGIN = 1e-9


async def search(
    session: AsyncSession,
    table: FullTextTable,
    texts: Sequence[str],
    scope: Mapping[str, object],
    *,
    best: int | None = None,
    max_terms: int = MAX_TERMS,
) -> LexicalSearch:
    """Admission and score of the rows in ``scope`` that share a term with ``texts`` (the
    newest text first), and the ``always`` rows.

    One statement: the database matches each term, counts the rows each matches, and scores
    and admits each row. ``best``: how many rows the caller takes at most, ``always`` rows
    first; then only the admitted rows that could fill the places left come back (the best
    scores, with whatever ties the last place; with the table's ``weight_column``, the best
    squashed scores times the row's weight). None: every row that shares a term.
    ``max_terms``: the most query terms looked up, the newest text's first.
    """
    if max_terms > MAX_TERM_BITS:
        raise ValueError(f"at most {MAX_TERM_BITS} query terms: a row's terms are bits of one int")
    terms = query_terms(texts, max_terms)
    names = names_in(texts)
    statement, params = _scores_query(session, table, terms, names, scope, best)
    rows = [tuple(row) for row in (await session.execute(_clause(statement), params)).all()]
    bank_size = int(rows[0][0])
    # On one row (the first the window numbered, whichever place it comes back in).
    counts = next((row[1] for row in rows if row[1]), "")
    scorer = _Scorer(terms, counts, bank_size, names)
    scores: dict[int, LexicalScore] = {}
    always: list[int] = []
    for _, _, row_id, is_always, shared in rows:
        if row_id is None:
            continue  # the bank's row when nothing came back
        if is_always:
            always.append(int(row_id))
        if shared:
            scores[int(row_id)] = scorer.score(int(shared))
    return LexicalSearch(bank_size, scores, tuple(sorted(always)))


@lru_cache(maxsize=256)
def _clause(statement: str) -> TextClause:
    """The search's statement as SQLAlchemy runs it, parsed once: it is the same text from turn
    to turn for the same number of terms, and only the values bound change."""
    return text(statement)


class _Scorer:
    """Rows' admission and score from what the database sends: the terms a row shares, a bit a
    term (bit 3: ``terms[3]``), and how many rows each term matches, ``"3:12,7:40"`` (term 3,
    which 12 rows match; term 7, which 40 do). Computed here, as the module's docstring says,
    so the score does not depend on the backend's float sums. A term's idf and rarity are the
    same on every row of one search: each is worked out once."""

    def __init__(
        self, terms: Sequence[str], counts: str, bank_size: int, names: AbstractSet[str]
    ) -> None:
        self.terms = terms
        rare_limit = max(1, int(bank_size * RARE_SHARE))
        big_bank = bank_size >= MIN_BANK_FOR_RARITY
        #: The terms the rows share, rarest first, then the newest text's first: (term, idf,
        #: rare). A row's terms are taken in this order, so none is sorted again.
        found: list[tuple[float, int, bool]] = []
        for pair in filter(None, counts.split(",")):
            term_text, count_text = pair.split(":")
            term, n = int(term_text), int(count_text)
            idf = math.log(1 + (bank_size - n + 0.5) / (n + 0.5))
            found.append((idf, term, n <= rare_limit and (big_bank or terms[term] in names)))
        found.sort(key=lambda item: (-item[0], item[1]))
        self._order = [(term, idf, rare) for idf, term, rare in found]

    def score(self, shared_bits: int) -> LexicalScore:
        shared = [item for item in self._order if shared_bits >> item[0] & 1]
        terms = self.terms
        return LexicalScore(
            terms=tuple(terms[term] for term, _, _ in shared),
            score=sum(idf for _, idf, _ in shared),
            admitted=len(shared) >= 2 or any(rare for _, _, rare in shared),
            rare=tuple(terms[term] for term, _, rare in shared if rare),
        )


def _scores_query(
    session: AsyncSession,
    table: FullTextTable,
    terms: Sequence[str],
    names: AbstractSet[str],
    scope: Mapping[str, object],
    best: int | None,
) -> tuple[str, dict[str, object]]:
    """The search's statement. Its rows: ``(bank, counts, id, always, shared)``: ``bank`` on
    every row, ``counts`` (each term's rows, ``"3:12,7:40"``) on the first, ``shared`` the bits
    of the row's terms; one row with a NULL id when nothing comes back.

    The admission rule and the idf are the module docstring's, in SQL, to choose which rows
    come back; ``_Scorer`` computes each returned row's score and admission again exactly.
    """
    sql = spelling(session)
    params: dict[str, object] = {}
    hits = term_hits_query(session, table, terms, scope, params)
    live = in_scope(table, scope, params)
    t, row_id = table.table, table.id_column
    # Numbers inlined are ours (term positions, constants), never a player's.
    # Which terms are names is bound, not written into the statement: the same statement text
    # from turn to turn, which the database prepares once (SQLite's statement cache).
    params["names"] = "," + "".join(f"{i}," for i, term in enumerate(terms) if term in names)
    is_name = "CAST(:names AS TEXT) LIKE '%,' || CAST(h.term AS TEXT) || ',%'"
    rare_limit = sql.greatest.format("1", sql.whole.format(f"b.n * {RARE_SHARE!r}"))
    idf = (
        f"ln(1 + ({sql.double.format('b.n - count(*)')} + 0.5) "
        f"/ ({sql.double.format('count(*)')} + 0.5))"
    )
    count = "CAST(d.term AS TEXT) || ':' || CAST(d.n AS TEXT)"
    kept = (
        f"SELECT t.{row_id} AS id FROM {t} AS t WHERE {live} AND t.{table.always_when}"
        if table.always_when
        else "SELECT 0 AS id WHERE 1 = 0"
    )
    others = "r.id NOT IN (SELECT id FROM kept)"
    admitted = "(r.shared >= 2 OR r.rare = 1)"
    if best is None:
        ranked, chosen = "", f"FROM scored AS r WHERE {others}"
    elif table.weight_column:
        # Ranked as the caller ranks: the squashed score times the row's own weight.
        value = f"(r.score / (r.score + {SQUASH!r})) * w.{table.weight_column}"
        ranked = (
            f", ranked AS (SELECT r.id, {value} AS score, "
            f"row_number() OVER (ORDER BY {value} DESC, r.id DESC) AS place "
            f"FROM scored AS r JOIN {t} AS w ON w.{row_id} = r.id "
            f"WHERE {admitted} AND {others}), "
            "cutoff AS (SELECT min(score) AS score FROM ranked "
            f"WHERE place <= {int(best)} - (SELECT count(*) FROM kept))"
        )
        chosen = (
            "FROM scored AS r JOIN ranked AS k ON k.id = r.id CROSS JOIN cutoff AS c "
            f"WHERE k.score >= c.score - {_TIE_MARGIN!r}"
        )
    else:
        ranked = (
            ", ranked AS (SELECT r.id, r.score, "
            "row_number() OVER (ORDER BY r.score DESC, r.id DESC) AS place "
            f"FROM scored AS r WHERE {admitted} AND {others}), "
            "cutoff AS (SELECT min(score) AS score FROM ranked "
            f"WHERE place <= {int(best)} - (SELECT count(*) FROM kept))"
        )
        chosen = (
            f"FROM scored AS r CROSS JOIN cutoff AS c WHERE {others} AND {admitted} "
            f"AND r.score >= c.score - {_TIE_MARGIN!r}"
        )
    statement = (
        f"WITH hits AS ({hits}), "
        f"bank AS (SELECT count(*) AS n FROM {t} AS t WHERE {live}), "
        f"kept AS ({kept}), "
        "df AS (SELECT h.term, count(*) AS n, "
        f"{idf} AS idf, "
        f"CASE WHEN count(*) <= {rare_limit} "
        f"AND (b.n >= {MIN_BANK_FOR_RARITY} OR {is_name}) THEN 1 ELSE 0 END AS rare "
        "FROM hits AS h CROSS JOIN bank AS b GROUP BY h.term, b.n), "
        # Each row's hits, looked up in the few terms' counts (on SQLite in that order: the
        # other way round it indexes every hit first).
        "scored AS (SELECT h.id, count(*) AS shared, sum(d.idf) AS score, "
        f"max(d.rare) AS rare, {sql.bits.format('h.term')} AS bits "
        f"FROM hits AS h {sql.join_in_order} df AS d ON d.term = h.term GROUP BY h.id)"
        f"{ranked} "
        "SELECT b.n AS bank, CASE WHEN row_number() OVER () = 1 THEN "
        f"(SELECT {sql.joined.format(count)} FROM df AS d) END AS counts, "
        "f.id, f.always, f.bits AS shared FROM bank AS b LEFT JOIN ("
        "SELECT k.id, 1 AS always, r.bits FROM kept AS k LEFT JOIN scored AS r "
        "ON r.id = k.id "
        f"UNION ALL SELECT r.id, 0 AS always, r.bits {chosen}"
        ") AS f ON 1 = 1"
    )
    return statement, params
