"""The lexical search over a table that is not the memories: it needs only the table's
description (``FullTextTable``) and the full-text structures a migration would build."""

from __future__ import annotations

from sqlalchemy import text

from engine.llm.retrieval.lexical import search
from engine.storage.dialect import FullTextTable

NOTES = FullTextTable(
    table="notes",
    id_column="id",
    fts_table="notes_fts",
    tsvector_column="words",
    hidden_when=("archived",),
)

SQLITE_SCHEMA = [
    "CREATE TABLE notes (id INTEGER PRIMARY KEY, shelf INTEGER NOT NULL, text TEXT NOT NULL, "
    "archived BOOLEAN NOT NULL DEFAULT 0)",
    "CREATE VIRTUAL TABLE notes_fts USING fts5("
    "text, content='notes', content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER notes_fts_insert AFTER INSERT ON notes BEGIN "
    "INSERT INTO notes_fts(rowid, text) VALUES (new.id, new.text); END",
]
POSTGRES_SCHEMA = [
    "CREATE TABLE notes (id SERIAL PRIMARY KEY, shelf INTEGER NOT NULL, text TEXT NOT NULL, "
    "archived BOOLEAN NOT NULL DEFAULT false, "
    "words tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED)",
]

SHELF = [
    "Wolves circled the lantern maker's shop.",  # 1
    "The lantern maker sells whale oil.",  # 2
    "Wolves howled at the river.",  # 3
]


async def shelves(db) -> None:
    async with db.session() as session, session.begin():
        for statement in SQLITE_SCHEMA if db.is_sqlite else POSTGRES_SCHEMA:
            await session.execute(text(statement))
        rows = [(1, t, False) for t in SHELF]
        rows += [(1, "An archived lantern.", True), (2, "Another shelf's lantern.", False)]
        for shelf, note, archived in rows:
            await session.execute(
                text("INSERT INTO notes (shelf, text, archived) VALUES (:s, :t, :a)"),
                {"s": shelf, "t": note, "a": archived},
            )


async def test_each_term_finds_the_live_rows_in_scope_through_the_stemmer(db):
    await shelves(db)
    async with db.session() as session:
        found = await search(session, NOTES, ["lantern, circling wolves; a kettle"], {"shelf": 1})
    # The archived note and the other shelf's are never found, nor counted in the bank; a term
    # matching nothing is absent; "circling" finds "circled".
    assert found.bank_size == 3 and found.always == ()
    assert {row: set(score.terms) for row, score in found.scores.items()} == {
        1: {"lantern", "circling", "wolves"},
        2: {"lantern"},
        3: {"wolves"},
    }


async def test_admission_is_the_same_for_any_table(db):
    await shelves(db)
    async with db.session() as session:
        found = await search(session, NOTES, ["> You follow the wolves' circling."], {"shelf": 1})
    # Two shared terms admit the first note; the third shares one common term, "wolves".
    assert {row: score.admitted for row, score in found.scores.items()} == {1: True, 3: False}
    assert set(found.scores[1].terms) == {"wolves", "circling"}


async def test_with_best_only_the_admitted_rows_that_could_place_come_back(db):
    await shelves(db)
    query = ["> You ask the wolves about the lantern maker."]
    async with db.session() as session:
        everything = await search(session, NOTES, query, {"shelf": 1})
        best = await search(session, NOTES, query, {"shelf": 1}, best=1)
        none = await search(session, NOTES, query, {"shelf": 1}, best=0)
    # Three shared terms, two, one (not admitted): the best one alone comes back, as scored
    # when every row does.
    assert {row: len(score.terms) for row, score in everything.scores.items()} == {
        1: 3,
        2: 2,
        3: 1,
    }
    assert best.scores == {1: everything.scores[1]} and best.bank_size == 3
    assert none.scores == {} and none.bank_size == 3


# A table whose SQLite index holds each row's shelf name too, and matches the terms in the text
# alone: the names' own words ("shelf", "north") must not be taken for a term's.
SHELVED = FullTextTable(
    table="shelved",
    id_column="id",
    fts_table="shelved_fts",
    tsvector_column="words",
    fts_scope_column="shelf",
    fts_text_columns=("text",),
)
SHELVED_SQLITE = [
    "CREATE TABLE shelved (id INTEGER PRIMARY KEY, shelf TEXT NOT NULL, text TEXT NOT NULL)",
    "CREATE VIRTUAL TABLE shelved_fts USING fts5(text, shelf, "
    "content='shelved', content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER shelved_fts_insert AFTER INSERT ON shelved BEGIN "
    "INSERT INTO shelved_fts(rowid, text, shelf) VALUES (new.id, new.text, new.shelf); END",
]
SHELVED_POSTGRES = [
    "CREATE TABLE shelved (id SERIAL PRIMARY KEY, shelf TEXT NOT NULL, text TEXT NOT NULL, "
    "words tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED)",
]


async def test_a_scope_the_index_holds_keeps_to_its_values_and_never_matches_a_term(db):
    async with db.session() as session, session.begin():
        for statement in SHELVED_SQLITE if db.is_sqlite else SHELVED_POSTGRES:
            await session.execute(text(statement))
        for shelf, note in [
            ("shelf:1", "Wolves circled the lantern maker's shop."),  # 1
            ("shelf:12", "The lantern maker sells whale oil."),  # 2: "shelf:1" is not it
            ("north:1", "Wolves howled at the lantern by the river."),  # 3
            ("shelf:1", "A map of the north shelf of the river."),  # 4
        ]:
            await session.execute(
                text("INSERT INTO shelved (shelf, text) VALUES (:s, :t)"), {"s": shelf, "t": note}
            )
    query = ["> The lantern on the north shelf."]
    async with db.session() as session:
        one = await search(session, SHELVED, query, {"shelf": ("shelf:1",)})
        two = await search(session, SHELVED, query, {"shelf": ("shelf:1", "north:1")})
    # "north" and "shelf" are words of the names too: only the text's count.
    assert {row: set(score.terms) for row, score in one.scores.items()} == {
        1: {"lantern"},
        4: {"north", "shelf"},
    }
    assert one.bank_size == 2
    assert {row: set(score.terms) for row, score in two.scores.items()} == {
        1: {"lantern"},
        3: {"lantern"},
        4: {"north", "shelf"},
    }
    assert two.bank_size == 3
