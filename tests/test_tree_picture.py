"""The picture /tree attaches: a PNG of bounded size whose pixels show the story's structure
(lanes, the current line, forks, takes, save points, chapter ends, where the story stands),
found by colour; with the text diagram still sent beside it for the console and screen readers,
and the picture's description (alt text) within Discord's 1024 characters. A huge story stays
within the bounds of size and time. Through real discord.py on the stand-in, and the shape and
drawing on their own."""

from __future__ import annotations

import io
import time
from collections import deque

import numpy as np
from PIL import Image, ImageFont
from sqlalchemy import select, update

from engine.storage.chapter_models import ChapterRecap
from engine.storage.models import ActionType, Adventure, Branch, Role, SavePoint, StoryNode
from engine.story.tree.image import (
    BRANCH,
    CHAPTER,
    CURRENT,
    HEAD,
    LANE_MIN_PX,
    LANES_DRAWN_MAX,
    LINE_W,
    SAVE_POINT,
    TAKES,
    WIDTH,
    draw_png,
)
from engine.story.tree.picture import DESCRIPTION_MAX, describe, draw_tree
from engine.story.tree.shape import BranchRow, Entry, build_shape
from tests.discord_env import DiscordEnv
from tests.test_tree_commands import act, adventure_here, answer

#: The picture's bounds: Discord's upload limit is 10 MiB (discord-api-docs, Reference,
#: Uploading Files); a phone should not wait for more than a few hundred kilobytes.
PNG_BYTES_MAX = 300_000
#: About two phone screens: eight lanes, the header, the legend.
HEIGHT_MAX = 2_200


# --- reading the picture ------------------------------------------------------------------------


def pixels(png: bytes) -> np.ndarray:
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    image = Image.open(io.BytesIO(png))
    image.verify()  # a whole, valid PNG
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.width == WIDTH and image.height <= HEIGHT_MAX
    return np.asarray(image.convert("RGB"))


def mask(image: np.ndarray, *colours: tuple[int, int, int]) -> np.ndarray:
    return np.logical_or.reduce([np.all(image == colour, axis=-1) for colour in colours])


def blobs(image: np.ndarray, colour: tuple[int, int, int]) -> int:
    """How many separate marks of exactly ``colour`` the picture has (8-connected)."""
    todo = {(int(y), int(x)) for y, x in zip(*np.nonzero(mask(image, colour)), strict=True)}
    count = 0
    while todo:
        count += 1
        queue = deque([todo.pop()])
        while queue:
            y, x = queue.popleft()
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    near = (y + dy, x + dx)
                    if near in todo:
                        todo.remove(near)
                        queue.append(near)
    return count


#: A lane's line has a run at least this long in a row: its shortest is ``LANE_MIN_PX``, less
#: the ring where the story stands; connectors, vertical, are a few pixels a row.
RUN_PX = 30
assert LANE_MIN_PX - 24 > RUN_PX > 2 * LINE_W


def band_rows(image: np.ndarray, *colours: tuple[int, int, int]) -> list[float]:
    """The middle row of each horizontal line of these colours: runs of rows that each hold
    ``RUN_PX`` of them side by side."""
    runs_of = np.cumsum(np.pad(mask(image, *colours), ((0, 0), (1, 0))), axis=1, dtype=np.int32)
    has_run = ((runs_of[:, RUN_PX:] - runs_of[:, :-RUN_PX]) == RUN_PX).any(axis=1)
    rows = np.flatnonzero(has_run)
    runs = np.split(rows, np.flatnonzero(np.diff(rows) > 1) + 1) if rows.size else []
    return [float(run.mean()) for run in runs]


def bands(image: np.ndarray, *colours: tuple[int, int, int]) -> int:
    return len(band_rows(image, *colours))


#: A lane's line with the marks that sit on it (takes, chapter ends, the ring where the story
#: stands): a save point's flag stands above it.
LANE_COLOURS = (BRANCH, CURRENT, TAKES, CHAPTER, HEAD)
#: The legend's rows that hold such a run: its lines, its ring, its diamond.
LEGEND_LANE_ROWS = 3


def lane_rows(image: np.ndarray) -> list[float]:
    """The middle row of each lane drawn, top to bottom (the legend's left out)."""
    return band_rows(image, *LANE_COLOURS)[:-LEGEND_LANE_ROWS]


# The legend shows one key of each mark, and its first row a line of each colour.
LEGEND = 1


# --- the shape and the drawing, on their own ----------------------------------------------------


