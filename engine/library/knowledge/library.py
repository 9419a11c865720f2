"""The knowledge library: importing setting files, listing, showing, removing them and
changing their options.

A source belongs to one library: the server's (in a server), the player's own (in a DM: their
DM adventures read it), or one adventure's (the one running here). Who may import, remove and
change options is ``engine.people.access.check_may_manage_knowledge``; anyone in the place may list
sources and read their text, but no command shows a narrator-only file's
(``engine.people.access.may_read_knowledge``).

An import is read, checked and cut into passages before anything is written (``preview``);
Confirm writes the source and its passages in one transaction (``save``), the full-text index
kept in step by the database's own triggers or generated column. The same file (by its sha256)
or the same name in one library is refused, or replaces the old one when asked to.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import CampfireError, InvalidInput, NotFound
from engine.library.knowledge.chunking import Chunk, chunk_text, is_markdown
from engine.library.knowledge.classes import RULES, KnowledgeClass
from engine.library.knowledge.retrieval import adventure_library, own_library, server_library
from engine.library.reading.errors import ImportRejected
from engine.llm.providers.embeddings import EmbeddingClient
from engine.llm.retrieval.semantic import to_bytes
from engine.people.access.checks import check_may_manage_knowledge
from engine.people.access.rules import active_adventure, may_read_knowledge
from engine.people.accounts import touch_server, touch_user
from engine.people.limits import Kind, UsageLimits
from engine.platform.sanitise import row_id, sanitise
from engine.storage.knowledge_models import KnowledgeChunk, KnowledgeSource

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
    from engine.storage.database import Database

#: The files the library takes, by their name's ending.
EXTENSIONS = (".txt", ".md", ".markdown")
#: Sources one library may hold.
MAX_SOURCES = 100
#: Passages embedded per call to the embedding server.
EMBED_BATCH = 64
TITLE_MAX = 200


class Target:
    """Where an import goes."""

    LIBRARY = "library"
    ADVENTURE = "adventure"


@dataclass(frozen=True, slots=True)
class KnowledgeDraft:
    """A file read and cut, not yet written."""

    title: str
    kind: KnowledgeClass
    text: str
    content_hash: str
    chunks: tuple[Chunk, ...]
    library: str
    #: Where it goes, as people read it ("this server's library").
    where: str
    server_id: int | None
    owner_id: int | None
    adventure_id: int | None
    always_include: bool
    narrator_only: bool
    #: Confirm replaces the source it names (same file, or same name) instead of refusing.
    replaces: str | None
    channel_id: int

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.chunks)


@dataclass(frozen=True, slots=True)
class SourceEntry:
    id: int
    title: str
    kind: KnowledgeClass
    always_include: bool
    narrator_only: bool
    chunks: int
    tokens: int
    #: "server", "own" or "adventure".
    scope: str

    @property
    def flags(self) -> str:
        flags = [RULES[self.kind].name]
        if self.always_include:
            flags.append("always included")
        if self.narrator_only:
            flags.append("narrator only")
        return ", ".join(flags)


@dataclass(frozen=True, slots=True)
class SourceDetails:
    entry: SourceEntry
    #: The headings of its passages, in order ("" for a passage under none); none shown for a
    #: narrator-only source.
    headings: tuple[str, ...]
    #: Its text, or None where no command may show it (narrator only).
    text: str | None


class KnowledgeLibrary:
    def __init__(
        self,
        db: Database,
        *,
        max_bytes: int,
        embedder: EmbeddingClient | None = None,
        rate_limits: UsageLimits | None = None,
    ) -> None:
        self.db = db
        self.max_bytes = max_bytes
        self.embedder = embedder
        self.rate_limits = rate_limits

    # --- import ----------------------------------------------------------------------------

    async def check_may_import(self, actor: Actor) -> None:
        async with self.db.session() as session:
            await check_may_manage_knowledge(session, actor)

    def check_file(self, filename: str, size: int) -> None:
        """Refuse a file by its name and announced size, before downloading it."""
        if not filename.lower().endswith(EXTENSIONS):
            raise ImportRejected("The knowledge library takes .txt and .md files.")
        if size > self.max_bytes:
            raise ImportRejected(
                f"The file is {size / 1024:,.0f} KiB; the largest accepted is "
                f"{self.max_bytes / 1024:,.0f} KiB."
            )

    async def preview(
        self,
        actor: Actor,
        channel_id: int,
        data: bytes,
        filename: str,
        kind: KnowledgeClass,
        *,
        target: str = Target.LIBRARY,
        always_include: bool = False,
        narrator_only: bool = False,
        replace: bool = False,
    ) -> KnowledgeDraft:
        """Read, check and cut a file (nothing is written); raises a player-facing error."""
        self.check_file(filename, len(data))
        if always_include and kind is not KnowledgeClass.CANON:
            raise InvalidInput("Only Canon can be always included: the rest must earn its place.")
        try:
            text = sanitise(data.decode("utf-8-sig")).strip()
        except UnicodeDecodeError:
            raise ImportRejected("The file is not UTF-8 text.") from None
        if not text:
            raise ImportRejected("The file is empty.")
        async with self.db.session() as session:
            await check_may_manage_knowledge(session, actor)
            library, where, server_id, owner_id, adventure_id = await _target(
                session, actor, channel_id, target
            )
        if self.rate_limits is not None:
            await self.rate_limits.use(Kind.IMPORT, actor)
        title = " ".join(sanitise(filename).split())[:TITLE_MAX] or "untitled"
        digest = content_hash(text)
        # Counting tokens over a 2 MiB file takes a moment: off the event loop.
        chunks = await asyncio.to_thread(chunk_text, text, markdown=is_markdown(filename))
        async with self.db.session() as session:
            clash = await _clash(session, library, title, digest)
        if clash is not None and not replace:
            raise ImportRejected(_clash_message(clash, title, digest))
        return KnowledgeDraft(
            title,
            kind,
            text,
            digest,
            tuple(chunks),
            library,
            where,
            server_id,
            owner_id,
            adventure_id,
            always_include,
            narrator_only,
            clash.title if clash is not None else None,
            channel_id,
        )

    async def save(self, actor: Actor, draft: KnowledgeDraft) -> tuple[SourceEntry, str]:
        """Write a previewed source and its passages in one transaction; the entry, and a note
        ("" or why the passages have no vectors)."""
        vectors, note = await self._embed(draft.chunks)
        async with self.db.transaction() as session:
            await check_may_manage_knowledge(session, actor)
            await touch_user(session, actor.user_id, actor.user_name)
            if draft.server_id is not None:
                await touch_server(session, draft.server_id, actor.server_name)
            if draft.adventure_id is not None:
                here = await active_adventure(session, draft.channel_id)
                if here is None or here.id != draft.adventure_id:
                    raise NotFound(
                        "The adventure this file was for is no longer running here; "
                        "nothing was imported."
                    )
            clash = await _clash(session, draft.library, draft.title, draft.content_hash)
            if clash is not None:
                if draft.replaces is None:
                    raise ImportRejected(_clash_message(clash, draft.title, draft.content_hash))
                await session.execute(
                    delete(KnowledgeSource).where(
                        col(KnowledgeSource.library) == draft.library,
                        (col(KnowledgeSource.title) == draft.title)
                        | (col(KnowledgeSource.content_hash) == draft.content_hash),
                    )
                )
            held = await session.scalar(
                select(func.count())
                .select_from(KnowledgeSource)
                .where(col(KnowledgeSource.library) == draft.library)
            )
            if (held or 0) >= MAX_SOURCES:
                raise ImportRejected(
                    f"This library holds {MAX_SOURCES} files, the most it may; remove one "
                    "with /knowledge remove first."
                )
            source = await add_source(
                session,
                draft.library,
                title=draft.title,
                kind=draft.kind,
                text=draft.text,
                content_hash=draft.content_hash,
                chunks=draft.chunks,
                server_id=draft.server_id,
                owner_id=draft.owner_id,
                adventure_id=draft.adventure_id,
                always_include=draft.always_include,
                narrator_only=draft.narrator_only,
                imported_by=actor.user_id,
                vectors=vectors,
                embedding_model=self.embedder.model if vectors and self.embedder else None,
            )
            return _entry(source, draft.library), note

    async def _embed(self, chunks: tuple[Chunk, ...]) -> tuple[list[bytes], str]:
        """The passages' vectors when an embedding model is configured; on a failure none,
        and why (the passages are still found by their words)."""
        if self.embedder is None or not chunks:
            return [], ""
        vectors: list[bytes] = []
        try:
            for start in range(0, len(chunks), EMBED_BATCH):
                batch = [c.text for c in chunks[start : start + EMBED_BATCH]]
                vectors += [to_bytes(v) for v in await self.embedder.embed(batch)]
        except CampfireError as error:
            return [], f"Passages kept without vectors (found by their words only): {error}"
        return vectors, ""

    # --- list, show, remove, options ------------------------------------------------------

    async def listing(self, actor: Actor, channel_id: int) -> list[SourceEntry]:
        """The sources the place's library and the adventure here hold, the library's first."""
        async with self.db.session() as session:
            libraries = await _visible(session, actor, channel_id)
            rows = await session.scalars(
                select(KnowledgeSource)
                .where(col(KnowledgeSource.library).in_(libraries))
                .order_by(col(KnowledgeSource.title))
            )
            entries = [_entry(s, s.library) for s in rows]
        return sorted(entries, key=lambda e: e.scope == "adventure")

    async def show(self, actor: Actor, channel_id: int, query: str) -> SourceDetails:
        async with self.db.session() as session:
            source = await _resolve(session, actor, channel_id, query)
            headings: tuple[str, ...] = ()
            text = None
            # A narrator-only file's headings say what it holds as much as its text does.
            if may_read_knowledge(source.narrator_only):
                headings = tuple(
                    await session.scalars(
                        select(col(KnowledgeChunk.heading))
                        .where(col(KnowledgeChunk.source_id) == source.id)
                        .order_by(col(KnowledgeChunk.position))
                    )
                )
                # The text is a deferred column: read only where it may be shown.
                text = await session.scalar(
                    select(col(KnowledgeSource.text)).where(col(KnowledgeSource.id) == source.id)
                )
            return SourceDetails(_entry(source, source.library), headings, text)

    async def remove(self, actor: Actor, channel_id: int, query: str) -> str:
        """Delete a source and its passages (turns played keep what they were sent)."""
        async with self.db.transaction() as session:
            await check_may_manage_knowledge(session, actor)
            source = await _resolve(session, actor, channel_id, query)
            await session.execute(
                delete(KnowledgeSource).where(col(KnowledgeSource.id) == source.id)
            )
            return source.title

    async def set_options(
        self,
        actor: Actor,
        channel_id: int,
        query: str,
        *,
        kind: KnowledgeClass | None = None,
        always_include: bool | None = None,
        narrator_only: bool | None = None,
    ) -> SourceEntry:
        async with self.db.transaction() as session:
            await check_may_manage_knowledge(session, actor)
            source = await _resolve(session, actor, channel_id, query)
            new_kind = kind or KnowledgeClass(source.kind)
            always = source.always_include if always_include is None else always_include
            if new_kind is not KnowledgeClass.CANON and always_include:
                raise InvalidInput("Only Canon can be always included.")
            # A source that stops being Canon stops being always included.
            always = always and new_kind is KnowledgeClass.CANON
            source.kind = new_kind.value
            source.always_include = always
            if narrator_only is not None:
                source.narrator_only = narrator_only
            await session.execute(
                update(KnowledgeChunk)
                .where(col(KnowledgeChunk.source_id) == source.id)
                .values(always=always, weight=RULES[new_kind].weight)
            )
            await session.flush()
            return _entry(source, source.library)

    async def choices(self, actor: Actor, channel_id: int, current: str) -> list[tuple[str, str]]:
        """Autocomplete: (label, value) of the sources here whose title holds ``current``: at
        most 25, labels of at most 100 characters, as Discord takes them (discord-api-docs,
        Application Commands, Autocomplete)."""
        async with self.db.session() as session:
            libraries = await _visible(session, actor, channel_id)
            rows = await session.execute(
                select(col(KnowledgeSource.id), col(KnowledgeSource.title))
                .where(
                    col(KnowledgeSource.library).in_(libraries),
                    col(KnowledgeSource.title).contains(current.strip(), autoescape=True),
                )
                .order_by(col(KnowledgeSource.title))
                .limit(25)
            )
            return [(row.title[:100], str(row.id)) for row in rows]


# --- helpers -------------------------------------------------------------------------------


def content_hash(text: str) -> str:
    """What identifies a file's content in its library: the sha256 of its text, hex."""
    return hashlib.sha256(text.encode()).hexdigest()


