"""Editing any entry of the current line: a player's action or a narration, old or newest.

As the tools players come from do: AI Dungeon's Edit "allows you to directly edit previous
inputs and outputs" (help.aidungeon.com/faq/how-to-play, "Edit"); SillyTavern puts an Edit
button "on any message" (docs.sillytavern.app/usage/chatting).

An edit is a new take of the entry's node (``takes.add_take``), so every wording is kept and
the one before can come back (``undo_edit``). Only the text changes: the world, script and
story state the entry led to stay as they are, so the story after it stays too. Memories and
the summary written from the entry on describe the old wording, so they are cut back
(``story_cut_back``) and the cadence writes them again from the new text; the prompt of the
next turn reads the line, and so the new text, as it is.

Which entry: one of the current line (the head's ancestry), at most ``EDIT_BACK_MAX`` entries
back, so a form or button naming a node of another line, adventure or server is refused. Who:
the rule of every rewrite (``check_may_rewrite``: the action's author, the host, members who
manage the server or its messages). A node is shared by every branch that borrows it
(``branches``), so an edit shows wherever the story passes through that entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from sqlmodel import col

from engine.errors import InvalidInput, NotFound, StoryMovedOn
from engine.people.access.checks import check_may_rewrite
from engine.people.access.rules import Actor, adventure_here
from engine.platform.sanitise import sanitise
from engine.prompt.tokens import count_tokens
from engine.storage.models import Adventure, Role, StoryNode, Take, undefer_field
from engine.story.line.positions import story_cut_back
from engine.story.rounds import ROUND_MAX
from engine.story.tree.core import HeadMove, TreeCore
from engine.story.tree.takes import add_take
from engine.story.versions import advance_version

#: The longest turn text an edit accepts: what one Discord text input holds.
EDIT_MAX_CHARS = 4000
#: How far back (in story entries) an entry may be edited: bounds the walk up the line that
#: finds it, as ``UNDO_BACK_MAX`` does for an undo from a report.
EDIT_BACK_MAX = 200
#: The characters of an entry a list of entries shows (an autocomplete choice holds 100).
EXCERPT_CHARS = 70
#: Entries a list offers at most (Discord's autocomplete shows 25 choices).
CHOICES_MAX = 25

FORM_STALE = "The story moved on while the form was open; nothing was saved."


@dataclass(frozen=True, slots=True)
class TurnText:
    """An entry's live text, for a form prefilled with it."""

    adventure_id: int
    node_id: int
    version: int
    text: str
    index: int = 0
    is_action: bool = False
    is_head: bool = True


@dataclass(frozen=True, slots=True)
class EntryChoice:
    """One entry of the current line, for a list to choose from."""

    index: int
    is_action: bool
    excerpt: str


@dataclass(frozen=True, slots=True)
class EntryEdit:
    """An entry's text changed (an edit, or an edit undone), and what shows it now."""

    #: Where the story stands (unmoved), under the new version.
    move: HeadMove
    node_id: int
    index: int
    is_action: bool
    is_head: bool
    #: The entry's live text now.
    text: str
    #: What the messages showing it show: for an action, the line of its turn's actions (a
    #: round's several, one a line), else the text itself.
    shown_text: str
    #: The nodes whose messages show ``shown_text`` (a round's actions share one line).
    shown_node_ids: tuple[int, ...]
    take: int
    take_count: int
    #: The take that was live before (the one an undo of this edit brings back).
    previous_take: int


@dataclass(frozen=True, slots=True)
class _Entry:
    id: int
    index: int
    role: Role
    excerpt: str


async def _line_entries(session: AsyncSession, head_id: int, limit: int) -> list[_Entry]:
    """The last ``limit`` entries of the line ending at ``head_id``, newest first, each with
    the start of its text only (a list of them is read at every keystroke)."""
    step = aliased(StoryNode)
    line = (
        select(col(StoryNode.id), col(StoryNode.parent_id), literal(1).label("depth"))
        .where(col(StoryNode.id) == head_id)
        .cte("edit_line", recursive=True)
    )
    line = line.union_all(
        select(col(step.id), col(step.parent_id), (line.c.depth + 1).label("depth"))
        .join(line, col(step.id) == line.c.parent_id)
        .where(line.c.depth < limit)
    )
    rows = await session.execute(
        select(
            col(StoryNode.id),
            # Labelled: ``row.index`` would be the method every sequence has by that name.
            col(StoryNode.index).label("node_index"),
            col(StoryNode.role),
            func.substr(col(StoryNode.text), 1, EXCERPT_CHARS * 2).label("start"),
        )
        .join(line, col(StoryNode.id) == line.c.id)
        .order_by(col(StoryNode.index).desc())
    )
    return [_Entry(row.id, row.node_index, Role(row.role), row.start) for row in rows]


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1].rstrip() + "…"


