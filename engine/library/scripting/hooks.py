"""A turn's scripts: loading them, running each hook, and what the turn keeps of them.

``TurnScripts`` is one turn's scripting. It is loaded with the turn (the adventure's enabled
scripts, its ``state`` and story cards, the recent history), carries ``state`` and the cards
from hook to hook in memory, and is saved by the turn's final transaction (``save``), so a
turn that fails leaves nothing of its scripts behind.

The hook contract, as AI Dungeon runs scripts:

* onInput may rewrite the player's action or stop it; an empty result drops the action, and
  the turn goes on as a continue (what the scripts recorded is kept with it). Continue has no
  input, so it skips onInput. A Do or Say action reaches it on a line of its own, a Story
  action after a space (``action_for_script``).
* onModelContext may rewrite the whole context (the text with AI Dungeon's headings); an empty
  result leaves the context as built; a longer one is cut to ``info.maxChars`` from its start,
  so the newest story survives.
* onOutput may rewrite the reply; ``stop`` turns it into the literal text "stop", as upstream;
  an empty result leaves the reply as the model wrote it, and whitespace hides it (the turn is
  stored with that whitespace, and shows only the scripts' message).

A script's words obey the adventure's banned words as the model's do (``banned``): the cards a
run writes are masked as it leaves them (so the context, later hooks and the stored rows all
see them masked; the run's Insights line says so), so are the texts of ``state.memory`` and the
action onInput returns, and so is ``state.message`` as players are shown it. Its reply text
becomes the narration, which the turn masks whole.

Several scripts run in their ``position`` order, each in a fresh context, each taking the text
the one before it left. A broken script (an exception, an exceeded limit, a result that cannot
be read or is over a cap) changes nothing: its error and logs go to Insights, and the turn goes
on. All runs of a turn share one time budget (``Limits.turn_seconds``): each run gets at most
what is left of it, and once it is spent the remaining hooks are skipped, noted in Insights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import CampfireError
from engine.library.scripting import sandbox, workers
from engine.library.scripting.cards import (
    CardRow,
    changes,
    for_script,
    mask_written,
    rows_after_run,
    script_cards,
    to_context_cards,
)
from engine.library.scripting.results import Caps
from engine.llm.providers.base import ChatMessage
from engine.people.content import BannedWords
from engine.prompt.card_cap import DEFAULT_MAX_CARDS
from engine.prompt.cards import Card
from engine.prompt.inputs import BuiltContext
from engine.prompt.sections import HEADINGS
from engine.storage.models import ActionType, Adventure, AdventureCard, AdventureScript, Role
from engine.story.line.read import line_tail
from engine.story.snapshots import CARD_FIELDS, load_cards

#: How many of the newest story entries scripts see in ``history``.
HISTORY_ENTRIES = 100
#: What ``info.maxChars`` allows per token of the context budget (about 4 characters a token).
CHARS_PER_TOKEN = 4
#: The longest text onInput or onOutput may give back: far beyond any action or reply, short of
#: flooding a channel. onModelContext may give back four times its ``info.maxChars`` (the
#: context is cut to that anyway).
TEXT_MAX_CHARS = 50_000
#: How far past the turn's script time its last run may go before its worker is killed.
TURN_GRACE_SECONDS = 0.5
#: A wait for a worker this long is told in Insights.
QUEUE_NOTE_MS = 500


class Hook(StrEnum):
    INPUT = "input"
    CONTEXT = "context"
    OUTPUT = "output"

    @property
    def column(self) -> str:
        return _COLUMNS[self]

    @property
    def label(self) -> str:
        return _LABELS[self]


_COLUMNS = {Hook.INPUT: "on_input", Hook.CONTEXT: "on_model_context", Hook.OUTPUT: "on_output"}
_LABELS = {Hook.INPUT: "onInput", Hook.CONTEXT: "onModelContext", Hook.OUTPUT: "onOutput"}


class ScriptStopped(CampfireError):
    """A script stopped the turn (``stop: true`` in onInput or onModelContext)."""

    retryable = False


@dataclass(frozen=True, slots=True)
class ScriptCode:
    """One script's code: its library and its three hooks."""

    name: str
    library: str
    hooks: dict[Hook, str]

    @classmethod
    def of(cls, row: AdventureScript) -> ScriptCode:
        return cls(
            name=row.name or f"script {row.id}",
            library=row.shared_library or "",
            hooks={hook: getattr(row, hook.column) or "" for hook in Hook},
        )

    def has(self, hook: Hook) -> bool:
        return bool(self.hooks[hook].strip())

    def source(self, hook: Hook) -> str:
        # One script, library first: the hook calls what the library defines.
        return f"{self.library}\n;\n{self.hooks[hook]}"


