"""Knowledge retrieval speed: one turn's retrieval over a 2,000-passage library.

Run by hand (it is not part of the normal test run)::

    .venv/bin/python -m tests.benchmarks.bench_knowledge [--chunks 2000] [--reps 200]
        [--url postgresql+asyncpg://...] [--other-libraries 10]

One database (a temporary SQLite file unless ``--url`` names another, which must be empty)
holds one adventure and a library of ``--chunks`` passages, imported through the library
itself (``KnowledgeLibrary.preview`` and ``save``: read, cut, written in one transaction per
file), spread over ten Markdown files of Canon, Reference and Inspiration, each passage a
section of about 120 tokens drawn from a 4,000-word vocabulary with the frequencies of English
prose's content words (``_zipf``) and a place name of its own. A turn's retrieval is what
the context engine asks of the knowledge retriever (``KnowledgeRetriever.retrieve``: the
adventure's libraries, the one lexical statement, the chosen passages with their sources and
texts), for a query of a new action and three story entries written in the library's words
and others, in a session that has read the adventure already, as the context engine's has when
its retrievers take their turns (the session's own start is the turn's, not knowledge's).
Lexical only, as without an embedding model. Repeated ``--reps`` times after a warm-up; p50
and p95 printed, and the CPU time's p50.

``--other-libraries N`` copies the library's passages into N other servers' libraries, as a
bot in many servers holds them: a turn's search should read its own libraries' passages,
whatever the table holds.

The last line::

    knowledge: retrieval p50 <ms> ms, p95 <ms> ms over 2,000 chunks (target p50 ≤ 10 ms: met)

A missed target is named on that line; the exit status is non-zero only on an error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select, text
from sqlmodel import SQLModel, col

from engine.library.knowledge.classes import KnowledgeClass
from engine.library.knowledge.library import KnowledgeLibrary, Target
from engine.library.knowledge.retrieval import KnowledgeRetriever, adventure_library
from engine.library.scenarios.shipped import seed_builtin_scenarios
from engine.library.scenarios.start import start_adventure
from engine.people.access.rules import Actor
from engine.storage.database import Database
from engine.storage.knowledge_models import KnowledgeChunk
from engine.storage.models import Adventure, Scenario

TARGET_P50_MS = 10.0
FILES = 10
VOCABULARY = 4000
SECTION_WORDS = 90
PLAYER = Actor(user_id=1, user_name="bench")
CHANNEL = 1


@dataclass(frozen=True, slots=True)
class Figures:
    chunks: int
    p50_ms: float
    p95_ms: float
    #: The process's CPU time (every thread: aiosqlite's runs the statements), which leaves
    #: out the waits for a CPU that a machine loaded by other work adds to the wall clock.
    cpu_p50_ms: float
    chosen: float  # passages chosen per turn, on average
    backend: str
    load: float  # the machine's load average over the last minute, as the run ended
    other_libraries: int = 0

    @property
    def others(self) -> str:
        if not self.other_libraries:
            return ""
        return f" (and {self.other_libraries} copies in other servers' libraries)"

    def line(self) -> str:
        verdict = "met" if self.p50_ms <= TARGET_P50_MS else "MISSED"
        return (
            f"knowledge: retrieval p50 {self.p50_ms:.2f} ms, p95 {self.p95_ms:.2f} ms over "
            f"{self.chunks:,} chunks{self.others} (target p50 ≤ {TARGET_P50_MS:g} ms: {verdict}); "
            f"CPU p50 {self.cpu_p50_ms:.2f} ms; {self.backend}, "
            f"{self.chosen:.1f} passages chosen a turn, load average {self.load:.1f} "
            f"on {os.cpu_count()} CPUs"
        )


def _words(rng: random.Random) -> list[str]:
    """A made-up vocabulary, letters only (the lexical search ignores digits)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen: set[str] = set()
    while len(seen) < VOCABULARY:
        seen.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 9))))
    return sorted(seen)


def _library_files(rng: random.Random, chunks: int, vocabulary: list[str]) -> list[str]:
    weights = _zipf(vocabulary)
    per_file = chunks // FILES
    files = []
    for f in range(FILES):
        sections = [f"# Volume {f}"]
        for _ in range(per_file):
            name = "".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(3))
            body = " ".join(rng.choices(vocabulary, weights, k=SECTION_WORDS))
            sections.append(f"## {name.title()}\n\n{name.title()} lies where {body}.")
        files.append("\n\n".join(sections))
    return files


