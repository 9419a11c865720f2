"""Adventure export and import: the whole tree (every branch, take, save point, the head and the
active branch, state, cards, scripts, memories, summary) survives a round trip; a bad file is
refused with its problem named and writes nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from engine.errors import NotFound
from engine.library.archive import AdventureArchive
from engine.library.formats.adventure import parse_adventure
from engine.library.formats.draft import ImportLimits
from engine.library.formats.strict_json import JsonCaps, load_json
from engine.library.reading.errors import ImportRejected
from engine.llm.providers.resolver import OperatorDefault
from engine.people.access.rules import Actor
from engine.prompt.tokens import count_tokens
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
from engine.turns.engine import TurnEngine
from tests.helpers import new_adventure, play

ALICE = Actor(user_id=11, user_name="alice")


@pytest.fixture
def archive(db) -> AdventureArchive:
    return AdventureArchive(db, ImportLimits())


async def grown_adventure(db, provider, fake_model, channel_id: int = 1) -> int:
    """Three turns, a second take, a fork on its own branch, a save point, a memory."""
    adventure_id = await new_adventure(db, channel_id=channel_id)
    engine = TurnEngine(db, OperatorDefault(provider))
    fake_model.queue("The road bends.", "A heron lifts off.")
    await play(engine, adventure_id, ActionType.DO, "walk on")
    await play(engine, adventure_id, ActionType.SAY, "Hello, heron")
    async with db.session() as session, session.begin():
        session.add(User(id=11, name="alice"))
        adventure = await session.get(Adventure, adventure_id)
        head = await session.get(StoryNode, adventure.head_node_id)
        head.take_count, head.live_take = 2, 2
        session.add(Take(node_id=head.id, number=1, text="A crow caws.", state_after={"x": 1}))
        session.add(Take(node_id=head.id, number=2, text=head.text, reasoning="thinking…"))
        # A fork below the first narration, on a branch of its own, which becomes the head.
        first = (
            await session.scalars(
                select(StoryNode)
                .where(StoryNode.adventure_id == adventure_id, StoryNode.index == 2)
                .order_by(StoryNode.id)
            )
        ).first()
        fork = StoryNode(
            adventure_id=adventure_id,
            parent_id=first.id,
            index=3,
            role=Role.PLAYER,
            action=ActionType.DO,
            author_id=11,
            text="> You turn back.",
            state_before={"world_state": {}, "script_state": {"n": 1}},
            created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        )
        session.add(fork)
        await session.flush()
        branch = Branch(adventure_id=adventure_id, name="back home", tip_node_id=fork.id)
        session.add(branch)
        await session.flush()
        main = await session.get(Branch, adventure.active_branch_id)
        session.add(
            SavePoint(adventure_id=adventure_id, branch_id=main.id, node_id=head.id, name="heron")
        )
        session.add(
            Memory(
                adventure_id=adventure_id,
                text="The player met a heron.",
                source_start=1,
                source_end=4,
                pinned=True,
                use_count=2,
            )
        )
        session.add(AdventureScript(adventure_id=adventure_id, name="counter", on_input="text"))
        session.add(
            Character(
                adventure_id=adventure_id,
                user_id=11,
                name="Ada",
                name_key="ada",
                about="A heron",
                pronouns="she/her/her/hers/herself",
            )
        )
        adventure.message_play = True
        session.add(
            AdventureCard(
                adventure_id=adventure_id, title="Settings", entry="on", script_id="mc-settings"
            )
        )
        adventure.head_node_id = fork.id
        adventure.active_branch_id = branch.id
        # Alice's own story in her DM: she may read and bring in its scripts.
        adventure.owner_id = adventure.host_id = 11
        adventure.story_summary = "A walk by the water."
        adventure.script_state = {"n": 2}
        adventure.temperature = 0.5
        adventure.authors_note = "Keep it calm."
        adventure.card_proposals = 20
    return adventure_id


async def test_export_then_import_gives_an_equal_adventure(db, provider, fake_model, archive):
    await grown_adventure(db, provider, fake_model, channel_id=1)
    exported = await archive.export(ALICE, 1)
    raw = json.loads(exported.content)
    assert len(raw["nodes"]) == 6 and len(raw["takes"]) == 2
    assert [b["name"] for b in raw["branches"]] == ["main", "back home"]
    assert raw["active_branch"] == "back home" and raw["head"] == 5
    assert raw["save_points"][0]["name"] == "heron" and raw["memories"][0]["pinned"] is True
    assert raw["characters"] == [
        {"user_id": 11, "name": "Ada", "about": "A heron", "pronouns": "she/her/her/hers/herself"}
    ]
    assert raw["settings"]["message_play"] is True
    assert raw["settings"]["card_proposals"] == 20
    # The id a script gave its card travels: the script finds its card again after an import.
    assert [c["script_id"] for c in raw["story_cards"] if "script_id" in c] == ["mc-settings"]

    restored = await archive.restore(ALICE, 2, await archive.read(exported.content))
    assert (restored.nodes, restored.branches, restored.head_text) == (6, 2, "> You turn back.")
    again = json.loads((await archive.export(ALICE, 2)).content)
    # The counts are Campfire's own after an import (a node the test wrote by hand had none).
    assert [node.pop("token_count") for node in again["nodes"]] == [
        count_tokens(node["text"]) for node in again["nodes"]
    ]
    for node in raw["nodes"]:
        node.pop("token_count")
    assert again == raw


async def test_token_counts_are_campfires_own_never_the_files(db, provider, fake_model, archive):
    """A file's counts size the history window: one claiming 0 tokens for a long entry would
    put all of it in every prompt on the operator's model (issue: spend and fairness)."""
    await grown_adventure(db, provider, fake_model, channel_id=1)
    raw = json.loads((await archive.export(ALICE, 1)).content)
    raw["nodes"][1]["text"] = "> You " + "walk and walk. " * 5_000
    for node in raw["nodes"]:
        node["token_count"] = 0
    await archive.restore(ALICE, 2, await archive.read(json.dumps(raw).encode()))
    async with db.session() as session:
        adventure = await session.scalar(select(Adventure).where(Adventure.channel_id == 2))
        nodes = (
            await session.scalars(select(StoryNode).where(StoryNode.adventure_id == adventure.id))
        ).all()
    assert all(node.token_count == count_tokens(node.text) for node in nodes)
    assert max(node.token_count for node in nodes) > 10_000