@dataclass(slots=True)
class HookReport:
    """One script's run of one hook, for Insights."""

    hook: Hook
    script: str
    ms: int
    logs: list[str] = field(default_factory=list)
    error: str | None = None
    note: str = ""
    cpu_ms: int = 0

    def add_note(self, note: str) -> None:
        """Another note beside any the run already has (a mask and a stop are both said)."""
        self.note = f"{self.note}; {note}" if self.note else note

    def to_json(self) -> dict[str, Any]:
        return {
            "hook": self.hook.label,
            "script": self.script,
            "ms": self.ms,
            "cpu_ms": self.cpu_ms,
            "logs": self.logs,
            "error": self.error,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class HookOutcome:
    text: str
    stop: bool = False


def action_for_script(action_text: str, action: ActionType | str) -> str:
    r"""A player's action as AI Dungeon hands it to scripts (and shows it in ``history``).

    A Do or Say action is on a line of its own ("\n> You open the door.\n"), as the archived
    latitudegames/Scripting examples/commandParser.js and Auto-Cards (LewdLeah/Auto-Cards,
    src/library.js, doPlayerCommands: ``/^\n> [\s\S]*? says? "[\s\S]*?"\n$/``) read it. A Story
    action is its text after one space, no newlines: Auto-Cards' input hook recognises "regular
    AID story actions" by ``TEXT.startsWith(" ")``, and commandParser.js matches story input
    with ``\n? ?`` (no line needed). AI Dungeon's own pages do not spell the format out.
    """
    if str(action) == ActionType.STORY:
        return f" {action_text}"
    return f"\n{action_text}\n"


def script_memory(state: dict[str, Any] | None, banned: BannedWords) -> dict[str, str]:
    """The non-empty texts of a script state's ``memory`` that the narrator reads (AI Dungeon's
    context, authorsNote and frontMemory), with ``banned`` masked."""
    memory = (state or {}).get("memory")
    if not isinstance(memory, dict):
        return {}
    return {
        key: banned.mask(value)
        for key in ("context", "authorsNote", "frontMemory")
        if isinstance(value := memory.get(key), str) and value.strip()
    }


def history_entry(text: str, action: str) -> dict[str, str]:
    return {"text": text, "rawText": text, "type": action}


@dataclass
class TurnScripts:
    """One turn's scripts and the state they carry from hook to hook."""

    adventure_id: int
    scripts: list[ScriptCode]
    state: dict[str, Any]
    #: The cards as the turn found them (for the snapshot and to know what a script changed).
    rows: list[CardRow]
    #: The cards as scripts left them so far, in the shape scripts see, each with the row it is
    #: (``engine.library.scripting.cards.ROW``, not shown to scripts).
    cards: list[dict[str, Any]]
    history: list[dict[str, str]]
    memory: str
    info: dict[str, Any]
    limits: sandbox.Limits = field(default_factory=sandbox.Limits)
    max_cards: int = DEFAULT_MAX_CARDS
    reports: list[HookReport] = field(default_factory=list)
    #: Seconds of the turn's script time (``limits.turn_seconds``) used so far.
    spent_seconds: float = 0.0
    #: ``state.message`` as the turn found it: upstream keeps the message in ``state`` and
    #: shows it when it changes (scripts such as Auto-Cards compare against last turn's).
    message_before: Any = None
    #: The words banned where the adventure runs (the turn engine sets them from the
    #: operator's, server's and adventure's lists): masked in what the scripts write.
    banned: BannedWords = field(default_factory=BannedWords)

    # --- loading ---

    @classmethod
    async def load(
        cls,
        session: AsyncSession,
        adventure: Adventure,
        *,
        actors: Sequence[str] = (),
        limits: sandbox.Limits | None = None,
        max_cards: int = DEFAULT_MAX_CARDS,
    ) -> TurnScripts | None:
        """The turn's scripts, or None when the adventure has no enabled script (no cost)."""
        assert adventure.id is not None
        rows = await session.scalars(
            select(AdventureScript)
            .where(col(AdventureScript.adventure_id) == adventure.id, col(AdventureScript.enabled))
            .order_by(col(AdventureScript.position), col(AdventureScript.id))
        )
        scripts = [ScriptCode.of(row) for row in rows]
        if not scripts:
            return None
        cards = [CardRow.of(card) for card in await load_cards(session, adventure.id)]
        nodes = (
            await line_tail(session, adventure.head_node_id, HISTORY_ENTRIES)
            if adventure.head_node_id
            else []
        )
        history = [
            history_entry(
                action_for_script(node.text, node.action)
                if node.role == Role.PLAYER
                else node.text,
                str(node.action),
            )
            for node in nodes
        ]
        state = dict(adventure.script_state or {})
        # "You" is solo play, no character; a round's players are named once each.
        names = [actor for actor in dict.fromkeys(actors) if actor and actor != "You"]
        return cls(
            adventure_id=adventure.id,
            scripts=scripts,
            state=state,
            rows=cards,
            cards=script_cards(cards),
            history=history,
            memory=adventure.plot_essentials,
            info={
                "actionCount": (nodes[-1].index + 1) if nodes else 0,
                "characters": list(names),
                "characterNames": names,
            },
            limits=limits or sandbox.Limits(),
            max_cards=max_cards,
            message_before=state.get("message"),
        )

    def use_cards(self, snapshot_cards: list[dict[str, Any]]) -> None:
        """Start from the cards a snapshot holds (a retry sees what its turn first saw)."""
        self.rows = [
            CardRow(
                **{name: card[name] for name in CARD_FIELDS if name != "script_id"},
                script_id=str(card.get("script_id") or ""),
            )
            for card in snapshot_cards
            if isinstance(card.get("id"), int)
        ]
        self.cards = script_cards(self.rows)

    def has(self, hook: Hook) -> bool:
        return any(script.has(hook) for script in self.scripts)

    # --- the hooks ---

    async def on_input(self, action_text: str, action: ActionType) -> str:
        """The action as onInput leaves it ("": dropped). Raises ``ScriptStopped``."""
        if not self.has(Hook.INPUT):
            self.add_current_action(action_text, action)
            return action_text
        outcome = await self.run(Hook.INPUT, action_for_script(action_text, action))
        if outcome.stop:
            raise ScriptStopped(self.stop_message or "The adventure's script stopped this action.")
        text = outcome.text.strip()
        if not text:
            # Command scripts record what a command did and return "": AI Dungeon still asks
            # the model, and the scripts hide its reply. MousAI Script Pack I
            # (MousAIDungeon/script-pack-1, modifiers/InputModifier.js returns {text: ''} for a
            # command and sets state.clearOutput; OutputModifier.js then returns ' ': "The
            # input was still sent to the AI"). So the action is dropped (no entry is stored
            # for it) and the turn goes on as a continue, keeping what the scripts recorded.
            self.reports[-1].add_note("the action came back empty: played as a continue")
            return ""
        self.add_current_action(text, action)
        return text

    def add_current_action(self, action_text: str, action: ActionType) -> None:
        """From the context hook on, history includes the action being played."""
        if action_text:
            self.history.append(history_entry(action_for_script(action_text, action), str(action)))
            self.info["actionCount"] = self.info.get("actionCount", 0) + 1

    async def on_model_context(
        self, context_text: str, *, max_chars: int, memory_length: int
    ) -> str | None:
        """The context as onModelContext rewrote it, or None when it is unchanged."""
        if not self.has(Hook.CONTEXT):
            return None
        outcome = await self.run(
            Hook.CONTEXT,
            context_text,
            info={"maxChars": max_chars, "memoryLength": memory_length},
            text_chars=max(TEXT_MAX_CHARS, 4 * max_chars),
        )
        if outcome.stop:
            raise ScriptStopped(self.stop_message or "The adventure's script stopped this turn.")
        text = outcome.text
        if not text.strip() or text == context_text:
            # Empty means "as if the script had not run" (its state changes still count).
            return None
        if len(text) > max_chars:
            text = text[len(text) - max_chars :]
        return text

    async def rewrite_context(self, built: BuiltContext) -> BuiltContext:
        """The built context as onModelContext left it (the same object when unchanged)."""
        if not self.has(Hook.CONTEXT):
            return built
        original = built.script_text
        max_chars = max(built.report.available, 1) * CHARS_PER_TOKEN
        # What comes before the story is AI Dungeon's "memory" part of the context.
        story_at = original.find(HEADINGS["history"])
        text = await self.on_model_context(
            original,
            max_chars=max_chars,
            memory_length=story_at if story_at >= 0 else len(original),
        )
        if text is None:
            return built
        self.reports[-1].add_note(f"rewrote the context ({len(original):,} → {len(text):,} chars)")
        system = built.messages[0] if built.messages[0].role == "system" else None
        if system is not None and text.startswith(system.content + "\n\n"):
            # The script left the system part alone: keep it as the system message.
            rest = text[len(system.content) + 2 :]
            messages = [system, ChatMessage("user", rest)]
        else:
            messages = [ChatMessage("user", text)]
        return replace(built, messages=messages, script_text=text)

    async def on_output(self, output: str) -> str:
        if not self.has(Hook.OUTPUT):
            return output
        outcome = await self.run(Hook.OUTPUT, output)
        if outcome.stop:
            return "stop"
        if not outcome.text:
            # Nothing at all: keep the model's. Magic's Scripting Guidebook
            # (magicoflolis/aidungeon.js, "Scripting Guidebook.md", "Prevent the AI from
            # generating a starting message"): "Do not return an empty string".
            self.reports[-1].add_note("an empty result was ignored")
            return output
        if not outcome.text.strip():
            # Whitespace hides the narration, as AI Dungeon does: the same guidebook entry
            # suppresses the opening "entirely with a single space", and Auto-Cards
            # (LewdLeah/Auto-Cards, src/library.js) answers its /AC commands with an output of
            # "\n" so that no narration shows.
            self.reports[-1].add_note("the narration was hidden (whitespace)")
        return outcome.text

    async def run(
        self,
        hook: Hook,
        text: str,
        *,
        info: dict[str, Any] | None = None,
        text_chars: int = TEXT_MAX_CHARS,
    ) -> HookOutcome:
        """Run every enabled script's ``hook`` in order, each on the text the last one left,
        within what is left of the turn's script time."""
        stop = False
        for script in self.scripts:
            if not script.has(hook):
                continue
            left = self.limits.turn_seconds - self.spent_seconds
            if left <= 0:
                self.reports.append(
                    HookReport(
                        hook,
                        script.name,
                        0,
                        note=f"skipped: this turn's scripts had used all of their "
                        f"{self.limits.turn_seconds:g} s (every hook and script together)",
                    )
                )
                continue
            payload = {
                "text": text,
                "state": self.state,
                "history": self.history,
                "memory": self.memory,
                "info": {**self.info, **(info or {})},
                "storyCards": [for_script(card) for card in self.cards],
            }
            limits = replace(self.limits, time_seconds=min(self.limits.time_seconds, left))
            caps = Caps(text_chars, self.limits.state_chars, self.max_cards)
            # However the run ends, it ends soon after the turn's script time does.
            wall = min(workers.wall_seconds(limits.time_seconds), left + TURN_GRACE_SECONDS)
            result = await workers.run(
                script.source(hook),
                payload,
                limits,
                caps,
                owner=workers.owner_of(self.adventure_id),
                wall=wall,
            )
            self.spent_seconds += result.ms / 1000
            report = HookReport(
                hook, script.name, result.ms, result.logs, result.error, cpu_ms=result.cpu_ms
            )
            if limits.time_seconds < self.limits.time_seconds:
                report.note = (
                    f"ran with {limits.time_seconds:.2g} s left of this turn's "
                    f"{self.limits.turn_seconds:g} s of script time"
                )
            elif result.queued_ms >= QUEUE_NOTE_MS:
                report.note = (
                    f"waited {result.queued_ms / 1000:.1f} s for a script worker (other "
                    "adventures' scripts held them; the wait is not counted as script time)"
                )
            self.reports.append(report)
            if not result.ok:
                continue
            self.state = result.state
            rows_after_run(self.cards, result.cards)
            masked = mask_written(result.cards, self.rows, self.banned)
            if masked:
                report.add_note(
                    f"banned words masked in {masked} story card{'s' if masked != 1 else ''} "
                    "it wrote"
                )
            self.cards = result.cards
            if self._mask_memory():
                report.add_note("banned words masked in the state.memory it left")
            text = result.text
            if hook is Hook.INPUT and (clean := self.banned.mask(text)) != text:
                # The player's own words were checked before the turn (a banned word refuses
                # the action); what the script made of them is masked, as its cards are.
                report.add_note("banned words masked in the action it wrote")
                text = clean
            if result.stop:
                stop = True
                report.add_note("stopped")
                break
        return HookOutcome(text, stop)

    def _mask_memory(self) -> bool:
        """Mask the banned words in ``state.memory``'s texts (AI Dungeon's context, author's
        note and front memory, which the narrator reads): as a run leaves them, so later hooks,
        the context and the stored state all hold them masked. Whether any was."""
        memory = self.state.get("memory")
        if not self.banned or not isinstance(memory, dict):
            return False
        texts = script_memory(self.state, self.banned).items()
        masked = {key: clean for key, clean in texts if clean != memory[key]}
        if masked:
            self.state["memory"] = {**memory, **masked}
        return bool(masked)

    # --- what the turn keeps ---

    @property
    def message(self) -> str:
        """``state.message`` as text for the players (a string, ``{text}`` or a list of them)
        when the scripts changed it this turn; "" otherwise.

        ``visibleTo`` cannot be honoured in a shared channel, so every message is shown.
        """
        current = self.state.get("message")
        if current == self.message_before:
            return ""
        return self.banned.mask(message_text(current))

    @property
    def stop_message(self) -> str:
        """``state.message`` as text when a script stops the turn, changed this turn or not: a
        script that stops every /continue with the same message says it every time."""
        return self.banned.mask(message_text(self.state.get("message")))

    def saved_state(self) -> dict[str, Any]:
        state = dict(self.state)
        if state.get("memory") == {}:
            state.pop("memory")
        return state

    def context_cards(self) -> list[Card]:
        """The cards for this turn's context, as the scripts left them."""
        return to_context_cards(self.cards, self.rows)

    def report_json(self) -> list[dict[str, Any]]:
        return [report.to_json() for report in self.reports]

    async def save(self, session: AsyncSession) -> None:
        """Write the cards as the scripts left them, inside the turn's transaction.

        Only what the scripts changed is written, relative to the cards the turn started with,
        so a card a player added meanwhile is kept. The state goes with the adventure's row.
        """
        removed, updated, added = changes(self.rows, self.cards)
        if removed:
            await session.execute(
                delete(AdventureCard).where(
                    col(AdventureCard.adventure_id) == self.adventure_id,
                    col(AdventureCard.id).in_(removed),
                )
            )
        if updated:
            # One bulk UPDATE by primary key (a script that sorts its cards moves all of them);
            # the ids are this adventure's, checked against the cards the turn loaded.
            await session.execute(
                update(AdventureCard), [{"id": card_id, **values} for card_id, values in updated]
            )
        if added:
            await session.execute(
                insert(AdventureCard),
                [{**values, "adventure_id": self.adventure_id} for values in added],
            )


def message_text(message: Any) -> str:
    if message is None or message == "":
        return ""
    if isinstance(message, str):
        return message.strip()
    if isinstance(message, dict):
        return message_text(message.get("text"))
    if isinstance(message, list):
        return "\n".join(part for part in (message_text(item) for item in message) if part)
    return str(message)