def story() -> tuple[list[BranchRow], dict[int, Entry]]:
    """main (entries 0–30), "the river" leaving it at entry 12 (to 23), "the caves" leaving the
    river at entry 16 (to 21); turns with several takes at 7 and 19 on main and 17 on the river."""
    entries = {i + 1: Entry(i or None, i, 3 if i in (7, 19) else 1) for i in range(31)}
    previous = 13
    for k in range(11):
        entries[100 + k] = Entry(previous, 13 + k, 2 if k == 4 else 1)
        previous = 100 + k
    previous = 103
    for k in range(5):
        entries[200 + k] = Entry(previous, 17 + k, 1)
        previous = 200 + k
    branches = [
        BranchRow(1, "main", 31),
        BranchRow(2, "the river", 110),
        BranchRow(3, "the caves", 204),
    ]
    return branches, entries


def test_the_shape_finds_each_branch_where_it_leaves_its_parent():
    branches, entries = story()
    shape = build_shape(
        branches, entries, 2, 108, [("camp", 1, 11), ("bridge", 2, 105)], [("The Gate", 9)]
    )
    assert [
        (lane.name, lane.parent_id, lane.start, lane.tip, lane.depth) for lane in shape.lanes
    ] == [
        ("main", None, 0, 30, 0),
        ("the river", 1, 12, 23, 1),
        ("the caves", 2, 16, 21, 2),
    ]
    assert [lane.takes for lane in shape.lanes] == [((7, 3), (19, 3)), ((17, 2),), ()]
    # The story stands on the river at entry 21, two entries short of its tip.
    assert (shape.head_lane, shape.head_index, shape.at_tip) == (2, 21, False)
    assert shape.current_line() == {2: (12, 21), 1: (0, 12)}
    assert [(p.name, p.lane_id, p.index) for p in shape.save_points] == [
        ("camp", 1, 10),
        ("bridge", 2, 18),
    ]
    assert [(c.name, c.lane_id, c.index) for c in shape.chapters] == [("The Gate", 1, 8)]
    assert draw_tree(shape).splitlines() == [
        "main ━━━━━━━━━━━━━━━━━━━━━━━━…● 30  ⚑camp@10 §The Gate@8 ↻2",
        "┗the river from 12 ━━━━━━━━━━━● 23  ◀ at 21  ⚑bridge@18 ↻1",
        "  ┗the caves from 16 ━━━━━● 21",
    ]


def test_the_picture_shows_lanes_the_current_line_and_each_mark():
    branches, entries = story()
    shape = build_shape(
        branches,
        entries,
        2,
        108,
        [("camp", 1, 11), ("bridge", 2, 105)],
        [("The Gate", 9), ("The Gate", 9), ("The Ford", 106)],  # a retold end is one mark
    )
    image = pixels(draw_png(shape))
    assert len(lane_rows(image)) == 3
    # The current line runs on main and the river, not the caves.
    assert bands(image, CURRENT) == 2 + LEGEND
    assert blobs(image, SAVE_POINT) == 2 + LEGEND
    assert blobs(image, CHAPTER) == 2 + LEGEND
    assert blobs(image, TAKES) == 3 + LEGEND
    assert blobs(image, HEAD) == 1 + LEGEND
    # Where the story stands: on the river's lane (the second), at entry 21 of 0–30.
    ring_y, ring_x = np.nonzero(mask(image, HEAD))
    river = lane_rows(image)[1]
    drawn = ring_y < river + 100  # the legend's key is far below
    assert abs(float(ring_y[drawn].mean()) - river) < 3
    assert abs(float(ring_x[drawn].mean()) - (72 + 21 * (WIDTH - 2 * 72) / 30)) < 3

    said = describe(shape, len(shape.lanes))
    assert "3 branches over 31 entries" in said and "the river, at entry 21" in said
    assert "camp at 10" in said and "The Ford at 19" in said and len(said) <= DESCRIPTION_MAX


def test_a_story_without_forks_is_one_lane_at_its_tip():
    entries = {1: Entry(None, 0, 1), 2: Entry(1, 1, 1), 3: Entry(2, 2, 1)}
    shape = build_shape([BranchRow(5, "main", 3)], entries, 5, 3, [], [])
    assert shape.at_tip and draw_tree(shape) == "main ━━● 2  ◀ here"
    image = pixels(draw_png(shape))
    assert len(lane_rows(image)) == 1
    assert blobs(image, HEAD) == 1 + LEGEND
    assert blobs(image, SAVE_POINT) == LEGEND and blobs(image, TAKES) == LEGEND