async def test_import_ends_what_was_running_there(db, provider, fake_model, archive):
    await grown_adventure(db, provider, fake_model, channel_id=1)
    content = (await archive.export(ALICE, 1)).content
    old = await new_adventure(db, channel_id=3)
    async with db.session() as session, session.begin():
        (await session.get(Adventure, old)).owner_id = 11  # alice's, in her DM
    restored = await archive.restore(ALICE, 3, await archive.read(content))
    async with db.session() as session:
        assert (await session.get(Adventure, old)).ended_at is not None
        new = await session.get(Adventure, restored.adventure_id)
        assert new.channel_id == 3 and new.host_id == 11 and new.owner_id == 11


async def test_authors_unknown_here_become_anonymous(db, provider, fake_model, archive):
    await grown_adventure(db, provider, fake_model, channel_id=1)
    raw = json.loads((await archive.export(ALICE, 1)).content)
    raw["nodes"][5]["author_id"] = 999_999
    restored = await archive.restore(ALICE, 4, await archive.read(json.dumps(raw).encode()))
    async with db.session() as session:
        adventure = await session.get(Adventure, restored.adventure_id)
        head = await session.get(StoryNode, adventure.head_node_id)
        assert head.author_id is None


async def test_characters_of_players_unknown_here_stay_behind(db, provider, fake_model, archive):
    await grown_adventure(db, provider, fake_model, channel_id=1)
    raw = json.loads((await archive.export(ALICE, 1)).content)
    raw["characters"].append({"user_id": 999_999, "name": "Stranger", "about": ""})
    restored = await archive.restore(ALICE, 4, await archive.read(json.dumps(raw).encode()))
    async with db.session() as session:
        kept = (
            await session.scalars(
                select(Character).where(Character.adventure_id == restored.adventure_id)
            )
        ).all()
    assert [(c.user_id, c.name) for c in kept] == [(11, "Ada")]


async def test_export_without_an_adventure(archive):
    with pytest.raises(NotFound):
        await archive.export(ALICE, 12345)


async def count_adventures(db) -> int:
    async with db.session() as session:
        return await session.scalar(select(func.count()).select_from(Adventure))


def broken(raw: dict, path: list, value) -> bytes:
    raw = json.loads(json.dumps(raw))
    target = raw
    for step in path[:-1]:
        target = target[step]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(raw).encode()


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (["nodes", 3, "parent"], 4, "nodes[3].parent: every node after the first needs a parent"),
        (["nodes", 0, "parent"], 1, "nodes[0].parent: the first node is the opening"),
        (["nodes", 2, "index"], 7, "nodes[2].index: is 7; its place in the tree says 2"),
        (["nodes", 1, "role"], "wizard", "nodes[1].role: “wizard” is not player or narrator"),
        (["nodes", 1, "text"], ["x"], "nodes[1].text: expected text, found a list"),
        (["takes", 0, "node"], 99, "takes[0].node: 99 is out of range"),
        (["branches", 1, "name"], "main", "two branches are called “main”"),
        (["save_points", 0, "branch"], "nowhere", "there is no branch called “nowhere”"),
        (["active_branch"], "nowhere", "active_branch: there is no branch called"),
        (["head"], KeyError, "head: the file does not say where the story stands"),
        (["nodes"], [], "nodes: the file has no story"),
        (["settings", "temperature"], 9, "settings.temperature: 9.0 is out of range"),
        (["settings", "card_proposals"], 3, "settings.card_proposals: 3 is out of range (0, or"),
        (["story_cards"], [{"title": "x", "entry": "e" * 4001}], "its entry has 4,001 characters"),
        (["world_state"], [1], "world_state: expected an object"),
        (["campfire"], "scenario", "not a Campfire adventure export"),
        (["characters", 0, "name"], "<@1>", "characters[0]: A character's name may hold"),
        (["characters", 0, "user_id"], KeyError, "characters[0]: a character needs its player"),
        (["memories", 0, "created_at"], "yesterday", "“yesterday” is not an ISO 8601 time"),
    ],
)
async def test_a_broken_file_is_named_and_writes_nothing(
    db, provider, fake_model, archive, path, value, expected
):
    await grown_adventure(db, provider, fake_model, channel_id=1)
    raw = json.loads((await archive.export(ALICE, 1)).content)
    before = await count_adventures(db)
    with pytest.raises(ImportRejected) as rejected:
        await archive.restore(ALICE, 5, await archive.read(broken(raw, path, value)))
    assert expected in rejected.value.message
    assert await count_adventures(db) == before


