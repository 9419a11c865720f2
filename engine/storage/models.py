"""Campfire's tables.

Ownership is expressed as foreign keys with ``ON DELETE CASCADE`` in the database itself, so
removing a user or a server is one ``DELETE`` that takes every row they own with it (guest
cleanup and server removal never walk rows through the ORM). Discord ids are 64-bit, hence
``BigInteger`` wherever one is stored.

Heavy columns (prompt snapshots, reasoning traces, take bodies) are deferred: a bulk load of
turns never names them; they are read only for the one turn that needs them (Insights, retry).
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import QueryableAttribute, declared_attr, deferred, undefer
from sqlalchemy.orm.interfaces import LoaderOption
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


def _fk(target: str, *, ondelete: str, nullable: bool = True, big: bool = False, **kw: Any) -> Any:
    """A foreign-key column whose delete rule lives in the database."""
    return Field(
        default=None,
        sa_column=Column(
            BigInteger if big else Integer,
            ForeignKey(target, ondelete=ondelete, **kw),
            nullable=nullable,
            index=True,
        ),
    )


def _when(nullable: bool = False) -> Any:
    column = Column(DateTime(timezone=True), nullable=nullable)
    if nullable:
        return Field(default=None, sa_column=column)
    return Field(default_factory=utcnow, sa_column=column)


def _name(length: int = 16) -> Any:
    """An enum stored as plain text: adding a value later needs no database migration."""
    return Field(sa_column=Column(String(length), nullable=False))


def _json(default: Any) -> Any:
    return Field(default_factory=lambda: type(default)(), sa_column=Column(JSON, nullable=False))


def _text(nullable: bool = False) -> Any:
    return Field(default=None if nullable else "", sa_column=Column(Text, nullable=nullable))


def _defer(*names: str) -> Any:
    """``__mapper_args__`` that load the named heavy columns only when they are read.

    SQLModel has no switch for deferred loading, so the columns are re-mapped as deferred
    properties once the table exists.
    """

    def mapper_args(cls: Any) -> dict[str, Any]:
        return {"properties": {name: deferred(cls.__table__.c[name]) for name in names}}

    return declared_attr.directive(mapper_args)


def undefer_field(field: object) -> LoaderOption:
    """The load option that reads the deferred ``field`` (``StoryNode.prompt_snapshot``) with
    its row: ``sqlalchemy.orm.undefer``, taking a model field as type checkers see it (as its
    value's type) and checking that it is the mapped attribute it is at run time."""
    assert isinstance(field, QueryableAttribute), field
    return undefer(field)


class ActionType(StrEnum):
    """The kinds of story entries, named as AI Dungeon's ``history[].type``."""

    START = "start"  # the scenario's opening prompt
    DO = "do"
    SAY = "say"
    STORY = "story"
    CONTINUE = "continue"  # the narrator's text


class Role(StrEnum):
    PLAYER = "player"
    NARRATOR = "narrator"


class RewriteRight(StrEnum):
    """Who besides the host and managers may retry, undo or edit a server adventure's turns
    (``/host rights``; refereed in ``engine.people.access.may_rewrite``)."""

    AUTHOR = "author"  # the player whose action the turn answers
    HOST = "host"  # nobody else
    ANYONE = "anyone"  # anyone in the adventure's place


class TurnMode(StrEnum):
    """How a server adventure's actions become turns (``/host mode``; ``engine.story.rounds``)."""

    FREE = "free"  # each action is a turn, first come, first served
    ROUNDS = "rounds"  # one action per player a round; it closes when all acted, on Close, or late
    HOST = "host"  # like rounds, but only the host's Close ends the round


# --- people and places -------------------------------------------------------------------------
# Each table's ``__tablename__`` is declared a ``ClassVar[str]``: SQLModel declares it as a
# ``declared_attr`` (its default names a table after its class), which a plain name is not.


class Server(SQLModel, table=True):
    """A Discord server (guild) and every setting its admins chose (``engine.people.servers``
    reads and writes them; the server's model, ``engine.llm.model_settings``)."""

    __tablename__: ClassVar[str] = "servers"

    id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    name: str = ""
    default_scenario_id: int | None = _fk(
        "scenarios.id", ondelete="SET NULL", use_alter=True, name="fk_servers_default_scenario"
    )
    model_url: str | None = None
    model_name: str | None = None
    # Encrypted with engine.platform.crypto.SecretBox; never shown again once entered.
    model_api_key_encrypted: str | None = None
    allow_background_model_use: bool = True
    # Members with this role may import scenarios, besides those who can manage the server.
    importer_role_id: int | None = Field(default=None, sa_column=Column(BigInteger))
    # Suggested actions under the turns of the server's adventures (``/server suggestions``).
    suggestions: bool = True
    #: The server's content rating (``engine.people.content``); None: the operator's default.
    content_rating: str | None = Field(default=None, sa_column=Column(String(8)))
    #: Words and phrases no adventure of the server may hold (``engine.people.content``).
    banned_words: list[str] = _json([])
    #: Where players' reports of turns go (``/server reports``); None: reports are off.
    reports_channel_id: int | None = Field(default=None, sa_column=Column(BigInteger))
    created_at: datetime = _when()
    # Set when the bot leaves; the server's data is removed a grace period later.
    left_at: datetime | None = _when(nullable=True)


class User(SQLModel, table=True):
    """Anyone who has interacted with the bot. A guest until they own something lasting."""

    __tablename__: ClassVar[str] = "users"

    id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    name: str = ""
    keep_data: bool = False
    #: The rating of the player's own DM adventures, within the operator's ceiling; None: the
    #: operator's default (``engine.people.content``).
    content_rating: str | None = Field(default=None, sa_column=Column(String(8)))
    created_at: datetime = _when()
    last_seen_at: datetime = _when()


class UserModel(SQLModel, table=True):
    """The model a player chose for their own (DM) adventures (``/model set`` in a DM)."""

    __tablename__: ClassVar[str] = "user_models"

    user_id: int = Field(
        sa_column=Column(
            BigInteger,
            ForeignKey("users.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        )
    )
    url: str = Field(sa_column=Column(Text, nullable=False))
    model_name: str = Field(sa_column=Column(Text, nullable=False))
    # Encrypted with engine.platform.crypto.SecretBox; never shown again once entered.
    api_key_encrypted: str | None = _text(nullable=True)
    updated_at: datetime = _when()


class Block(SQLModel, table=True):
    """A user or server the operator blocked (``/operator block``): every command and button
    of theirs is refused politely."""

    __tablename__: ClassVar[str] = "blocks"

    #: "user" or "server".
    kind: str = Field(sa_column=Column(String(16), primary_key=True))
    target_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    created_at: datetime = _when()


# --- scenarios (templates) and adventures (instances) -------------------------------------------
# A scenario's steering text, cards and scripts are copied into an adventure when it starts, so
# the field sets are shared through these (table-less) bases. ``sa_type`` rather than
# ``sa_column``: a Column object can belong to one table only.


class SteeringFields(SQLModel):
    title: str
    icon: str = ""
    prompt: str = Field(default="", sa_type=Text)  # the opening; may hold ${placeholders}
    plot_essentials: str = Field(default="", sa_type=Text)  # AI Dungeon's "memory"
    authors_note: str = Field(default="", sa_type=Text)
    ai_instructions: str = Field(default="", sa_type=Text)
    stat_schema: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)


class CardFields(SQLModel):
    position: int = 0
    type: str = "class"
    title: str = ""
    keys: str = Field(default="", sa_type=Text)  # comma-separated, as AI Dungeon stores them
    entry: str = Field(default="", sa_type=Text)
    description: str = Field(default="", sa_type=Text)
    always_on: bool = False
    #: World-info options, only those that differ from the defaults (``engine.prompt.lore``).
    lore: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)


class ScriptFields(SQLModel):
    """One script: a shared library and up to three hooks (AI Dungeon's four code tabs)."""

    position: int = 0
    name: str = ""
    description: str = Field(default="", sa_type=Text)
    enabled: bool = True
    shared_library: str = Field(default="", sa_type=Text)
    on_input: str = Field(default="", sa_type=Text)
    on_model_context: str = Field(default="", sa_type=Text)
    on_output: str = Field(default="", sa_type=Text)


class Scenario(SteeringFields, table=True):
    """A template to start adventures from.

    Owned by a server (imported for it), by a user (their own), or by nobody (shipped with
    Campfire, identified by ``builtin_key`` so re-seeding updates instead of duplicating).
    """

    __tablename__: ClassVar[str] = "scenarios"

    id: int | None = Field(default=None, primary_key=True)
    server_id: int | None = _fk("servers.id", ondelete="CASCADE", big=True)
    owner_id: int | None = _fk("users.id", ondelete="CASCADE", big=True)
    builtin_key: str | None = Field(default=None, unique=True)
    #: A shipped scenario's file as last seeded (``engine.library.scenarios.shipped``).
    builtin_digest: str | None = Field(default=None, sa_column=Column(String(64)))
    # An option of a scenario that is a menu (AI Dungeon's "options"): chosen at /start, never
    # listed on its own. Options share their parent's server or owner.
    parent_id: int | None = _fk("scenarios.id", ondelete="CASCADE")
    description: str = _text()
    tags: list[str] = _json([])
    #: What its author rated it (``engine.people.content``); None: unrated, started anywhere.
    content_rating: str | None = Field(default=None, sa_column=Column(String(8)))
    created_at: datetime = _when()
    updated_at: datetime = _when()


class ScenarioCard(CardFields, table=True):
    __tablename__: ClassVar[str] = "scenario_cards"

    id: int | None = Field(default=None, primary_key=True)
    scenario_id: int = _fk("scenarios.id", ondelete="CASCADE", nullable=False)


class ScenarioScript(ScriptFields, table=True):
    __tablename__: ClassVar[str] = "scenario_scripts"

    id: int | None = Field(default=None, primary_key=True)
    scenario_id: int = _fk("scenarios.id", ondelete="CASCADE", nullable=False)


class Adventure(SteeringFields, table=True):
    """A story being played in one channel, thread or DM.

    A server adventure belongs to the server (its host leaving does not delete it); a DM
    adventure belongs to its player.
    """

    __tablename__: ClassVar[str] = "adventures"
    __table_args__ = (
        Index("ix_adventures_channel_active", "channel_id", "ended_at"),
        # The caps on adventures per player (engine.people.adventure_caps) count by these.
        Index("ix_adventures_host_started", "host_id", "started_at"),
        # The adventures opened from a channel, each in a thread of its own (engine.play.service).
        Index("ix_adventures_parent_channel", "parent_channel_id", "ended_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    server_id: int | None = _fk("servers.id", ondelete="CASCADE", big=True)
    owner_id: int | None = _fk("users.id", ondelete="CASCADE", big=True)
    host_id: int | None = _fk("users.id", ondelete="SET NULL", big=True)
    scenario_id: int | None = _fk("scenarios.id", ondelete="SET NULL")
    channel_id: int | None = Field(default=None, sa_column=Column(BigInteger))
    #: The channel a thread was opened from for it (None outside a thread it was given), so an
    #: action there finds it once the thread has dropped out of sight (archived).
    parent_channel_id: int | None = Field(default=None, sa_column=Column(BigInteger))

    story_summary: str = _text()
    world_state: dict[str, Any] = _json({})
    script_state: dict[str, Any] = _json({})
    #: The typed narrative state (``engine.story.narrative``), kept in snapshots like the above;
    #: ``story_tracking``: the model is asked for its events and the prompt shows it.
    story_state: dict[str, Any] = _json({})
    story_tracking: bool = False

    # The story's current position and line.
    head_node_id: int | None = _fk(
        "story_nodes.id", ondelete="SET NULL", use_alter=True, name="fk_adventures_head_node"
    )
    active_branch_id: int | None = _fk(
        "branches.id", ondelete="SET NULL", use_alter=True, name="fk_adventures_active_branch"
    )
    # Bumped by every change a player can see; requests carry the version they were made for.
    version: int = 0

    # Per-adventure generation settings; None means the server's or operator's default.
    context_tokens: int | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    # Its sampling (``engine.llm.sampling``); None: the model server's own default. Each goes
    # only to a server that takes it (``engine.llm.providers.dialects``).
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    #: Where the narrator stops, besides Campfire's own stop at the player's next action.
    stop_strings: list[str] = _json([])
    #: How many entries from the end of the story its author's note goes (None: it closes the
    #: system message, where the provider's prompt cache keeps it: ``engine.turns.context``).
    authors_note_depth: int | None = None

    # Host controls (``engine.people.host_controls``): while locked only the host and managers act;
    # who else may retry, undo or edit a turn.
    locked: bool = False
    rewrite_right: RewriteRight = Field(
        default=RewriteRight.AUTHOR, sa_column=Column(String(16), nullable=False)
    )
    #: Plain messages in the adventure's place play as actions (``cogs.message_play``).
    message_play: bool = False
    #: Every how many turns the story proposes a new card to the host, privately
    #: (``engine.story.steering.card_proposals``); 0: never.
    card_proposals: int = 0
    #: The host closed the party (``engine.people.party``): only its players act, nobody joins.
    party_closed: bool = False
    #: How actions become turns: one each (free), or gathered into rounds.
    turn_mode: TurnMode = Field(
        default=TurnMode.FREE, sa_column=Column(String(8), nullable=False, server_default="free")
    )
    #: The message showing the open round (its panel), so that any process, a restarted one
    #: included, edits it and times the round out (``engine.play.round_panels``).
    round_panel_id: int | None = Field(default=None, sa_column=Column(BigInteger))
    #: Words and phrases its host banned, besides the server's and the operator's.
    banned_words: list[str] = _json([])
    #: Discord marks the adventure's place age-restricted (a thread: its parent), as the last
    #: request there saw it; only there may a server adventure be rated mature.
    age_restricted: bool = False

    # Memory-bank progress, as story positions.
    memory_cursor: int = 0
    summary_cursor: int = 0

    created_at: datetime = _when()
    updated_at: datetime = _when()
    ended_at: datetime | None = _when(nullable=True)
    #: When it began here: started, or imported (an import keeps its story's ``created_at``).
    started_at: datetime = _when()


class AdventureCard(CardFields, table=True):
    __tablename__: ClassVar[str] = "adventure_cards"

    id: int | None = Field(default=None, primary_key=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)
    #: The id a script gave the card (AI Dungeon keeps it, and scripts find their own cards by
    #: it); empty: scripts see the row's id (``engine.library.scripting.cards``).
    script_id: str = Field(default="", sa_type=Text)


class AdventureScript(ScriptFields, table=True):
    __tablename__: ClassVar[str] = "adventure_scripts"

    id: int | None = Field(default=None, primary_key=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)


class StoryNode(SQLModel, table=True):
    """One entry of the story: the opening, a player's action or the narrator's text.

    Nodes form a tree through ``parent_id``; a line of play is the path from the root to a head.
    ``index`` is the depth on that path, the same for every take of a turn.
    """

    __tablename__: ClassVar[str] = "story_nodes"
    __table_args__ = (Index("ix_story_nodes_adventure_index", "adventure_id", "index"),)
    __mapper_args__ = _defer(
        "reasoning",
        "prompt_snapshot",
        "state_before",
        "state_after",
        "state_report",
        "context_report",
    )

    id: int | None = Field(default=None, primary_key=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)
    parent_id: int | None = _fk("story_nodes.id", ondelete="CASCADE")
    index: int = 0
    role: Role = _name()
    action: ActionType = _name()
    author_id: int | None = _fk("users.id", ondelete="SET NULL", big=True)
    text: str = _text()  # the live take's text
    live_take: int = 1
    take_count: int = 1  # answers "how many takes" without loading them
    token_count: int | None = None  # measured once when stored, for sizing history windows

    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: int | None = None

    # Heavy, deferred below.
    reasoning: str | None = _text(nullable=True)
    prompt_snapshot: bytes | None = Field(default=None, sa_column=Column(LargeBinary))
    # World and script state as they were before this node, for exact undo and retry.
    state_before: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    # The same, as they were when the head last stood on this node (after its live take, or
    # as a host left them): what Redo, a branch switch or a save point puts back.
    state_after: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    state_report: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    # The state block the model wrote after this narration (stripped from ``text``), kept light
    # so history can re-attach it and the model keeps emitting blocks.
    state_block: str | None = _text(nullable=True)
    # What went into the context and why (engine.prompt.report.ContextReport), for Insights.
    context_report: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))

    created_at: datetime = _when()


class Take(SQLModel, table=True):
    """Another attempt at a narrator turn: only what differs, never the prompt."""

    __tablename__: ClassVar[str] = "takes"
    __table_args__ = (UniqueConstraint("node_id", "number"),)
    __mapper_args__ = _defer("text", "reasoning", "state_after")

    id: int | None = Field(default=None, primary_key=True)
    node_id: int = _fk("story_nodes.id", ondelete="CASCADE", nullable=False)
    number: int
    text: str = _text()
    reasoning: str | None = _text(nullable=True)
    state_after: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    created_at: datetime = _when()


class StoryMessage(SQLModel, table=True):
    """A Discord message that shows a story node (``engine.play.message_links``): a piece of its
    narration, or the line with the player's action. Kept in the database, not in a process,
    so that undo marks a turn's messages and the buttons move after a restart too.

    ``buttons``: this message carries its channel's story buttons now (one per channel). A
    message's age needs no column: Discord's ids carry their creation time."""

    __tablename__: ClassVar[str] = "story_messages"
    __table_args__ = (Index("ix_story_messages_channel_buttons", "channel_id", "buttons"),)

    message_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    channel_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    node_id: int = _fk("story_nodes.id", ondelete="CASCADE", nullable=False)
    #: "narration" or "action" (``engine.play.message_links.NARRATION`` / ``ACTION``).
    kind: str = _name()
    buttons: bool = False


class Branch(SQLModel, table=True):
    """A named line of play. Borrows its ancestors' nodes instead of copying them."""

    __tablename__: ClassVar[str] = "branches"
    __table_args__ = (UniqueConstraint("adventure_id", "name"),)

    id: int | None = Field(default=None, primary_key=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)
    name: str
    tip_node_id: int | None = _fk("story_nodes.id", ondelete="SET NULL")
    created_at: datetime = _when()


class SavePoint(SQLModel, table=True):
    __tablename__: ClassVar[str] = "save_points"
    __table_args__ = (UniqueConstraint("adventure_id", "name"),)

    id: int | None = Field(default=None, primary_key=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)
    # RESTRICT: a branch with a save point on it cannot be deleted until the save point is.
    branch_id: int | None = _fk("branches.id", ondelete="RESTRICT")
    node_id: int = _fk("story_nodes.id", ondelete="CASCADE", nullable=False)
    name: str
    created_by: int | None = _fk("users.id", ondelete="SET NULL", big=True)
    created_at: datetime = _when()
