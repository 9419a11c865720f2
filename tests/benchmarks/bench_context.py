"""Context assembly against story length: time and bytes read from the database per turn.

Run by hand (it is not part of the normal test run)::

    .venv/bin/python -m tests.benchmarks.bench_context [--turns 50 200 500 2000]
        [--reps 60] [--url postgresql+asyncpg://...] [--other-memories 20000]

One database (a temporary SQLite file unless ``--url`` names another, which must be empty) holds
one adventure per story length, each with 100 story cards and 200 memories; a turn is a player
action and a narrator reply (two story entries), and narrator entries carry filled heavy columns
(prompt snapshot, reasoning, context report) so that reading any of them would show. For each
length, "context assembly" is what a turn does before it calls the model: open a session, load
the adventure, ``ContextEngine.gather`` (cards, the history window), ``ContextEngine.build``.
It is repeated ``--reps`` times after a warm-up (steady state: token counts of unchanged texts
are cached, as they are from turn to turn in a running bot) and the median and p95 are printed.

The adventure is left as play leaves it: the head and its branch's tip on the newest entry, so
a turn played on it extends the line instead of forking it (and cutting back the memories).

Read per turn: the result rows the database driver delivered, and the sum of their sizes, taken
in SQLAlchemy's ``after_cursor_execute`` hook from the adapted cursor, which has fetched every
row by then (aiosqlite and asyncpg alike): text as its UTF-8 length, binary as its length,
numbers and timestamps as 8 bytes, NULL as 0. Statements sent are counted too.

``--other-memories N`` puts N memories of another adventure in the table too (the bench's
memory texts again), as a bot with many adventures has: a turn's search should read its own
adventure's, whatever the table holds.

Two modes, each measured over every length, with the retrievers the bot configures (memories
and the knowledge library, which is empty here, as most adventures' is):

* lexical: no embedding model, memories and knowledge found by words only;
* embeddings: a deterministic in-process embedder (``FakeEmbedder``: hashed words, 1,536
  dimensions, named as a calibrated model so that semantic admission takes part), the 200
  memories carrying its vectors. The query's embedding costs no network time, so the figures
  are the database's and the engine's.

The last two lines sum it up (the longest story and the shortest, by default 2,000 and 50)::

    context: p50 <ms> ms at 2000 turns, t2000/t50 <ratio>, <kB> kB and <rows> rows per turn; …
    context (embeddings): p50 <ms> ms at 2000 turns, <kB> kB and <rows> rows per turn; …

Targets, lexical: p50 within 10 ms at 2,000 turns; t(2000)/t(50) <= 1.25; at most 60 kB and
600 rows read per turn; bytes at 2,000 turns <= 1.1 x the bytes at 200. With embeddings: p50
within 15 ms and at most 100 kB read per turn after the first (the first turn of a process may
read every vector). Missed targets are named on those lines; the exit status is non-zero only
on an error.

A last line measures what a provider that caches prompt prefixes can reuse (hosted models:
OpenAI, DeepSeek, OpenRouter and llama.cpp's server cache the longest prefix a prompt shares
with one they have seen). A story of 50 turns is played back one turn at a time on the default
(remote) engine, with the same cards and memories; for turns 11–50 the prompt as sent (the
system message, then the user message) is tokenized, and its share that equals the previous
turn's prompt token for token, from the start, is taken::

    prefix: remote layout, turns 11–50: share of each prompt equal to the previous prompt's
    prefix p50 <x> %, mean <y> %, min <z> %

Target: p50 >= 80 %; a miss is named on that line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import numpy as np
from sqlalchemy import event, func, insert, select, text, update
from sqlmodel import col

from engine.library.knowledge.retrieval import KnowledgeRetriever
from engine.library.scenarios.shipped import seed_builtin_scenarios
from engine.library.scenarios.start import start_adventure
from engine.llm.providers.embeddings import EmbeddingClient
from engine.llm.retrieval.semantic import to_bytes, vector_digest
from engine.prompt.tokens import count_tokens, encoding
from engine.storage.database import Database
from engine.storage.memory_models import Memory
from engine.storage.models import (
    ActionType,
    Adventure,
    AdventureCard,
    Branch,
    Role,
    Scenario,
    StoryNode,
    utcnow,
)
from engine.story.memory.retrieval import MemoryRetriever
from engine.turns.context import ContextEngine

STORY_LENGTHS = (50, 200, 500, 2000)
CARDS = 100
MEMORIES = 200
ACTION = "> You ask Mira about the lantern."

P50_TARGET_MS = 10.0
EMBEDDING_P50_TARGET_MS = 15.0
EMBEDDING_KB_TARGET = 100.0
#: The embedding model the bench's vectors are of: a calibrated name, so semantic admission
#: takes part, and its dimensions (1,536, as text-embedding-3-small's).
EMBEDDING_MODEL = "text-embedding-3-small"
EMBEDDING_DIM = 1536
TIME_RATIO_TARGET = 1.25
BYTES_RATIO_TARGET = 1.1
KB_TARGET = 60.0
ROWS_TARGET = 600
#: The prefix-reuse line: the turns it compares, and the share it aims for (p50).
PREFIX_TURNS = (11, 50)
PREFIX_TARGET = 0.80

_WORDS = (
    "the lantern gutters and shadows lean across wet stone while the river mutters below "
    "a door opens somewhere and cold air carries salt and smoke through the narrow hall "
    "you hear footsteps that stop when yours do and a voice hums a tune you almost know"
).split()


class FakeEmbedder:
    """A deterministic embedding model in-process: each word (lower-cased) adds ±1 to a
    dimension chosen by its CRC-32, so texts sharing words have close vectors. It stands where
    ``EmbeddingClient`` stands (``model``, ``embed``) and costs no network time."""

    def __init__(self, model: str = EMBEDDING_MODEL, dim: int = EMBEDDING_DIM) -> None:
        self.model = model
        self.dim = dim

    def vector(self, text: str) -> np.ndarray:
        out = np.zeros(self.dim, dtype=np.float32)
        for word in text.lower().split():
            crc = zlib.crc32(word.strip(".,;:!?>\"'").encode())
            out[crc % self.dim] += 1.0 if crc & 1 << 31 else -1.0
        return out

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.vector(text) for text in texts])


def names(n: int = CARDS) -> list[str]:
    return [f"Name{i:03d}" for i in range(n)]


def narration(rng: random.Random, words: int = 150) -> str:
    body = [rng.choice(_WORDS) for _ in range(words)]
    # A few card names per reply, so the scan window triggers a handful of cards.
    for _ in range(2):
        body[rng.randrange(words)] = rng.choice(names())
    return " ".join(body).capitalize() + "."


# --- seeding -----------------------------------------------------------------------------------


async def seed_adventure(
    db: Database,
    turns: int,
    *,
    channel_id: int,
    cards: int = CARDS,
    memories: int = MEMORIES,
    heavy: bool = True,
    seed: int = 0,
) -> int:
    """An adventure with ``turns`` turns (2 entries each), ``cards`` cards, ``memories`` rows."""
    rng = random.Random(seed)
    async with db.session() as session, session.begin():
        scenario_id = await session.scalar(
            select(Scenario.id).where(Scenario.builtin_key == "lantern-road")
        )
        adventure = await start_adventure(session, scenario_id, channel_id=channel_id)
        adventure_id, branch_id = adventure.id, adventure.active_branch_id
        head = await session.get(StoryNode, adventure.head_node_id)
        for i, name in enumerate(names(cards)):
            session.add(
                AdventureCard(
                    adventure_id=adventure_id,
                    position=i,
                    title=name,
                    keys=f"{name}, {name.lower()}'s kin",
                    entry=f"{name} is a figure of the river town. " + narration(rng, 40),
                    description="Notes for the card's author, never for the model. " * 10,
                    always_on=i < 2,
                )
            )
        embedder = FakeEmbedder()
        for i in range(memories):
            memory_text = f"Memory {i}: " + narration(rng, 30)
            vector = to_bytes(embedder.vector(memory_text))
            # Drawn as when the vectors were random bytes, so the texts after them (and the
            # choices tests/test_memory_retrieval_choice.py pins) stay the same.
            rng.randbytes(384 * 4)
            session.add(
                Memory(
                    adventure_id=adventure_id,
                    text=memory_text,
                    source_start=i * 2,
                    source_end=i * 2 + 1,
                    embedding=vector,
                    embedding_model=embedder.model,
                    embedding_dim=embedder.dim,
                    embedding_digest=vector_digest(vector),  # as the memory writer does
                )
            )
        await session.flush()

        next_id = (await session.scalar(select(func.max(StoryNode.id)))) + 1
        parent_id, index = head.id, head.index
        rows: list[dict[str, Any]] = []
        snapshot = zlib.compress(json.dumps({"messages": narration(rng, 2000)}).encode())
        report = {"sections": [{"key": "history", "reason": narration(rng, 200)}]}
        for _ in range(turns):
            for role in (Role.PLAYER, Role.NARRATOR):
                index += 1
                body = ACTION if role == Role.PLAYER else narration(rng)
                rows.append(
                    {
                        "id": next_id,
                        "adventure_id": adventure_id,
                        "parent_id": parent_id,
                        "index": index,
                        "role": role,
                        "action": ActionType.DO if role == Role.PLAYER else ActionType.CONTINUE,
                        "text": body,
                        "token_count": count_tokens(body),
                        "reasoning": narration(rng, 200)
                        if heavy and role == Role.NARRATOR
                        else None,
                        "prompt_snapshot": snapshot if heavy and role == Role.NARRATOR else None,
                        "context_report": report if heavy and role == Role.NARRATOR else None,
                        "created_at": utcnow(),
                    }
                )
                parent_id = next_id
                next_id += 1
        for start in range(0, len(rows), 500):
            await session.execute(insert(StoryNode), rows[start : start + 500])
        await session.execute(
            update(Adventure).where(Adventure.id == adventure_id).values(head_node_id=parent_id)
        )
        # The branch ends where the head is, as after play: a turn extends it, never forks.
        await session.execute(
            update(Branch).where(col(Branch.id) == branch_id).values(tip_node_id=parent_id)
        )
        if not db.is_sqlite:
            await session.execute(
                text(
                    "SELECT setval(pg_get_serial_sequence('story_nodes', 'id'), "
                    "(SELECT max(id) FROM story_nodes))"
                )
            )
    return adventure_id


# --- measuring ---------------------------------------------------------------------------------


def value_size(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, bool):
        return 1
    if isinstance(value, int | float | datetime | date):
        return 8
    if isinstance(value, Decimal):
        return len(str(value))
    return len(repr(value))


class ReadCounter:
    """Statements sent, and result rows delivered and their bytes, per engine."""

    def __init__(self, db: Database) -> None:
        self.statements = 0
        self.rows = 0
        self.bytes = 0
        self.sql: list[str] = []
        event.listen(db.engine.sync_engine, "after_cursor_execute", self._after)

    def reset(self) -> None:
        self.statements = 0
        self.rows = 0
        self.bytes = 0
        self.sql.clear()

    def _after(self, _conn, cursor, statement, _params, _context, _many) -> None:
        self.statements += 1
        self.sql.append(statement)
        rows = getattr(cursor, "_rows", None) or ()  # prefetched by the async adapters
        self.rows += len(rows)
        self.bytes += sum(value_size(v) for row in rows for v in row)


@dataclass
class Figures:
    turns: int
    entries: int
    p50_ms: float
    p95_ms: float
    first_ms: float
    bytes: int
    rows: int
    statements: int
    history_kept: int
    cards_included: int
    used_tokens: int

    def line(self) -> str:
        return (
            f"{self.turns:>5} turns ({self.entries:>4} entries) | assembly p50 "
            f"{self.p50_ms:6.2f} ms, p95 {self.p95_ms:6.2f} ms (first {self.first_ms:6.2f} ms) | "
            f"read {self.bytes:>7} bytes, {self.rows:>4} rows in {self.statements} statements | "
            f"history "
            f"{self.history_kept} entries, {self.cards_included} cards, {self.used_tokens} tokens"
        )


async def assemble(db: Database, engine: ContextEngine, adventure_id: int):
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        inputs = await engine.gather(session, adventure, ACTION)
    return engine.build(inputs)


def context_engine(embedder: FakeEmbedder | None = None) -> ContextEngine:
    """The engine as the bot makes it (bot.services): memories and knowledge, with the
    embedding model or without (lexical only)."""
    # The fake stands where the client stands: it has the client's model and embed().
    client = cast("EmbeddingClient | None", embedder)
    return ContextEngine(retrievers=[MemoryRetriever(client), KnowledgeRetriever(client)])


async def measure(
    db: Database,
    counter: ReadCounter,
    adventures: dict[int, int],
    reps: int,
    embedder: FakeEmbedder | None = None,
) -> list[Figures]:
    """Every length measured in turn, round after round, so drift on a busy machine (another
    process, a CPU frequency change) falls on all of them alike. ``embedder``: the embedding
    model the retrievers use (None: lexical only, as with none configured)."""
    engine = context_engine(embedder)
    first: dict[int, float] = {}
    for turns, adventure_id in adventures.items():
        started = time.perf_counter()
        await assemble(db, engine, adventure_id)
        first[turns] = (time.perf_counter() - started) * 1000
    for _ in range(3):
        for adventure_id in adventures.values():
            await assemble(db, engine, adventure_id)
    times: dict[int, list[float]] = {turns: [] for turns in adventures}
    read: dict[int, tuple[int, int, int]] = {}
    built = {}
    for _ in range(reps):
        for turns, adventure_id in adventures.items():
            counter.reset()
            started = time.perf_counter()
            built[turns] = await assemble(db, engine, adventure_id)
            times[turns].append((time.perf_counter() - started) * 1000)
            read[turns] = (counter.bytes, counter.rows, counter.statements)
    figures = []
    for turns in adventures:
        sections = {section.key: section for section in built[turns].report.sections}
        cards = [sections[key] for key in ("always_cards", "story_cards") if key in sections]
        figures.append(
            Figures(
                turns=turns,
                entries=2 * turns + 1,
                p50_ms=statistics.median(times[turns]),
                p95_ms=statistics.quantiles(times[turns], n=20)[-1],
                first_ms=first[turns],
                bytes=read[turns][0],
                rows=read[turns][1],
                statements=read[turns][2],
                history_kept=history_entries(built[turns]),
                cards_included=sum(item.included for section in cards for item in section.items),
                used_tokens=built[turns].report.used,
            )
        )
    return figures


def history_entries(built) -> int:
    """How many history entries went in (from the report's summary items)."""
    sections = {section.key: section for section in built.report.sections}
    return sum(
        int(item.label.split()[0]) if item.label[0].isdigit() else 1
        for item in sections["history"].items
        if item.included
    )


async def run(
    url: str, lengths: tuple[int, ...], reps: int, other_memories: int = 0
) -> tuple[list[Figures], list[Figures]]:
    """Both modes on one database: lexical, then with embeddings."""
    db = Database(url)
    try:
        await db.migrate()
        async with db.session() as session, session.begin():
            await seed_builtin_scenarios(session)
        adventures = {}
        for n, turns in enumerate(lengths):
            adventures[turns] = await seed_adventure(db, turns, channel_id=1000 + n, seed=n)
        if other_memories:
            await seed_other_memories(db, other_memories, like=next(iter(adventures.values())))
        await gather_statistics(db)
        counter = ReadCounter(db)
        lexical = await measure(db, counter, adventures, max(reps, 2))
        semantic = await measure(db, counter, adventures, max(reps, 2), FakeEmbedder())
        return lexical, semantic
    finally:
        await db.dispose()


async def seed_other_memories(db: Database, count: int, *, like: int) -> None:
    """``count`` memories of another adventure, their texts those of adventure ``like``."""
    other = await seed_adventure(db, 1, channel_id=999, cards=0, memories=0, heavy=False)
    async with db.session() as session, session.begin():
        texts = list(
            await session.scalars(select(col(Memory.text)).where(col(Memory.adventure_id) == like))
        )
        now = utcnow()
        rows = [
            {"adventure_id": other, "text": texts[i % len(texts)], "created_at": now}
            for i in range(count)
        ]
        for start in range(0, count, 1000):
            await session.execute(insert(Memory), rows[start : start + 1000])


async def gather_statistics(db: Database) -> None:
    """Let the database learn the seeded tables' sizes, as a running one has: PostgreSQL's
    autovacuum analyzes a table once enough of it changed, long before a story is 2,000 turns
    old; measured straight after a bulk load, its planner would still take the tables for
    empty. (SQLite plans without statistics unless asked, and Campfire never asks.)"""
    if db.is_sqlite:
        return
    async with db.engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.exec_driver_sql("ANALYZE")


def summary(figures: list[Figures]) -> str:
    """The one line that sums the run up: the longest story's p50 and what it read, its time
    against the shortest story's, the byte ratio against 200 turns, and any missed target."""
    by_turns = {f.turns: f for f in figures}
    short, long = by_turns[min(by_turns)], by_turns[max(by_turns)]
    ratio = long.p50_ms / short.p50_ms
    kb = long.bytes / 1000
    line = (
        f"context: p50 {long.p50_ms:.2f} ms at {long.turns} turns, "
        f"t{long.turns}/t{short.turns} {ratio:.2f}, {kb:.1f} kB and {long.rows} rows per turn"
    )
    missed = [
        what
        for what, met in (
            (f"p50 <= {P50_TARGET_MS:g} ms", long.p50_ms <= P50_TARGET_MS),
            (f"time ratio <= {TIME_RATIO_TARGET}", ratio <= TIME_RATIO_TARGET),
            (f"<= {KB_TARGET:g} kB", kb <= KB_TARGET),
            (f"<= {ROWS_TARGET} rows", long.rows <= ROWS_TARGET),
        )
        if not met
    ]
    if 200 in by_turns and long.turns != 200:
        bytes_ratio = long.bytes / by_turns[200].bytes
        line += f"; b{long.turns}/b200 {bytes_ratio:.3f}"
        if bytes_ratio > BYTES_RATIO_TARGET:
            missed.append(f"byte ratio <= {BYTES_RATIO_TARGET}")
    line += f"; {long.statements} statements; {MEMORIES} memories retrieved lexically"
    return line + (f"; MISSED: {', '.join(missed)}" if missed else "; all targets met")


# --- prefix reuse ------------------------------------------------------------------------------


def prompt_tokens(built) -> list[int]:
    """The prompt's tokens in the order it is sent: the system message, then the user's."""
    text = "\n\n".join(message.content for message in built.messages)
    return encoding().encode(text, disallowed_special=())


def shared_prefix(before: list[int], after: list[int]) -> int:
    """How many of ``after``'s first tokens equal ``before``'s, from the start."""
    n = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        n += 1
    return n


async def prefix_shares(
    db: Database, engine: ContextEngine | None = None, *, channel_id: int = 900
) -> list[float]:
    """For each of turns 11–50 of a story played one turn at a time, the share of its prompt
    that repeats the previous turn's prompt from the start (what a prefix cache can serve)."""
    first, last = PREFIX_TURNS
    engine = engine or ContextEngine(retrievers=[MemoryRetriever()])
    adventure_id = await seed_adventure(db, last, channel_id=channel_id, heavy=False, seed=7)
    async with db.session() as session:
        head = await session.scalar(
            select(col(Adventure.head_node_id)).where(col(Adventure.id) == adventure_id)
        )
        rows = (
            await session.execute(
                select(col(StoryNode.id), col(StoryNode.role))
                .where(col(StoryNode.adventure_id) == adventure_id)
                .order_by(col(StoryNode.index))
            )
        ).all()
    # The narrator's reply that ends each turn: turn t is played on the story up to turn t - 1.
    ends = [node_id for node_id, role in rows if role == Role.NARRATOR][-last:]
    previous: list[int] | None = None
    shares = []
    try:
        for turn in range(first - 1, last + 1):
            async with db.session() as session, session.begin():
                head_id = ends[turn - 2] if turn > 1 else rows[0][0]
                await session.execute(
                    update(Adventure)
                    .where(col(Adventure.id) == adventure_id)
                    .values(head_node_id=head_id)
                )
            tokens = prompt_tokens(await assemble(db, engine, adventure_id))
            if previous is not None:
                shares.append(shared_prefix(previous, tokens) / len(tokens))
            previous = tokens
    finally:
        async with db.session() as session, session.begin():
            await session.execute(
                update(Adventure).where(col(Adventure.id) == adventure_id).values(head_node_id=head)
            )
    return shares


def prefix_summary(shares: list[float]) -> str:
    first, last = PREFIX_TURNS
    p50, mean, low = statistics.median(shares), statistics.fmean(shares), min(shares)
    line = (
        f"prefix: remote layout, turns {first}–{last}: share of each prompt equal to the "
        f"previous prompt's prefix p50 {p50:.0%}, mean {mean:.0%}, min {low:.0%}"
    )
    if p50 < PREFIX_TARGET:
        return line + f"; MISSED: p50 >= {PREFIX_TARGET:.0%}"
    return line + "; target met"


async def run_prefix(url: str) -> list[float]:
    db = Database(url)
    try:
        await db.migrate()
        async with db.session() as session, session.begin():
            await seed_builtin_scenarios(session)
        return await prefix_shares(db)
    finally:
        await db.dispose()


def embedding_summary(figures: list[Figures]) -> str:
    """The line for the mode with an embedding model: the longest story's p50 and what a turn
    after the first read."""
    long = max(figures, key=lambda f: f.turns)
    kb = long.bytes / 1000
    line = (
        f"context (embeddings): p50 {long.p50_ms:.2f} ms at {long.turns} turns, "
        f"{kb:.1f} kB and {long.rows} rows per turn; {long.statements} statements; "
        f"{MEMORIES} memories of {EMBEDDING_DIM} dimensions"
    )
    missed = [
        what
        for what, met in (
            (f"p50 <= {EMBEDDING_P50_TARGET_MS:g} ms", long.p50_ms <= EMBEDDING_P50_TARGET_MS),
            (f"<= {EMBEDDING_KB_TARGET:g} kB", kb <= EMBEDDING_KB_TARGET),
        )
        if not met
    ]
    return line + (f"; MISSED: {', '.join(missed)}" if missed else "; all targets met")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=list(STORY_LENGTHS))
    parser.add_argument("--reps", type=int, default=60)
    parser.add_argument("--url", help="an empty database to use (default: a temporary SQLite)")
    parser.add_argument("--prefix-only", action="store_true", help="only the prefix-reuse line")
    parser.add_argument(
        "--other-memories",
        type=int,
        default=0,
        help="memories of another adventure in the table too",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="campfire-bench-") as tmp:
        prefix_url = f"sqlite+aiosqlite:///{Path(tmp) / 'prefix.db'}"
        if args.prefix_only:
            print(prefix_summary(asyncio.run(run_prefix(prefix_url))), flush=True)
            return 0
        url = args.url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        others = f" (and {args.other_memories} of another adventure)" if args.other_memories else ""
        print(
            f"context assembly on {url.split(':')[0]}: {CARDS} cards, {MEMORIES} memories{others}, "
            f"{args.reps} reps each, {ContextEngine().budget}-token budget",
            flush=True,
        )
        lexical, semantic = asyncio.run(run(url, tuple(args.turns), args.reps, args.other_memories))
        shares = asyncio.run(run_prefix(prefix_url))
    print("lexical (no embedding model):")
    for line in [f.line() for f in lexical]:
        print(f"  {line}", flush=True)
    print(f"with embeddings ({EMBEDDING_MODEL}, {EMBEDDING_DIM} dimensions, in-process):")
    for line in [f.line() for f in semantic]:
        print(f"  {line}", flush=True)
    print(summary(lexical), flush=True)
    print(embedding_summary(semantic), flush=True)
    print(prefix_summary(shares), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
