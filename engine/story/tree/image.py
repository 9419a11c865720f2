"""The story's shape (``shape``) as a picture for /tree: a PNG drawn with Pillow, made to be read
on a phone.

1080 pixels wide (a phone's screen at full resolution: Discord shrinks it to the width it has),
large type, light marks on a dark ground, one lane a branch, left to right by entry. A lane
starts where its branch leaves the one above it (a connector drops from there), the path from
the story's start to where it stands is drawn thick in amber, and the marks sit on the lines:
flags for save points, diamonds for chapter ends, dots for turns with several takes, a ring
where the story stands. At most :data:`LANES_DRAWN_MAX` lanes are drawn (the current line's
first, then the newest) and marks closer than a few pixels are drawn once, so the picture's
size and the work of drawing it are bounded whatever the story holds; what is left out is said
under it, and the text diagram beside it lists everything.
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from PIL import Image, ImageDraw, ImageFont

from engine.story.tree.shape import Lane, TreeShape

log = logging.getLogger(__name__)

T = TypeVar("T")

WIDTH = 1080
MARGIN = 48
HEADER_H = 190
LANE_H = 170
#: A lane's line, below its name and its save points' flags.
LINE_Y = 115
LEGEND_ROW_H = 58
#: The most lanes drawn: the picture stays about one phone screen and a half tall.
LANES_DRAWN_MAX = 8
#: A lane's line is at least this long, so a branch one turn long still shows.
LANE_MIN_PX = 72
#: Marks of one kind on one lane closer than this are drawn once.
MARK_BUCKET_PX = 24
#: How long drawing may take before the answer goes without the picture (it takes well under
#: a tenth of that; the bound is for a process starved of its cores).
RENDER_SECONDS = 5.0

# High contrast on a dark ground of its own, the same in Discord's light and dark themes.
# Each mark has a colour nothing else in the picture uses (the tests find marks by colour).
GROUND = (24, 25, 28)
TEXT = (242, 243, 245)
TEXT_DIM = (181, 186, 193)
BRANCH = (128, 140, 166)
CURRENT = (255, 176, 32)
HEAD = (255, 255, 255)
SAVE_POINT = (60, 220, 120)
CHAPTER = (80, 200, 255)
TAKES = (205, 120, 255)

LINE_W = 12
CURRENT_W = 20
CONNECTOR_W = 6


Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


def _font(size: int, *, bold: bool = False) -> Font:
    """DejaVu Sans where the system has it (it has glyphs for most scripts players write
    names in), else Pillow's own font at that size."""
    try:
        return ImageFont.truetype("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf", size)
    except OSError:
        return ImageFont.load_default(size)


def lanes_drawn(shape: TreeShape) -> list[Lane]:
    """The lanes the picture has room for, in the shape's order: the current line's, then the
    newest branches, each with the lanes it leaves from (so every drawn lane hangs from one
    drawn above it, or starts the picture)."""
    by_id = {lane.branch_id: lane for lane in shape.lanes}
    chosen: set[int] = set()
    current = list(shape.current_line())  # the head's lane first, then up
    newest = sorted((lane.branch_id for lane in shape.lanes), reverse=True)
    for branch_id in [*current, *newest]:
        chain: list[int] = []
        lane = by_id.get(branch_id)
        room = LANES_DRAWN_MAX - len(chosen)
        # A walk ends where a drawn lane is reached, or once it could not fit: a few steps each.
        while lane is not None and lane.branch_id not in chosen and len(chain) <= room:
            chain.append(lane.branch_id)
            lane = by_id.get(lane.parent_id) if lane.parent_id is not None else None
        if len(chosen) + len(chain) <= LANES_DRAWN_MAX:
            chosen.update(chain)
        elif not chosen:  # a current line deeper than the picture: its nearest lanes
            chosen.update(chain[:LANES_DRAWN_MAX])
        if len(chosen) >= LANES_DRAWN_MAX:
            break
    return [lane for lane in shape.lanes if lane.branch_id in chosen]


def _fit(draw: ImageDraw.ImageDraw, text: str, font: Font, width: float) -> str:
    """``text`` cut with an ellipsis to ``width`` pixels (a name is at most 50 characters, so
    this measures a few dozen times at most)."""
    if draw.textlength(text, font=font) <= width:
        return text
    while text and draw.textlength(text + "…", font=font) > width:
        text = text[:-1]
    return text + "…"