async def add_source(
    session: AsyncSession,
    library: str,
    *,
    title: str,
    kind: KnowledgeClass,
    text: str,
    content_hash: str,
    chunks: Sequence[Chunk],
    server_id: int | None = None,
    owner_id: int | None = None,
    adventure_id: int | None = None,
    always_include: bool = False,
    narrator_only: bool = False,
    imported_by: int | None = None,
    vectors: Sequence[bytes] = (),
    embedding_model: str | None = None,
) -> KnowledgeSource:
    """A source and its passages, written in the caller's transaction (an import's, an
    adventure file's); the full-text index follows by itself."""
    source = KnowledgeSource(
        library=library,
        server_id=server_id,
        owner_id=owner_id,
        adventure_id=adventure_id,
        title=title,
        kind=kind.value,
        always_include=always_include,
        narrator_only=narrator_only,
        content_hash=content_hash,
        text=text,
        chunk_count=len(chunks),
        token_count=sum(c.tokens for c in chunks),
        imported_by=imported_by,
    )
    session.add(source)
    await session.flush()
    assert source.id is not None
    session.add_all(
        KnowledgeChunk(
            source_id=source.id,
            library=library,
            position=n,
            heading=chunk.heading,
            text=chunk.text,
            token_count=chunk.tokens,
            always=always_include,
            weight=RULES[kind].weight,
            embedding=vectors[n] if vectors else None,
            embedding_model=embedding_model if vectors else None,
        )
        for n, chunk in enumerate(chunks)
    )
    return source