def test_without_dejavu_the_picture_is_drawn_in_pillows_own_font(monkeypatch):
    # A system without DejaVu Sans (a slim container image): Pillow's font, no failure.
    by_name = ImageFont.truetype

    def missing(font, *args, **kwargs):
        if isinstance(font, str):  # a font looked for on the system (Pillow's own is bytes)
            raise OSError("cannot open resource")
        return by_name(font, *args, **kwargs)

    monkeypatch.setattr(ImageFont, "truetype", missing)
    branches, entries = story()
    shape = build_shape(branches, entries, 2, 110, [("camp", 1, 11)], [])
    image = pixels(draw_png(shape))
    assert len(lane_rows(image)) == 3
    assert blobs(image, SAVE_POINT) == 1 + LEGEND and blobs(image, HEAD) == 1 + LEGEND


def test_a_current_line_deeper_than_the_picture_shows_its_nearest_lanes():
    # Thirty branches, each after the second leaving the one before at its tip; the story stands
    # at the tip of the last.
    entries = {1: Entry(None, 0, 1), 2: Entry(1, 1, 1), 3: Entry(2, 2, 1)}
    branches = [BranchRow(1, "main", 3)]
    for k in range(2, 31):
        fork_at = 100 * (k - 1) + 1 if k > 2 else 2
        entries[100 * k] = Entry(fork_at, entries[fork_at].index + 1, 1)
        entries[100 * k + 1] = Entry(100 * k, entries[fork_at].index + 2, 1)
        branches.append(BranchRow(k, f"b{k}", 100 * k + 1))
    shape = build_shape(branches, entries, 30, 3001, [], [])
    assert [lane.depth for lane in shape.lanes] == list(range(30))
    assert shape.at_tip and len(shape.current_line()) == 30
    image = pixels(draw_png(shape))
    assert len(lane_rows(image)) == LANES_DRAWN_MAX
    assert bands(image, CURRENT) == LANES_DRAWN_MAX + LEGEND
    assert blobs(image, HEAD) == 1 + LEGEND
    said = describe(shape, LANES_DRAWN_MAX)
    assert f"30 branches over 60 entries, {LANES_DRAWN_MAX} of them drawn" in said
    assert "The story stands on b30, at its newest entry." in said
    assert "Forks: b2 at entry 1, b3 at entry 3" in said and "and 23 more" in said


def test_a_story_read_from_its_newest_entries_starts_where_the_reading_did():
    # Entries 0–99 were not read (a story past NODES_READ_MAX): main starts at 100.
    entries = {n: Entry(n - 1 if n > 100 else 99, n, 1) for n in range(100, 130)}
    shape = build_shape(
        [BranchRow(1, "main", 129)],
        entries,
        1,
        129,
        [("old", 1, 12)],  # on an entry not read: not drawn
        [],
        cut=True,
    )
    (lane,) = shape.lanes
    assert (lane.start, lane.tip, shape.first_index, shape.save_points) == (100, 129, 100, ())
    assert "(the newest; older ones are not drawn)" in describe(shape, 1)
    assert len(lane_rows(pixels(draw_png(shape)))) == 1


# --- through Discord ----------------------------------------------------------------------------