async def test_not_json_and_oversize(archive):
    with pytest.raises(ImportRejected) as rejected:
        await archive.read(b"hello")
    assert "not JSON" in rejected.value.message
    with pytest.raises(ImportRejected):
        archive.check_size(11 * 1024 * 1024)


# --- fuzzing: only the player-facing import error ever comes out --------------------------------

SAMPLE = {
    "campfire": "adventure",
    "version": 1,
    "title": "Sample",
    "icon": "",
    "prompt": "It begins.",
    "plot_essentials": "",
    "authors_note": "",
    "ai_instructions": "",
    "stat_schema": {},
    "story_summary": "",
    "world_state": {},
    "script_state": {},
    "settings": {"context_tokens": None, "max_output_tokens": None, "temperature": None},
    "memory_cursor": 0,
    "summary_cursor": 0,
    "story_version": 2,
    "created_at": "2026-01-01T00:00:00+00:00",
    "story_cards": [{"title": "Heron", "type": "custom", "keys": "heron", "entry": "A bird."}],
    "scripts": [],
    "nodes": [
        {"parent": None, "index": 0, "role": "narrator", "action": "start", "text": "It begins."},
        {"parent": 0, "index": 1, "role": "player", "action": "do", "text": "> You wait."},
        {
            "parent": 1,
            "index": 2,
            "role": "narrator",
            "action": "continue",
            "text": "Rain.",
            "take_count": 2,
            "live_take": 2,
            "state_before": {"world_state": {}},
        },
    ],
    "takes": [{"node": 2, "number": 1, "text": "Snow."}, {"node": 2, "number": 2, "text": "Rain."}],
    "branches": [{"name": "main", "tip": 2}],
    "save_points": [{"name": "start", "node": 0, "branch": "main"}],
    "memories": [{"text": "It rained.", "source_start": 1, "source_end": 2}],
    "head": 2,
    "active_branch": "main",
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def mutate(data: st.DataObject, value: object) -> dict:
    raw = json.loads(json.dumps(SAMPLE))
    target = raw
    for _ in range(data.draw(st.integers(0, 3))):
        if isinstance(target, dict) and target:
            key = data.draw(st.sampled_from(sorted(target)))
            if not isinstance(target[key], dict | list) or not target[key]:
                break
            target = target[key]
        elif isinstance(target, list) and target:
            i = data.draw(st.integers(0, len(target) - 1))
            if not isinstance(target[i], dict | list) or not target[i]:
                break
            target = target[i]
    if isinstance(target, dict) and target:
        target[data.draw(st.sampled_from(sorted(target)))] = value
    elif isinstance(target, list) and target:
        target[data.draw(st.integers(0, len(target) - 1))] = value
    return raw


def test_the_sample_is_a_valid_adventure():
    parse_adventure(SAMPLE, ImportLimits())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.data())
def test_fuzz_a_mutated_adventure_file(value, data):
    raw = mutate(data, value)
    try:
        parse_adventure(
            load_json(json.dumps(raw).encode(), JsonCaps(max_bytes=10**7)), ImportLimits()
        )
    except ImportRejected as error:
        assert error.message.strip()


async def test_mutated_files_that_parse_also_write(db, archive):
    """What passes the checks must also be writable: no database error behind a good message."""
    written = 0

    @settings(max_examples=60, deadline=None, database=None)
    @given(json_values, st.data())
    def collect(value, data):
        raw = mutate(data, value)
        try:
            parse_adventure(raw, ImportLimits())
        except ImportRejected:
            return
        accepted.append(raw)

    accepted: list[dict] = []
    collect()
    for raw in accepted[:25]:
        parsed = await archive.read(json.dumps(raw).encode())
        await archive.restore(ALICE, 77, parsed)
        written += 1
    assert written >= 1