async def _target(
    session: AsyncSession, actor: Actor, channel_id: int, target: str
) -> tuple[str, str, int | None, int | None, int | None]:
    """(library, where, server_id, owner_id, adventure_id) for an import."""
    if target == Target.ADVENTURE:
        adventure = await active_adventure(session, channel_id)
        if adventure is None or adventure.id is None:
            raise NotFound("There is no adventure running here to attach the file to.")
        return adventure_library(adventure.id), "this adventure", None, None, adventure.id
    if actor.server_id is not None:
        return server_library(actor.server_id), "this server's library", actor.server_id, None, None
    return own_library(actor.user_id), "your library", None, actor.user_id, None


async def _visible(session: AsyncSession, actor: Actor, channel_id: int) -> tuple[str, ...]:
    """The libraries a command here reads: the place's, and the adventure's here."""
    place = (
        server_library(actor.server_id)
        if actor.server_id is not None
        else own_library(actor.user_id)
    )
    adventure = await active_adventure(session, channel_id)
    if adventure is None or adventure.id is None:
        return (place,)
    return (place, adventure_library(adventure.id))


async def _resolve(
    session: AsyncSession, actor: Actor, channel_id: int, query: str
) -> KnowledgeSource:
    """The source here named by ``query``: its id (from autocomplete) or its title."""
    libraries = await _visible(session, actor, channel_id)
    scope = col(KnowledgeSource.library).in_(libraries)
    wanted = row_id(query.strip())
    source = None
    if wanted is not None:
        source = await session.scalar(
            select(KnowledgeSource).where(scope, col(KnowledgeSource.id) == wanted)
        )
    if source is None:
        source = await session.scalar(
            select(KnowledgeSource)
            .where(scope, func.lower(col(KnowledgeSource.title)) == query.strip().lower())
            .limit(1)
        )
    if source is None:
        raise NotFound("No file of that name in the knowledge library here. See /knowledge list.")
    return source


async def _clash(
    session: AsyncSession, library: str, title: str, digest: str
) -> KnowledgeSource | None:
    return await session.scalar(
        select(KnowledgeSource)
        .where(
            col(KnowledgeSource.library) == library,
            (col(KnowledgeSource.title) == title) | (col(KnowledgeSource.content_hash) == digest),
        )
        .limit(1)
    )


def _clash_message(clash: KnowledgeSource, title: str, digest: str) -> str:
    if clash.content_hash == digest:
        what = f"This file was imported already, as **{clash.title}**."
    else:
        what = f"A file named **{title}** is in this library already."
    return what + " Import it with `replace: True` to replace it."


def _entry(source: KnowledgeSource, library: str) -> SourceEntry:
    assert source.id is not None
    scope = library.split(":", 1)[0]
    return SourceEntry(
        source.id,
        source.title,
        KnowledgeClass(source.kind),
        source.always_include,
        source.narrator_only,
        source.chunk_count,
        source.token_count,
        "own" if scope == "user" else scope,
    )