def _zipf(vocabulary: list[str]) -> list[float]:
    """Word frequencies as in English prose once the function words are taken out (the search
    never sees those): Zipf's law past its first hundred ranks, so the commonest word here is
    about 0.3% of the words, as "said" or "time" are in fiction."""
    return [1 / (rank + 100) for rank in range(len(vocabulary))]


def _query(rng: random.Random, vocabulary: list[str]) -> list[str]:
    """A new action and three story entries, written in the library's words and others."""
    weights = _zipf(vocabulary)

    def entry(n: int) -> str:
        words = rng.choices(vocabulary, weights, k=n)
        return " ".join(words) + " and the lantern glows."

    return [f"> You ask about {entry(3)}", entry(40), entry(40), entry(40)]


async def copy_to_other_libraries(db: Database, libraries: int, adventure_id: int) -> None:
    """Every passage copied into ``libraries`` other servers' libraries (their sources are
    the originals': only the search's scope matters here)."""
    table = SQLModel.metadata.tables[KnowledgeChunk.__tablename__]
    columns = [column.name for column in table.columns if column.name != "id"]
    chosen = ", ".join(":library" if name == "library" else name for name in columns)
    async with db.transaction() as session:
        for n in range(libraries):
            await session.execute(
                text(
                    f"INSERT INTO knowledge_chunks ({', '.join(columns)}) "
                    f"SELECT {chosen} FROM knowledge_chunks WHERE library = :own"
                ),
                {"library": f"server:{424242 + n}", "own": adventure_library(adventure_id)},
            )


async def measure(
    chunks: int = 2000, reps: int = 200, url: str | None = None, other_libraries: int = 0
) -> Figures:
    rng = random.Random(21)
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}")
        try:
            await db.migrate()
            async with db.transaction() as session:
                await seed_builtin_scenarios(session)
                scenario = await session.scalar(
                    select(col(Scenario.id)).where(col(Scenario.builtin_key) == "lantern-road")
                )
                assert scenario is not None
                adventure = await start_adventure(session, scenario, channel_id=CHANNEL)
                assert adventure.id is not None
                adventure_id = adventure.id
            library = KnowledgeLibrary(db, max_bytes=10 * 1024 * 1024)
            vocabulary = _words(rng)
            kinds = list(KnowledgeClass)
            stored = 0
            for n, content in enumerate(_library_files(rng, chunks, vocabulary)):
                draft = await library.preview(
                    PLAYER,
                    CHANNEL,
                    content.encode(),
                    f"volume-{n}.md",
                    kinds[n % len(kinds)],
                    target=Target.ADVENTURE,
                )
                entry, _ = await library.save(PLAYER, draft)
                stored += entry.chunks
            if other_libraries:
                await copy_to_other_libraries(db, other_libraries, adventure_id)
            retriever = KnowledgeRetriever()
            queries = [_query(rng, vocabulary) for _ in range(reps + 10)]
            times, cpu, chosen = [], [], []
            for i, query in enumerate(queries):
                async with db.session() as session:
                    # As in a turn: the context engine's session has read the adventure
                    # already when its retrievers take their turns.
                    await session.get(Adventure, adventure_id)
                    started, cpu_started = time.perf_counter(), time.process_time()
                    found = await retriever.retrieve(session, adventure_id, query)
                    elapsed = time.perf_counter() - started
                    cpu_spent = time.process_time() - cpu_started
                if i >= 10:  # after the warm-up
                    times.append(elapsed)
                    cpu.append(cpu_spent)
                    chosen.append(len(found.chosen))
        finally:
            await db.dispose()
    times.sort()
    return Figures(
        chunks=stored,
        p50_ms=statistics.median(times) * 1000,
        p95_ms=times[int(len(times) * 0.95) - 1] * 1000,
        cpu_p50_ms=statistics.median(cpu) * 1000,
        chosen=statistics.mean(chosen),
        backend="PostgreSQL" if url and url.startswith("postgresql") else "SQLite",
        load=os.getloadavg()[0],
        other_libraries=other_libraries,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--url", help="an empty database to use instead of a temporary SQLite")
    parser.add_argument(
        "--other-libraries", type=int, default=0, help="copies of the library in other servers'"
    )
    args = parser.parse_args(argv)
    figures = asyncio.run(measure(args.chunks, args.reps, args.url, args.other_libraries))
    print(figures.line())
    sys.stdout.flush()


if __name__ == "__main__":
    main()