class EntryEdits(TreeCore):
    """/edit of any entry of the current line, and its undo."""

    async def entries(self, channel_id: int, typed: str = "") -> list[EntryChoice]:
        """The current line's entries that may be edited, newest first, those matching
        ``typed`` (an entry's number, or words of its text), at most ``CHOICES_MAX``."""
        async with self.db.session() as session:
            # Read only, so offered while a turn is being written too (the form then waits).
            adventure = await adventure_here(session, channel_id)
            if adventure.head_node_id is None:
                return []
            line = await _line_entries(session, adventure.head_node_id, EDIT_BACK_MAX + 1)
        typed = " ".join(typed.split()).casefold()
        choices = []
        for entry in line:
            excerpt = _excerpt(entry.excerpt)
            if typed and not (str(entry.index).startswith(typed) or typed in excerpt.casefold()):
                continue
            choices.append(EntryChoice(entry.index, entry.role == Role.PLAYER, excerpt))
            if len(choices) == CHOICES_MAX:
                break
        return choices

    async def _on_line(
        self,
        session: AsyncSession,
        adventure: Adventure,
        *,
        index: int | None = None,
        node_id: int | None = None,
    ) -> tuple[StoryNode, StoryNode, list[_Entry]]:
        """The head, the entry (by its number on the line, or its node), and the line from
        the entry to the head (newest first); refused unless the entry is on the current line
        within ``EDIT_BACK_MAX``."""
        head = await self._head(session, adventure)
        assert head.id is not None
        node = None
        if node_id is not None:
            node = await session.get(StoryNode, node_id)
            if node is None or node.adventure_id != adventure.id:
                raise NotFound("That entry is not in this adventure; nothing was changed.")
            index = node.index
        elif index is None:
            index = head.index
        elif not 0 <= index <= head.index:
            raise NotFound(
                f"There is no entry {index} on the story's current line: its entries are "
                f"numbered 0 (the opening) to {head.index}."
            )
        back = head.index - index
        if back > EDIT_BACK_MAX:
            raise InvalidInput(
                f"That entry is {back} entries back; an edit reaches {EDIT_BACK_MAX} back at most."
            )
        line = await _line_entries(session, head.id, back + 1) if back >= 0 else []
        if not line or len(line) != back + 1 or (node is not None and line[-1].id != node.id):
            raise InvalidInput(
                "That entry is not on the story's current line (it was undone, or it is on "
                "another branch), so it cannot be edited from here."
            )
        if node is None:
            node = await session.get(StoryNode, line[-1].id)
            assert node is not None
        return head, node, line

    async def turn_to_edit(
        self, actor: Actor, channel_id: int, index: int | None = None
    ) -> TurnText:
        """An entry's text (the newest without ``index``), for a form prefilled with it
        (checked before the form opens, and again when it is sent)."""
        async with self.db.session() as session:
            adventure = await self._adventure(session, channel_id, None)
            head, node, _ = await self._on_line(session, adventure, index=index)
            await check_may_rewrite(session, adventure, node, actor)
            if len(node.text) > EDIT_MAX_CHARS:
                raise InvalidInput(
                    f"This entry is {len(node.text)} characters long, more than a form holds "
                    f"({EDIT_MAX_CHARS}); it cannot be edited here."
                )
            assert adventure.id is not None and node.id is not None
            return TurnText(
                adventure.id,
                node.id,
                adventure.version,
                node.text,
                node.index,
                node.role == Role.PLAYER,
                node.id == head.id,
            )

    async def edit(
        self,
        actor: Actor,
        channel_id: int,
        text: str,
        *,
        node_id: int,
        seen_version: int,
    ) -> EntryEdit:
        """Correct an entry's text; the wording before stays as a take."""
        text = sanitise(text).strip()
        if not text:
            raise InvalidInput("An entry cannot be empty; nothing was changed.")
        if len(text) > EDIT_MAX_CHARS:
            raise InvalidInput(f"An entry can be at most {EDIT_MAX_CHARS} characters long.")
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, None)
            if adventure.version != seen_version:
                raise StoryMovedOn(FORM_STALE)
            head, node, line = await self._on_line(session, adventure, node_id=node_id)
            await check_may_rewrite(session, adventure, node, actor)
            if text == node.text:
                raise InvalidInput("The text is unchanged; nothing was saved.")
            previous = node.live_take
            row = (
                await session.execute(
                    select(
                        col(StoryNode.state_after),
                        col(StoryNode.state_block),
                        col(StoryNode.state_report),
                    ).where(col(StoryNode.id) == node.id)
                )
            ).one()
            # The state the entry led to stays: only the words change.
            await add_take(
                session,
                node,
                text=text,
                reasoning=None,
                snapshot=row.state_after,
                block=row.state_block,
                report=row.state_report,
            )
            return await self._changed(session, adventure, head, node, line, previous, actor)

    async def undo_edit(
        self,
        actor: Actor,
        channel_id: int,
        *,
        adventure_id: int,
        node_id: int,
        take: int,
        previous: int,
    ) -> EntryEdit:
        """Bring back take ``previous`` of an entry that an edit made take ``take``: its words
        only, as the edit changed nothing else. Refused once the entry changed again."""
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, None, adventure_id)
            head, node, line = await self._on_line(session, adventure, node_id=node_id)
            await check_may_rewrite(session, adventure, node, actor)
            if node.live_take != take or not 1 <= previous <= node.take_count:
                raise StoryMovedOn(
                    "This entry changed again since that edit; /edit shows its words now."
                )
            if previous == take:
                raise InvalidInput("That edit is already undone.")
            earlier = await session.scalar(
                select(Take)
                .where(col(Take.node_id) == node.id, col(Take.number) == previous)
                .options(undefer_field(Take.text), undefer_field(Take.reasoning))
            )
            if earlier is None:
                raise NotFound("The words before that edit are missing.")
            await session.execute(
                update(StoryNode)
                .where(col(StoryNode.id) == node.id)
                .values(
                    text=earlier.text,
                    reasoning=earlier.reasoning,
                    token_count=count_tokens(earlier.text),
                    live_take=previous,
                )
            )
            return await self._changed(session, adventure, head, node, line, take, actor)

    async def _changed(
        self,
        session: AsyncSession,
        adventure: Adventure,
        head: StoryNode,
        node: StoryNode,
        line: list[_Entry],
        previous: int,
        actor: Actor,
    ) -> EntryEdit:
        """After an entry's words changed in this transaction: memories of the old words cut,
        the version moved on, and what shows the entry now."""
        assert adventure.id is not None and node.id is not None
        expected = adventure.version
        # Memories and the summary of the old wording no longer match the story.
        await story_cut_back(session, adventure.id, kept_through=node.index - 1)
        await advance_version(session, adventure.id, expected, moved_on=FORM_STALE)
        await session.refresh(node)
        if head.id != node.id:
            await session.refresh(head)
        shown_ids: tuple[int, ...] = (node.id,)
        shown_text = node.text
        if node.role == Role.PLAYER:
            shown_ids = await self._turn_actions(session, node, line)
            texts = await session.execute(
                select(col(StoryNode.id), col(StoryNode.text)).where(
                    col(StoryNode.id).in_(shown_ids)
                )
            )
            by_id = dict(texts.tuples().all())
            # As the turn showed them (``Generation.prepare``): one a line, empty ones left out.
            shown_text = "\n".join(by_id[i] for i in shown_ids if by_id.get(i))
        move = await self._result(
            session, adventure, head, expected + 1, adventure.active_branch_id, mover=actor
        )
        return EntryEdit(
            move=move,
            node_id=node.id,
            index=node.index,
            is_action=node.role == Role.PLAYER,
            is_head=node.id == head.id,
            text=node.text,
            shown_text=shown_text,
            shown_node_ids=shown_ids,
            take=node.live_take,
            take_count=node.take_count,
            previous_take=previous,
        )

    @staticmethod
    async def _turn_actions(
        session: AsyncSession, node: StoryNode, line: list[_Entry]
    ) -> tuple[int, ...]:
        """The actions of the turn ``node`` is one of, oldest first: the run of player entries
        around it on the line (a round's turn has one per player, ``engine.story.rounds``)."""
        assert node.id is not None
        after = [e for e in reversed(line) if e.index > node.index]  # oldest first
        later: list[int] = []
        for entry in after:
            if entry.role != Role.PLAYER:
                break
            later.append(entry.id)
        earlier: list[int] = []
        parent_id = node.parent_id
        while parent_id is not None and len(earlier) < ROUND_MAX:
            parent = await session.get(StoryNode, parent_id)
            if parent is None or parent.role != Role.PLAYER or parent.id is None:
                break
            earlier.append(parent.id)
            parent_id = parent.parent_id
        return (*reversed(earlier), node.id, *later)
