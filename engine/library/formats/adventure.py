"""An adventure as one file: the whole story tree, and back.

Everything the schema holds about an adventure travels: its steering text, settings, world and
script state, story cards and scripts, every node of every branch (with the state it was played
from, its report and state block), every take, the branches and save points, the head and the
active branch, the memories, the story summary, the players' characters (kept where those
players are known, as the nodes' authors are), the chapter plan and its recaps
(``engine.library.formats.adventure_recaps``) and the adventure's own knowledge sources (not
narrator-only ones; their passages are cut again on import, ``engine.library.knowledge.files``).
Nodes are numbered by their place in the file (parents before children), so a file never names
database ids and imports anywhere.

Two things stay behind: prompt snapshots (Insights' record of exactly what the model was sent,
large and only meaningful to the process that sent it) and memory embeddings (vectors of one
embedding model; they are recomputed where the adventure is played next). Export, import and
export again gives the same file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput
from engine.library.formats.adventure_recaps import parse_recaps, write_recaps
from engine.library.formats.bundle import read_scripts
from engine.library.formats.draft import (
    ImportedCard,
    ImportedScenario,
    ImportLimits,
    ScenarioDraft,
    finish,
)
from engine.library.knowledge.files import (
    CarriedSource,
    parse_sources,
    write_sources,
)
from engine.library.reading.errors import ImportRejected
from engine.library.reading.fields import INT64_MAX, Fields
from engine.library.scripting.results import CARD_ID_MAX_CHARS
from engine.llm.sampling import NOTE_DEPTH_RANGE, check_range, check_stop_strings
from engine.people.content import clean_banned
from engine.platform.sanitise import sanitise, sanitise_json
from engine.prompt.tokens import tokens_in
from engine.storage.chapter_models import AdventureChapters
from engine.storage.memory_models import Memory
from engine.storage.models import (
    ActionType,
    Adventure,
    AdventureCard,
    AdventureScript,
    Branch,
    Role,
    SavePoint,
    StoryNode,
    Take,
    User,
)
from engine.storage.party_models import Character
from engine.story.chapters.plan import read_plan
from engine.story.characters import clean_about, clean_name, name_key
from engine.story.narrative.state import normalised, stored
from engine.story.pronouns import kept_pronouns
from engine.story.steering.card_proposals import CARD_PROPOSALS_RANGE
from engine.story.steering.settings import SAMPLING_RANGES

KIND = "adventure"
VERSION = 1
#: Discord's own upload limit for a bot; a larger export could not be sent back anyway.
MAX_BYTES = 10 * 1024 * 1024
MAX_NODES = 50_000
NODE_TEXT_MAX = 100_000

# --- import --------------------------------------------------------------------------------------


def is_adventure(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.get("campfire") == KIND


def _state(f: Fields, key: str) -> dict[str, Any] | None:
    value = f.raw.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ImportRejected(f"{f.at(key)}: expected an object.")
    return value


@dataclass
class ParsedAdventure:
    """An adventure file checked in full, ready to write (``write_adventure``)."""

    fields: dict[str, Any]
    steering: ScenarioDraft
    nodes: list[dict[str, Any]]
    takes: list[dict[str, Any]]
    branches: list[dict[str, Any]]
    save_points: list[dict[str, Any]]
    memories: list[dict[str, Any]]
    head: int
    active_branch: str | None
    characters: list[dict[str, Any]]
    #: The id a script gave each story card ("" for none), in the cards' order.
    card_script_ids: list[str] = field(default_factory=list)
    #: The adventure's own knowledge sources, cut into passages (engine.library.knowledge.files).
    knowledge: list[CarriedSource] = field(default_factory=list)
    #: The chapters' recaps, each naming its turn by its place in ``nodes``.
    recaps: list[dict[str, Any]] = field(default_factory=list)


def parse_adventure(raw: Any, limits: ImportLimits) -> ParsedAdventure:
    """Check the whole file without writing anything; raises ``ImportRejected`` naming the
    first problem (which entry, which field)."""
    if not is_adventure(raw):
        raise ImportRejected(
            'This is not a Campfire adventure export (it has no "campfire": "adventure"). '
            "Scenario files go to /scenario import."
        )
    f = Fields(raw, "")
    version = f.integer("version", default=1)
    if version is None or version > VERSION:
        raise ImportRejected(
            f"This adventure file is version {version}; this Campfire reads version {VERSION}."
        )
    steering = _steering(f, limits)
    nodes = _nodes(f)
    takes = _takes(f, nodes)
    branches = _branches(f, len(nodes))
    names = {b["name"] for b in branches}
    save_points = _save_points(f, len(nodes), names)
    memories = _memories(f)
    characters = _characters(f)
    head = f.integer("head", default=None, low=0, high=len(nodes) - 1)
    if head is None:
        raise ImportRejected("head: the file does not say where the story stands.")
    active = sanitise(f.text("active_branch", default="")).strip() or None
    if active is not None and active not in names:
        raise ImportRejected(f"active_branch: there is no branch called “{active[:60]}”.")
    settings = f.obj("settings") or Fields({}, "settings")
    fields: dict[str, Any] = {
        "story_summary": sanitise(f.text("story_summary")),
        "world_state": _state(f, "world_state") or {},
        "script_state": _state(f, "script_state") or {},
        "story_state": stored(normalised(sanitise_json(_state(f, "story_state")))),
        "story_tracking": f.flag("story_tracking"),
        "context_tokens": settings.integer("context_tokens", default=None, low=512, high=1_000_000),
        "max_output_tokens": settings.integer(
            "max_output_tokens", default=None, low=16, high=32768
        ),
        "temperature": _temperature(settings),
        **_sampling(settings),
        "message_play": settings.flag("message_play"),
        "card_proposals": _card_proposals(settings),
        "banned_words": _banned(settings),
        "memory_cursor": f.integer("memory_cursor", low=0) or 0,
        "summary_cursor": f.integer("summary_cursor", low=0) or 0,
        "version": f.integer("story_version", low=0) or 0,
    }
    created = f.when("created_at")
    if created is not None:
        fields["created_at"] = created
    script_ids = [
        sanitise(Fields(item, p).text("script_id"))[:CARD_ID_MAX_CHARS]
        for p, item in f.items("story_cards")
    ]
    return ParsedAdventure(
        fields,
        steering,
        nodes,
        takes,
        branches,
        save_points,
        memories,
        head,
        active,
        characters,
        script_ids,
        parse_sources(f),
        parse_recaps(f, len(nodes)),
    )


async def write_adventure(
    session: AsyncSession,
    parsed: ParsedAdventure,
    *,
    channel_id: int | None,
    server_id: int | None,
    host_id: int | None,
) -> Adventure:
    """Write a parsed adventure and its whole tree. The caller commits (one transaction)."""
    steering = parsed.steering
    known_users = await _known_users(session, parsed.nodes)
    adventure = Adventure(
        title=steering.title,
        icon=steering.icon,
        prompt=steering.prompt,
        plot_essentials=steering.plot_essentials,
        authors_note=steering.authors_note,
        ai_instructions=steering.ai_instructions,
        stat_schema=steering.stat_schema,
        **parsed.fields,
        server_id=server_id,
        owner_id=None if server_id is not None else host_id,
        host_id=host_id,
        channel_id=channel_id,
    )
    session.add(adventure)
    await session.flush()
    assert adventure.id is not None
    if steering.chapters:
        session.add(AdventureChapters(adventure_id=adventure.id, plan=steering.chapters))
    session.add_all(
        AdventureCard(
            adventure_id=adventure.id,
            position=i,
            script_id=parsed.card_script_ids[i] if i < len(parsed.card_script_ids) else "",
            **asdict(card),
        )
        for i, card in enumerate(steering.cards)
    )
    session.add_all(
        AdventureScript(adventure_id=adventure.id, position=i, **asdict(script))
        for i, script in enumerate(steering.scripts)
    )
    # Copies: the parsed rows stay as they were, so a failed write can be tried again.
    nodes = [dict(row) for row in parsed.nodes]
    takes = [dict(row) for row in parsed.takes]
    branches = [dict(row) for row in parsed.branches]
    save_points = [dict(row) for row in parsed.save_points]
    memories = parsed.memories
    head, active = parsed.head, parsed.active_branch
    ids: list[int] = []
    for row in nodes:
        parent = row.pop("parent")
        author = row.get("author_id")
        if author is not None and author not in known_users:
            row["author_id"] = None
        node = StoryNode(
            adventure_id=adventure.id,
            parent_id=ids[parent] if parent is not None else None,
            **row,
        )
        session.add(node)
        await session.flush()
        assert node.id is not None
        ids.append(node.id)
    session.add_all(Take(node_id=ids[t.pop("node")], **t) for t in takes)
    branch_ids: dict[str, int] = {}
    for b in branches:
        tip = b.pop("tip")
        branch = Branch(
            adventure_id=adventure.id, tip_node_id=ids[tip] if tip is not None else None, **b
        )
        session.add(branch)
        await session.flush()
        assert branch.id is not None
        branch_ids[branch.name] = branch.id
    for p in save_points:
        node, branch_name = p.pop("node"), p.pop("branch")
        session.add(
            SavePoint(
                adventure_id=adventure.id,
                node_id=ids[node],
                branch_id=branch_ids[branch_name] if branch_name is not None else None,
                **p,
            )
        )
    session.add_all(Memory(adventure_id=adventure.id, **m) for m in memories)
    known_players = await _known_users(
        session, [{"author_id": c["user_id"]} for c in parsed.characters]
    )
    session.add_all(
        Character(adventure_id=adventure.id, name_key=name_key(c["name"]), **c)
        for c in parsed.characters
        if c["user_id"] in known_players
    )
    adventure.head_node_id = ids[head]
    adventure.active_branch_id = branch_ids[active] if active is not None else None
    write_recaps(session, adventure.id, parsed.recaps, ids)
    await write_sources(session, adventure.id, parsed.knowledge)
    await session.flush()
    return adventure


def _steering(f: Fields, limits: ImportLimits) -> ScenarioDraft:
    """Steering text, cards and scripts under the same caps as a scenario import."""
    draft = ScenarioDraft(
        title=f.text("title"),
        icon=f.text("icon"),
        prompt=f.text("prompt"),
        plot_essentials=f.text("plot_essentials"),
        authors_note=f.text("authors_note"),
        ai_instructions=f.text("ai_instructions"),
        stat_schema=f.mapping("stat_schema"),
        chapters=read_plan(f.raw),
    )
    for p, item in f.items("story_cards"):
        c = Fields(item, p)
        draft.cards.append(
            ImportedCard(
                title=c.text("title"),
                keys=c.text("keys"),
                entry=c.text("entry"),
                type=c.text("type", default="custom"),
                description=c.text("description"),
                always_on=c.flag("always_on"),
                lore=c.raw.get("lore") or {},
            )
        )
    draft.scripts.extend(read_scripts(f))
    checked = finish(ImportedScenario("adventure", draft), limits)
    if checked.cards_left_out:
        # An adventure's story has used all its cards: none is dropped unseen (the preview that
        # offers a scenario's first cards has no counterpart here).
        raise ImportRejected(checked.warnings[0])
    return draft


def _nodes(f: Fields) -> list[dict[str, Any]]:
    items = f.items("nodes")
    if not items:
        raise ImportRejected("nodes: the file has no story (not even its opening).")
    if len(items) > MAX_NODES:
        raise ImportRejected(f"nodes: {len(items):,} entries; at most {MAX_NODES:,}.")
    out: list[dict[str, Any]] = []
    for i, (path, item) in enumerate(items):
        n = Fields(item, path)
        parent = n.integer("parent", default=None, low=0)
        if i == 0 and parent is not None:
            raise ImportRejected(f"{n.at('parent')}: the first node is the opening; it has none.")
        if i > 0 and (parent is None or parent >= i):
            raise ImportRejected(
                f"{n.at('parent')}: every node after the first needs a parent listed before it."
            )
        index = n.integer("index", low=0)
        expected = 0 if parent is None else out[parent]["index"] + 1
        if index != expected:
            raise ImportRejected(
                f"{n.at('index')}: is {index}; its place in the tree says {expected}."
            )
        role, action = n.text("role"), n.text("action")
        if role not in set(Role):
            raise ImportRejected(f"{n.at('role')}: “{role[:30]}” is not player or narrator.")
        if action not in set(ActionType):
            raise ImportRejected(
                f"{n.at('action')}: “{action[:30]}” is not one of "
                + ", ".join(a.value for a in ActionType)
                + "."
            )
        text = sanitise(n.text("text"))
        if len(text) > NODE_TEXT_MAX:
            raise ImportRejected(
                f"{n.at('text')}: {len(text):,} characters; at most {NODE_TEXT_MAX:,}."
            )
        take_count = n.integer("take_count", default=1, low=1, high=10_000) or 1
        row: dict[str, Any] = {
            "parent": parent,
            "index": index,
            "role": Role(role),
            "action": ActionType(action),
            "author_id": n.integer("author_id", default=None, low=0, high=INT64_MAX),
            "text": text,
            "live_take": n.integer("live_take", default=1, low=1, high=take_count),
            "take_count": take_count,
            # Campfire's own count, never the file's: the history window is sized by it, and a
            # file claiming 0 for a huge entry would put all of it in one prompt, on the
            # operator's model. (A file's "token_count" is read for nothing.)
            "token_count": tokens_in(text),
            "model": n.text("model", default="") or None,
            "prompt_tokens": n.integer("prompt_tokens", default=None, low=0),
            "completion_tokens": n.integer("completion_tokens", default=None, low=0),
            "latency_ms": n.integer("latency_ms", default=None, low=0),
            "state_block": _optional_text(n, "state_block"),
            "reasoning": _optional_text(n, "reasoning"),
            "state_before": _state(n, "state_before"),
            "state_after": _state(n, "state_after"),
            "state_report": _state(n, "state_report"),
            "context_report": _state(n, "context_report"),
        }
        created = n.when("created_at")
        if created is not None:
            row["created_at"] = created
        out.append(row)
    return out


def _takes(f: Fields, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out, seen = [], set()
    for path, item in f.items("takes"):
        t = Fields(item, path)
        node = t.integer("node", low=0, high=len(nodes) - 1)
        number = t.integer("number", low=1)
        if (node, number) in seen:
            raise ImportRejected(f"{path}: node {node} has take {number} twice.")
        seen.add((node, number))
        row: dict[str, Any] = {
            "node": node,
            "number": number,
            "text": sanitise(t.text("text")),
            "reasoning": _optional_text(t, "reasoning"),
            "state_after": _state(t, "state_after"),
        }
        created = t.when("created_at")
        if created is not None:
            row["created_at"] = created
        out.append(row)
    return out


def _branches(f: Fields, node_count: int) -> list[dict[str, Any]]:
    out, names = [], set()
    for path, item in f.items("branches"):
        b = Fields(item, path)
        name = sanitise(b.text("name")).strip()
        if not name or len(name) > 100:
            raise ImportRejected(f"{b.at('name')}: a branch needs a name of 1 to 100 characters.")
        if name in names:
            raise ImportRejected(f"{b.at('name')}: two branches are called “{name}”.")
        names.add(name)
        row: dict[str, Any] = {
            "name": name,
            "tip": b.integer("tip", default=None, low=0, high=node_count - 1),
        }
        created = b.when("created_at")
        if created is not None:
            row["created_at"] = created
        out.append(row)
    return out


def _save_points(f: Fields, node_count: int, branches: set[str]) -> list[dict[str, Any]]:
    out, names = [], set()
    for path, item in f.items("save_points"):
        p = Fields(item, path)
        name = sanitise(p.text("name")).strip()
        if not name or len(name) > 100:
            raise ImportRejected(
                f"{p.at('name')}: a save point needs a name of 1 to 100 characters."
            )
        if name in names:
            raise ImportRejected(f"{p.at('name')}: two save points are called “{name}”.")
        names.add(name)
        branch = sanitise(p.text("branch", default="")).strip() or None
        if branch is not None and branch not in branches:
            raise ImportRejected(f"{p.at('branch')}: there is no branch called “{branch[:60]}”.")
        row: dict[str, Any] = {
            "name": name,
            "node": p.integer("node", low=0, high=node_count - 1),
            "branch": branch,
        }
        created = p.when("created_at")
        if created is not None:
            row["created_at"] = created
        out.append(row)
    return out


def _memories(f: Fields) -> list[dict[str, Any]]:
    out = []
    for path, item in f.items("memories"):
        m = Fields(item, path)
        row: dict[str, Any] = {
            "text": sanitise(m.text("text")),
            "source_start": m.integer("source_start", low=0),
            "source_end": m.integer("source_end", low=0),
            "pinned": m.flag("pinned"),
            "forgotten": m.flag("forgotten"),
            "use_count": m.integer("use_count", low=0),
            "last_used_at": m.when("last_used_at"),
        }
        created = m.when("created_at")
        if created is not None:
            row["created_at"] = created
        out.append(row)
    return out


def _characters(f: Fields) -> list[dict[str, Any]]:
    """The players' characters, each checked as ``/character set`` checks one."""
    out: list[dict[str, Any]] = []
    players: set[int] = set()
    names: set[str] = set()
    for path, item in f.items("characters"):
        c = Fields(item, path)
        user = c.integer("user_id", default=None, low=0, high=INT64_MAX)
        if user is None:
            raise ImportRejected(f"{path}: a character needs its player's user_id.")
        try:
            name, about = clean_name(c.text("name")), clean_about(c.text("about"))
            pronouns = kept_pronouns(c.text("pronouns"))
        except InvalidInput as error:
            raise ImportRejected(f"{path}: {error}") from None
        if user in players or name_key(name) in names:
            raise ImportRejected(f"{path}: a second character for one player, or of one name.")
        players.add(user)
        names.add(name_key(name))
        out.append({"user_id": user, "name": name, "about": about, "pronouns": pronouns})
    return out


