"""The story's shape (``shape``) in words: a compact text diagram for /tree, the console and
screen readers, and the short description that goes with the image as its alt text."""

from __future__ import annotations

from engine.story.tree.shape import TreeShape

#: Discord's most for an attachment's description, its alt text (discord-api-docs, Message,
#: Attachment Object: "description (alt text) for the file (max 1024 characters)").
DESCRIPTION_MAX = 1024
#: Named in the description before the rest are counted: it is read aloud.
DESCRIBED_MAX = 6
BAR_MAX = 24


def draw_tree(shape: TreeShape) -> str:
    """One row per branch, indented under the branch it leaves: where it leaves, its length,
    its newest entry, where the story stands, its save points, chapter ends and retold turns."""
    rows: list[str] = []
    # By lane first: a story may have thousands of branches and hundreds of marks.
    points: dict[int | None, list[str]] = {}
    for point in shape.save_points:
        points.setdefault(point.branch_id, []).append(f"⚑{point.name}@{point.index}")
    ends: dict[int | None, list[str]] = {}
    for end in shape.chapters:
        ends.setdefault(end.lane_id, []).append(f"§{end.name}@{end.index}")
    for lane in shape.lanes:
        length = max(lane.tip - lane.start, 0)
        bar = "━" * min(length, BAR_MAX) + ("…" if length > BAR_MAX else "")
        prefix = "  " * (lane.depth - 1) + "┗" if lane.depth else ""
        where = f"from {lane.start} " if lane.parent_id is not None else ""
        text = f"{prefix}{lane.name} {where}{bar}● {lane.tip}"
        if lane.branch_id == shape.active_id:
            text += "  ◀ here" if shape.at_tip else f"  ◀ at {shape.head_index}"
        marks = [*points.get(lane.branch_id, []), *ends.get(lane.branch_id, [])]
        if lane.takes:
            marks.append(f"↻{len(lane.takes)}")
        if marks:
            text += "  " + " ".join(marks)
        rows.append(text)
    return "\n".join(rows)


def _named(names: list[str], noun: str) -> str:
    shown = ", ".join(names[:DESCRIBED_MAX])
    more = len(names) - DESCRIBED_MAX
    return f"{noun}: {shown}" + (f" and {more} more" if more > 0 else "")


def describe(shape: TreeShape, drawn: int) -> str:
    """The image in a few sentences, at most ``DESCRIPTION_MAX`` characters: what a screen
    reader says for it. ``drawn``: how many of the branches the image shows."""
    lanes = shape.lanes
    span = shape.last_index - shape.first_index
    parts = [
        f"The story's tree: {len(lanes)} branch{'es' if len(lanes) != 1 else ''} over "
        f"{span + 1} entries"
        + (" (the newest; older ones are not drawn)" if shape.cut else "")
        + (f", {drawn} of them drawn" if drawn < len(lanes) else "")
        + "."
    ]
    head = shape.lane(shape.head_lane)
    if head is not None:
        where = "its newest entry" if shape.at_tip else f"entry {shape.head_index}"
        parts.append(f"The story stands on {head.name}, at {where}.")
    forks = [f"{lane.name} at entry {lane.start}" for lane in lanes if lane.parent_id is not None]
    if forks:
        parts.append(_named(forks, "Forks") + ".")
    if shape.save_points:
        parts.append(
            _named([f"{p.name} at {p.index}" for p in shape.save_points], "Save points") + "."
        )
    if shape.chapters:
        parts.append(
            _named([f"{c.name} at {c.index}" for c in shape.chapters], "Chapters end") + "."
        )
    retold = sum(len(lane.takes) for lane in lanes)
    if retold:
        parts.append(f"{retold} turn{'s have' if retold != 1 else ' has'} several takes.")
    text = " ".join(parts)
    return text if len(text) <= DESCRIPTION_MAX else text[: DESCRIPTION_MAX - 1] + "…"