@dataclass(frozen=True, slots=True)
class _Scale:
    """Where an entry is across the picture: linear in its index over the story's span, except
    that a lane shorter than ``LANE_MIN_PX`` is drawn that long, its entries spread along it."""

    first: int
    last: int
    left: int = MARGIN + 24
    right: int = WIDTH - MARGIN - 24

    def x(self, index: int) -> int:
        index = min(max(index, self.first), self.last)
        span = max(self.last - self.first, 1)
        return round(self.left + (index - self.first) * (self.right - self.left) / span)

    def ends(self, lane: Lane) -> tuple[int, int]:
        a = self.x(lane.start)
        return a, min(max(self.x(lane.tip), a + LANE_MIN_PX), WIDTH - MARGIN)

    def on(self, lane: Lane, index: int) -> int:
        a, b = self.ends(lane)
        if lane.tip <= lane.start:
            return b if index >= lane.tip else a
        index = min(max(index, lane.start), lane.tip)
        return round(a + (index - lane.start) * (b - a) / (lane.tip - lane.start))


def _buckets(items: Iterable[T], x_of: Callable[[T], int]) -> list[tuple[T, int]]:
    """Each item with its x, those closer than ``MARK_BUCKET_PX`` to one before drawn once:
    at most a few dozen marks a lane, however many the story has."""
    seen: set[int] = set()
    kept = []
    for item in items:
        x = x_of(item)
        if x // MARK_BUCKET_PX not in seen:
            seen.add(x // MARK_BUCKET_PX)
            kept.append((item, x))
    return kept


def draw_png(shape: TreeShape) -> bytes:
    """The picture of ``shape``, as PNG bytes (tens of kilobytes: flat colours compress)."""
    lanes = lanes_drawn(shape)
    left = len(shape.lanes) - len(lanes)
    height = HEADER_H + LANE_H * max(len(lanes), 1) + (60 if left else 0)
    height += 30 + LEGEND_ROW_H * 3 + MARGIN
    image = Image.new("RGB", (WIDTH, height), GROUND)
    draw = ImageDraw.Draw(image)
    body, small = _font(40), _font(32)
    scale = _Scale(shape.first_index, max(shape.last_index, shape.first_index + 1))
    _header(draw, shape, scale, small)
    rows = {lane.branch_id: HEADER_H + row * LANE_H for row, lane in enumerate(lanes)}
    _lines(draw, shape, lanes, rows, scale)
    for lane in lanes:
        _marks(draw, shape, lane, rows[lane.branch_id], scale, body, small)
    head = shape.lane(shape.head_lane)
    if head is not None and head.branch_id in rows:
        x, y = scale.on(head, shape.head_index), rows[head.branch_id] + LINE_Y
        _ring(draw, x, y)
    y = HEADER_H + LANE_H * max(len(lanes), 1)
    if not lanes:
        draw.text((MARGIN, HEADER_H + 40), "No turns yet.", font=body, fill=TEXT)
    if left:
        more = f"+ {left} more branch{'es' if left != 1 else ''}: see the list with it"
        draw.text((MARGIN, y), more, font=small, fill=TEXT_DIM)
        y += 60
    _legend(draw, y + 30, small)
    out = io.BytesIO()
    # Not ``optimize``: it takes several times longer for a few kilobytes less.
    image.save(out, format="PNG")
    return out.getvalue()


def _header(draw: ImageDraw.ImageDraw, shape: TreeShape, scale: _Scale, small: Font) -> None:
    draw.text((MARGIN, 28), "The story's tree", font=_font(54, bold=True), fill=TEXT)
    count = len(shape.lanes)
    summary = f"{shape.last_index - shape.first_index + 1} entries · {count} branch"
    summary += ("es" if count != 1 else "") + (" · the newest only" if shape.cut else "")
    draw.text((MARGIN, 96), summary, font=small, fill=TEXT_DIM)
    # The scale: which entries the picture's left and right edges are.
    draw.text((scale.left, 146), str(shape.first_index), font=small, fill=TEXT_DIM, anchor="lt")
    draw.text((scale.right, 146), str(shape.last_index), font=small, fill=TEXT_DIM, anchor="rt")


def _lines(
    draw: ImageDraw.ImageDraw,
    shape: TreeShape,
    lanes: list[Lane],
    rows: dict[int, int],
    scale: _Scale,
) -> None:
    """Each lane's line and the connector down from where it leaves its parent, the current
    line over them in amber."""
    current = shape.current_line()
    for lane in lanes:
        y = rows[lane.branch_id] + LINE_Y
        a, b = scale.ends(lane)
        parent = rows.get(lane.parent_id) if lane.parent_id is not None else None
        if parent is not None:
            on_line = lane.branch_id in current and lane.parent_id in current
            colour = CURRENT if on_line else BRANCH
            draw.line([(a, parent + LINE_Y), (a, y)], fill=colour, width=CONNECTOR_W)
        draw.line([(a, y), (b, y)], fill=BRANCH, width=LINE_W)
        if lane.branch_id in current:
            start, end = current[lane.branch_id]
            line = [(scale.on(lane, start), y), (scale.on(lane, end), y)]
            draw.line(line, fill=CURRENT, width=CURRENT_W)


def _marks(
    draw: ImageDraw.ImageDraw,
    shape: TreeShape,
    lane: Lane,
    top: int,
    scale: _Scale,
    body: Font,
    small: Font,
) -> None:
    """A lane's name and span, and its marks: takes, chapter ends, save points (named where
    there is room)."""
    y = top + LINE_Y
    # A hyphen, not a dash: Pillow's own font (where DejaVu is missing) has no dash.
    where = f"{lane.start}-{lane.tip}"
    room = WIDTH - 2 * MARGIN - draw.textlength(where, font=small) - 32
    draw.text((MARGIN, top + 8), _fit(draw, lane.name, body, room), font=body, fill=TEXT)
    draw.text((WIDTH - MARGIN, top + 16), where, font=small, fill=TEXT_DIM, anchor="ra")
    for _, x in _buckets(lane.takes, lambda take: scale.on(lane, take[0])):
        draw.ellipse([x - 9, y - 9, x + 9, y + 9], fill=TAKES)
    ends = [c for c in shape.chapters if c.lane_id == lane.branch_id]
    for _, x in _buckets(ends, lambda end: scale.on(lane, end.index)):
        draw.polygon([(x, y - 17), (x + 17, y), (x, y + 17), (x - 17, y)], fill=CHAPTER)
    points = sorted(
        (p for p in shape.save_points if p.lane_id == lane.branch_id), key=lambda p: p.index
    )
    label_end = -1.0
    for point, x in _buckets(points, lambda point: scale.on(lane, point.index)):
        _flag(draw, x, y)
        label = _fit(draw, point.name, small, 260)
        width = draw.textlength(label, font=small)
        # Named left to right where a name fits: the others are in the list and the alt text.
        if x > label_end and x + width <= WIDTH - 8:
            draw.text((x, y + 24), label, font=small, fill=TEXT_DIM)
            label_end = x + width + 16


def _ring(draw: ImageDraw.ImageDraw, x: int, y: int) -> None:
    draw.ellipse([x - 24, y - 24, x + 24, y + 24], fill=HEAD)
    draw.ellipse([x - 14, y - 14, x + 14, y + 14], fill=CURRENT)


def _flag(draw: ImageDraw.ImageDraw, x: int, y: int) -> None:
    draw.rectangle([x - 2, y - 52, x + 2, y - 12], fill=SAVE_POINT)
    draw.polygon([(x + 2, y - 52), (x + 30, y - 42), (x + 2, y - 32)], fill=SAVE_POINT)


def _legend(draw: ImageDraw.ImageDraw, y: int, font: Font) -> None:
    """What each colour and mark means, one key of each (drawn as the picture draws it)."""
    half = WIDTH // 2
    keys = [
        (MARGIN, y, "the story so far"),
        (half, y, "other branches"),
        (MARGIN, y + LEGEND_ROW_H, "where it stands"),
        (half, y + LEGEND_ROW_H, "save point"),
        (MARGIN, y + 2 * LEGEND_ROW_H, "end of a chapter"),
        (half, y + 2 * LEGEND_ROW_H, "turn with takes"),
    ]
    for number, (x, top, label) in enumerate(keys):
        mid = top + 20
        if number == 0:
            draw.line([(x, mid), (x + 60, mid)], fill=CURRENT, width=CURRENT_W)
        elif number == 1:
            draw.line([(x, mid), (x + 60, mid)], fill=BRANCH, width=LINE_W)
        elif number == 2:
            _ring(draw, x + 30, mid)
        elif number == 3:
            _flag(draw, x + 20, mid + 26)
        elif number == 4:
            draw.polygon(
                [(x + 30, mid - 17), (x + 47, mid), (x + 30, mid + 17), (x + 13, mid)],
                fill=CHAPTER,
            )
        else:
            draw.ellipse([x + 21, mid - 9, x + 39, mid + 9], fill=TAKES)
        draw.text((x + 80, mid), label, font=font, fill=TEXT, anchor="lm")


async def render_png(shape: TreeShape) -> bytes | None:
    """``draw_png`` in a worker thread (it takes tens of milliseconds, too long for the event
    loop), or None when it fails or takes longer than ``RENDER_SECONDS``: the text goes alone."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(draw_png, shape), RENDER_SECONDS)
    except TimeoutError:
        log.warning("the story's picture took over %s s; sent without it", RENDER_SECONDS)
    except Exception:
        log.exception("the story's picture could not be drawn; sent without it")
    return None