def _optional_text(f: Fields, key: str) -> str | None:
    return None if f.raw.get(key) is None else sanitise(f.text(key))


def _banned(settings: Fields) -> list[str]:
    try:
        return clean_banned(sanitise(word) for word in settings.words("banned_words"))
    except InvalidInput as error:
        raise ImportRejected(f"{settings.at('banned_words')}: {error.message}") from None


def _temperature(settings: Fields) -> float | None:
    value = settings.number("temperature")
    if value is not None and not 0.0 <= value <= 2.0:
        raise ImportRejected(f"{settings.at('temperature')}: {value} is out of range (0 to 2).")
    return value


def _card_proposals(settings: Fields) -> int:
    """Every how many turns the story proposes a card to the host: 0 (off: also a file from
    before it travelled) or within the range the host may set."""
    low, high = CARD_PROPOSALS_RANGE
    every = settings.integer("card_proposals", default=0, low=0, high=high) or 0
    if 0 < every < low:
        raise ImportRejected(
            f"{settings.at('card_proposals')}: {every} is out of range (0, or {low} to {high})."
        )
    return every


def _sampling(settings: Fields) -> dict[str, Any]:
    """The adventure's sampling and author's note depth, held to the ranges a player may set
    them in (``engine.llm.sampling``): a file past them is refused with the range named. A file
    from before they travelled has none: the model server's own, the note's usual place."""
    low, high = NOTE_DEPTH_RANGE
    depth = settings.integer("authors_note_depth", default=None, low=low, high=high)
    out: dict[str, Any] = {"authors_note_depth": depth}
    for name, bounds in (*SAMPLING_RANGES.items(), ("stop_strings", None)):
        try:
            if bounds is None:
                out[name] = list(check_stop_strings(settings.words(name)))
            else:
                check_range(name, value := settings.number(name), bounds)
                out[name] = value
        except InvalidInput as error:
            raise ImportRejected(f"{settings.at(name)}: {error.message}") from None
    return out


async def _known_users(session: AsyncSession, nodes: list[dict[str, Any]]) -> set[int]:
    """Authors that exist here; the others become anonymous (users are not imported)."""
    wanted = {row["author_id"] for row in nodes if row.get("author_id") is not None}
    if not wanted:
        return set()
    return set(await session.scalars(select(col(User.id)).where(col(User.id).in_(wanted))))