async def test_tree_attaches_a_picture_of_forks_takes_save_points_and_chapters(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("One.", "One, again.", "Two.", "Another two.")
    first, _ = await act(env, thread, env.alice, "one")
    await env.fake.press(env.alice, first.id, label="Retry")  # entry 2 has two takes
    await env.done()
    await env.fake.slash(env.alice, thread, "savepoint add", name="camp")
    await env.done()
    await act(env, thread, env.alice, "two")
    main_tip = (await adventure_here(env, thread)).head_node_id
    await env.fake.slash(env.alice, thread, "savepoint restore", name="camp")
    await env.done()
    await act(env, thread, env.alice, "other")  # a fork: "fork 2" leaves main at entry 2
    adventure = await adventure_here(env, thread)
    async with env.bot.services.db.session() as session, session.begin():
        # A chapter that ended on main's last turn (its recap is what marks the end).
        session.add(
            ChapterRecap(
                adventure_id=adventure.id, chapter_id="gate", title="The Gate", node_id=main_tip
            )
        )

    record = await env.fake.slash(env.bob, thread, "tree")
    await env.done()
    shown = answer(env, record)
    assert shown.visible_to == env.bob
    # The text is still sent: the diagram the console and screen readers read.
    drawn = shown.embeds[0]["description"]
    assert drawn.startswith("```") and "⚑camp@2" in drawn and "§The Gate@4" in drawn
    assert "fork 2 from 2" in drawn and "↻1" in drawn
    (picture,) = shown.attachments
    assert picture.filename == "story-tree.png"
    assert len(picture.content) <= PNG_BYTES_MAX
    assert picture.description and len(picture.description) <= DESCRIPTION_MAX
    assert "2 branches" in picture.description and "camp at 2" in picture.description

    image = pixels(picture.content)
    assert len(lane_rows(image)) == 2
    assert bands(image, CURRENT) == 2 + LEGEND  # main to the fork, then fork 2 to its tip
    assert blobs(image, SAVE_POINT) == 1 + LEGEND
    assert blobs(image, CHAPTER) == 1 + LEGEND
    assert blobs(image, TAKES) == 1 + LEGEND
    assert blobs(image, HEAD) == 1 + LEGEND


async def huge_story(env: DiscordEnv, thread: int, *, length: int, forks: int) -> None:
    """A story far past what a picture can show entry by entry: ``length`` entries on main,
    ``forks`` branches of five entries leaving it along the way, a save point and a chapter
    end every few turns, a third of the turns retold. Written as rows (playing them would take
    an hour); ids from a million up, clear of the rows the test played."""
    adventure = await adventure_here(env, thread)
    async with env.bot.services.db.session() as session, session.begin():
        opening = await session.get(StoryNode, adventure.head_node_id)
        assert opening is not None
        nodes, parent, next_id = [], opening.id, 1_000_000

        def entry(parent_id: int, index: int) -> int:
            nonlocal next_id
            next_id += 1
            nodes.append(
                StoryNode(
                    id=next_id,
                    adventure_id=adventure.id,
                    parent_id=parent_id,
                    index=index,
                    role=Role.NARRATOR,
                    action=ActionType.CONTINUE,
                    text=f"Entry {index}.",
                    take_count=3 if index % 3 == 0 else 1,
                )
            )
            return next_id

        main = []
        for index in range(1, length):
            parent = entry(parent, index)
            main.append(parent)
        session.add_all(nodes)
        await session.flush()
        tips = []
        for k in range(forks):
            at = main[(k * 37) % (length - 10)]
            tip = at
            for step in range(5):
                tip = entry(tip, (k * 37) % (length - 10) + 2 + step)
            tips.append(tip)
        session.add_all(nodes[length - 1 :])
        await session.flush()
        await session.execute(
            update(Branch).where(Branch.adventure_id == adventure.id).values(tip_node_id=main[-1])
        )
        branches = [
            Branch(adventure_id=adventure.id, name=f"path {k}", tip_node_id=tip)
            for k, tip in enumerate(tips)
        ]
        session.add_all(branches)
        await session.flush()
        main_branch = await session.scalar(
            select(Branch.id).where(Branch.adventure_id == adventure.id, Branch.name == "main")
        )
        session.add_all(
            SavePoint(adventure_id=adventure.id, branch_id=main_branch, node_id=n, name=f"p{i}")
            for i, n in enumerate(main[::20])
        )
        session.add_all(
            ChapterRecap(
                adventure_id=adventure.id, chapter_id=f"c{i}", title=f"Chapter {i}", node_id=n
            )
            for i, n in enumerate(main[::60])
        )
        await session.execute(
            update(Adventure)
            .where(Adventure.id == adventure.id)
            .values(head_node_id=tips[-1], active_branch_id=branches[-1].id)
        )


async def test_a_huge_story_stays_within_the_picture_bounds_and_time(env, fake_model):
    thread = await env.start_thread()
    await huge_story(env, thread, length=3_000, forks=60)

    started = time.perf_counter()
    record = await env.fake.slash(env.bob, thread, "tree")
    await env.done()
    took = time.perf_counter() - started
    shown = answer(env, record)
    (picture,) = shown.attachments
    assert len(picture.content) <= PNG_BYTES_MAX
    image = pixels(picture.content)  # no taller than HEIGHT_MAX
    # Eight lanes of sixty-one: the current line's and the newest; the others are counted.
    assert len(lane_rows(image)) == LANES_DRAWN_MAX
    assert picture.description and "61 branches over 3000 entries" in picture.description
    assert f"{LANES_DRAWN_MAX} of them drawn" in picture.description
    # Marks close together are drawn once: far fewer than the story's 150 save points.
    assert LEGEND < blobs(image, SAVE_POINT) <= WIDTH // 24 + LEGEND
    assert took < 20, f"/tree took {took:.1f} s"  # generous: the suite shares its cores

    # The text is still sent, paged; a page turn keeps the picture and draws none.
    assert "Page 1/" in shown.embeds[0]["footer"]["text"]
    pressed = await env.fake.press(env.bob, shown.id, label="▶")
    await env.done()
    turned = env.fake.message(shown.id)
    assert "Page 2/" in turned.embeds[0]["footer"]["text"]
    assert [a.content for a in turned.attachments] == [picture.content]
    assert pressed.response_type == 7
