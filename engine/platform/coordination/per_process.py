"""The state each process keeps to itself on purpose, and why that is safe.

Everything that must agree between processes lives in the database: turn leases (``leases``),
request records (``engine.turns.requests``), job leases (``jobs``), the story and its version
guard (``engine.story.versions``). What is listed here lives in one process's memory and is
lost when it stops. Each entry says why that is safe; a new lock, event, cache or per-process
table belongs in this list (``tests/test_coordination.py`` looks for them in ``engine/``,
``cogs/`` and ``bot/`` and fails on one that is not named here).

Several processes share one bot when Discord shards are split among them: the events of a
server (and so of its channels and threads) reach one shard, and a DM reaches shard 0. A
channel's turns are therefore normally played, streamed and shown by one process; nothing
below relies on that for correctness, only for tidiness.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PerProcess:
    #: ``module:attribute`` of the piece.
    where: str
    what: str
    why_safe: str

    @property
    def module(self) -> str:
        return self.where.split(":")[0]


PER_PROCESS: tuple[PerProcess, ...] = (
    PerProcess(
        "bot.metrics:CampfireMetrics",
        "the counters, gauges and histograms /metrics serves: this process's turns, leases "
        "taken over, model latency and tokens, Discord's 429s and edits",
        "They are meant to be per process: Prometheus scrapes each process on its own port and "
        "adds them up, and a restart's counters starting at zero read as a counter reset. "
        "Nothing is decided on them.",
    ),
    PerProcess(
        "bot.scheduler:memory_job_scheduler",
        "adventures whose memory work was asked for while it ran, to go round again, and "
        "those whose work runs in this process now (not scheduled again meanwhile)",
        "Only a nudge to run sooner: the job lease decides who writes memories, and the "
        "periodic sweep catches up any adventure whose nudge was lost with its process.",
    ),
    PerProcess(
        "engine.people.profiles:Profiles",
        "contact records being written, by user, which a /profile delete waits for; and when "
        "each person's contact in each place was last recorded, to write it once an hour",
        "A person's interactions reach the process of their server's shard (a DM, shard 0), "
        "where their contact records and their /profile delete are both handled; a record "
        "written by another process at the same moment is the rare case it does not cover. "
        "The times only spare writes: a process that does not know them (another shard's, "
        "or after a restart) writes the contact once more, which is harmless, and a deletion "
        "forgets the person's, so their next interaction makes their row again.",
    ),
    PerProcess(
        "engine.platform.queue:AdventureQueue",
        "the adventure queue: this process's actions of one adventure, in arrival order",
        "It only orders and counts; exclusion is the turn lease, claimed by each queued job "
        "when it runs. An action that reaches another process while a turn is written here "
        "is refused there politely (the lease is busy), never played twice or lost.",
    ),
    PerProcess(
        "engine.storage.database:Database",
        "on SQLite, the write gate: this process's write transactions one at a time, in "
        "arrival order, a turn's store first (engine.storage.write_gate)",
        "SQLite has one writer at a time whatever the gate does; the gate only lines this "
        "process's writers up instead of letting them poll. Across processes SQLite's own "
        "lock and busy timeout decide, as before; PostgreSQL has no gate.",
    ),
    PerProcess(
        "engine.storage.database:head_revision",
        "the newest migration's revision, read from the migration scripts once",
        "The scripts are this process's own code and do not change while it runs; the "
        "database's own revision is read at every start, and a database at another revision "
        "is upgraded as before (under the setup lock, which orders processes).",
    ),
    PerProcess(
        "engine.llm.providers.tls:default_tls",
        "the TLS contexts (certificate authorities loaded once) every HTTP client shares",
        "Read-only once made; Python's ssl lets any number of connections and threads use "
        "one context. Nothing about a player or a request is kept in it.",
    ),
    PerProcess(
        "cogs.ui.discovery:extension_names",
        "the cog modules and their load order, found once",
        "They are this process's own code, which does not change while it runs.",
    ),
    PerProcess(
        "bot.discord_bot:freeze_startup_objects",
        "whether this process has moved what it loaded at start out of the garbage "
        "collector's reach",
        "Memory management of this process alone; another process freezes its own.",
    ),
    PerProcess(
        "engine.turns.intake:TurnIntake",
        "per place, the lock that records and queues its requests one at a time; and turn "
        "leases passed on by a turn that ended to the next one queued here, until it runs",
        "The lock only orders this process's own requests; across processes the turn lease "
        "decides. A lease passed on stays this process's in its row all along (the turn "
        "taking it is this process's queued one); if the process dies, it expires and the "
        "request it was passed to, marked running, is announced as interrupted with a Retry.",
    ),
    PerProcess(
        "engine.story.place_hints:PlaceHints",
        "the adventure this process last saw running in each place, and its version",
        "A hint, choosing only how an interaction is acknowledged before the database is "
        "asked; the database decides everything after. A wrong hint costs a public "
        '"thinking…" taken back, and a button is refused from it only when it proves the '
        "button stale (versions only grow; ids too, but for an /adventure resume in another "
        "process, which the next action in that place puts right: engine.story.place_hints).",
    ),
    PerProcess(
        "engine.story.tree.core:TreeCore",
        "head moves refused while this process's queue writes or holds a turn",
        "A courtesy check against a turn it can see; a head move from another process "
        "meanwhile bumps the adventure's version, and the turn's store is refused by its "
        "version guard instead.",
    ),
    PerProcess(
        "cogs.ui.recent_interactions:RecentInteractions",
        "the interactions that played turns in the last 14 minutes, by id, so that a card "
        "proposed after a turn answers the host through their own interaction",
        "Only the way a proposal is shown: a proposal made in another process, or after a "
        "restart, finds no interaction here and goes to the host by DM instead.",
    ),
    PerProcess(
        "cogs.ui.pacing:RatePacer",
        "the streaming pacer: per-channel and per-interaction-token edit buckets and a global "
        "request budget",
        "A channel's turns are streamed by the process whose shard receives its events, so "
        "its bucket is complete there. The global budget is per process: each takes the "
        "share of the bot's (CAMPFIRE_DISCORD_REQUESTS_PER_SECOND) its shards are of them "
        "all (cogs.ui.pacing.process_budget); discord.py waits out a 429 if they overlap.",
    ),
    PerProcess(
        "cogs.ui.narration_routes:RecentFollowups",
        "this process's narrations sent as interaction follow-ups, with the interaction whose "
        "token may still edit them (at most 10,000, none past the token's life)",
        "Only a shortcut: a message it does not know (another process's, one from before a "
        "restart) is edited by the bot's token, as any follow-up of the bot's may be, and one "
        "whose token Discord refuses is too.",
    ),
    PerProcess(
        "cogs.ui.streaming:StreamingMessage",
        "one message's editor: its latest text, wake-up event and final-edit lock",
        "It lives as long as the message is being streamed, by the process streaming it.",
    ),
    PerProcess(
        "cogs.ui.head_moves:HeadMoveShowing",
        "the count of turns being shown now, which the console waits on",
        "Only this process's own work. Which messages show which turn, and which carries the "
        "buttons, is in the database (engine.play.message_links), so any process, and the bot "
        "after a restart, marks undone turns and moves the buttons.",
    ),
    PerProcess(
        "engine.turns.engine:TurnEngine",
        "how many turns this process runs at once (a semaphore of MAX_RUNNING_TURNS slots), "
        "and which adventure it played last (read_ahead)",
        "It bounds this process's own load only; which turn may run for an adventure is "
        "still its turn lease, held (and heartbeated) while the turn waits for a slot. The "
        "adventure played last only chooses whether the embedded model reads ahead: a wrong "
        "guess costs time, never a wrong story.",
    ),
    PerProcess(
        "engine.platform.coordination.leases:TurnLeases",
        "this process's lease releases still in flight",
        "They concern only leases this process holds; an unreleased lease expires.",
    ),
    PerProcess(
        "engine.platform.coordination.jobs:JobLeases",
        "this process's job-lease releases still in flight",
        "As for the turn leases: only this process's own leases, which expire if it dies.",
    ),
    PerProcess(
        "engine.platform.coordination.instance:Instance",
        "this process's name in lease rows (its instance and this start of it) and the lock "
        "on that name in the data folder",
        "The lock keeps the name to one live process; the operating system drops it when the "
        "process dies, so its restart is the same instance and takes back at once the leases "
        "it held, while a second process on the same folder is another instance.",
    ),
    PerProcess(
        "engine.llm.providers.local:LocalLlamaProvider",
        "the embedded model, loaded once, the lock serialising its generations, the "
        "narrator's two llama.cpp contexts (which one narrates, where its cache stops being "
        "exact) and the refresh under way",
        "The model's weights and llama.cpp contexts are in this process's memory; another "
        "process has its own copy. What a context holds of the last prompt is checked token "
        "by token against the next one (engine.llm.providers.kv_reuse), never trusted; a "
        "refresh lost with the process only leaves the next turns on the moved cache.",
    ),
    PerProcess(
        "engine.library.scripting.workers:ScriptWorkers",
        "the worker processes that run scripts, and the threads that drive them",
        "Each script run starts a fresh QuickJS context in a worker and returns its results "
        "as data; nothing a script leaves behind is kept between runs, and a worker killed or "
        "lost is simply started again.",
    ),
    PerProcess(
        "engine.library.scripting.sandbox:prelude",
        "the scripting prelude's text, read once (in each script worker)",
        "A file shipped with the code: it cannot change while the process runs.",
    ),
    PerProcess(
        "engine.prompt.tokens:count_tokens",
        "token counts remembered by text",
        "A pure function of the text: a cached count cannot go stale.",
    ),
    PerProcess(
        "engine.llm.providers.logit_bias:tiktoken_bias",
        "the logit bias of a banned-word list, by the list and the tokenizer's name",
        "A pure function of the words and a tokenizer file shipped with the code.",
    ),
    PerProcess(
        "engine.story.memory.retrieval:_vector_listing",
        "the statement that lists a turn's memory vectors, built once",
        "A statement without values: each turn binds its own.",
    ),
    PerProcess(
        "engine.llm.retrieval.lexical:_words",
        "the meaningful words and the names of story texts, by the text (1,024 of each)",
        "Pure functions of the text: a text's words cannot go stale.",
    ),
    PerProcess(
        "engine.llm.retrieval.lexical:_clause",
        "the lexical search's statements, parsed, by their text (256 at most)",
        "Statements without values (the terms and the scope are bound each turn): the same "
        "text is the same statement.",
    ),
    PerProcess(
        "engine.story.memory.retrieval:_texts_query",
        "the statement that reads the chosen memories' texts, built once",
        "A statement without values: each turn binds its own.",
    ),
    PerProcess(
        "engine.llm.retrieval.vectors:VectorCache",
        "memory vectors this process has read, by row id and the digest read with them",
        "Each turn reads every row's current digest first: a vector another process wrote, "
        "changed or cleared is read again or dropped, never served stale (the module says how).",
    ),
    PerProcess(
        "engine.prompt.cards:compile_keys",
        "story cards' parsed keys and compiled keyword matchers",
        "Pure functions of the keys: a cached matcher cannot go stale.",
    ),
    PerProcess(
        "engine.prompt.cards:_context_card",
        "story cards as the context reads them, by every value of their row (4,096 at most)",
        "A pure function of the row's values, all of them the key: a card another process "
        "changed is read with its new values, which are another key.",
    ),
    PerProcess(
        "engine.story.characters:_party_query",
        "the statement that reads an adventure's party, built once",
        "A statement without values: each turn binds its own.",
    ),
    PerProcess(
        "engine.prompt.regex_keys:compile_regex",
        "story cards' regular-expression keys, compiled by RE2",
        "A pure function of the key's text: a compiled pattern cannot go stale.",
    ),
    PerProcess(
        "engine.story.world.apply:schema_of",
        "parsed stat schemas, by their JSON",
        "A pure function of the schema's text.",
    ),
    PerProcess(
        "engine.story.line.read:line_window",
        "the story line's statements (its window, tail, ancestry and narrator turns), built once",
        "Statements without data; the rows are read from the database each time.",
    ),
    PerProcess(
        "engine.story.line.positions:line_positions",
        "the line's positions statement, built once",
        "A statement without data; the rows are read from the database each time.",
    ),
    PerProcess(
        "engine.prompt.cards:load_context_cards",
        "the card-loading statement, built once",
        "A statement without data; the rows are read from the database each time.",
    ),
    PerProcess(
        "engine.library.knowledge.retrieval:KnowledgeRetriever",
        "the knowledge retriever's two statements (an adventure's place, the chosen passages), "
        "built once",
        "Statements without data; the rows are read from the database each time.",
    ),
    PerProcess(
        "bot.scheduler:BackgroundWork",
        "the background jobs running in this process now",
        "Only this process's own tasks, kept so that closing lets them end and release their "
        "job leases; a process that dies without that leaves leases that expire.",
    ),
    PerProcess(
        "bot.discord_bot:CampfireBot",
        "the scheduler (APScheduler) and discord.py's caches of servers, channels, messages",
        "Every process schedules every background job; each runs under its job lease, so one "
        "process at a time runs it. discord.py's caches are per shard by Discord's design.",
    ),
)
