"""Managing an adventure's scripts: upload a hook's code, list, enable, disable, remove, test.

Scripts belong to scenarios and are copied into an adventure when it starts; these commands
change the copy of the adventure running in a channel, like the card commands. Scripts are
code, so in a server only members who can manage it may change or test them; in a DM, the
adventure's own player (``engine.people.access.may_script``). Anyone may list them (names and sizes,
never the code).

``ScriptService.test_hook`` runs a hook against the adventure as it stands, exactly as a turn
would (same globals, same limits), and saves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotFound
from engine.library.scripting import sandbox, workers
from engine.library.scripting.hooks import Hook, HookReport, ScriptStopped, TurnScripts
from engine.people.access.checks import check_may_script
from engine.people.access.rules import adventure_here
from engine.people.limits import Kind, UsageLimits
from engine.platform.sanitise import QUOTE_MAX, echo, sanitise
from engine.prompt.inputs import ContextBuilder, ContextInputs
from engine.storage.models import ActionType, AdventureScript, Role
from engine.story.actions import PlayerAction, format_action
from engine.story.line.read import line_tail

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
    from engine.storage.database import Database

DEFAULT_SCRIPT_NAME = "main"
SCRIPT_NAME_MAX = 64
MAX_SCRIPTS = 20


class ScriptPart(StrEnum):
    """What one uploaded file is: AI Dungeon's four code tabs."""

    LIBRARY = "library"
    INPUT = "input"
    CONTEXT = "context"
    OUTPUT = "output"

    @property
    def column(self) -> str:
        return "shared_library" if self is ScriptPart.LIBRARY else Hook(self.value).column

    @property
    def label(self) -> str:
        return "library" if self is ScriptPart.LIBRARY else Hook(self.value).label


@dataclass(frozen=True, slots=True)
class ScriptView:
    name: str
    enabled: bool
    position: int
    #: Characters of code per part that has any ("library", "onInput", …).
    sizes: dict[str, int]


@dataclass(frozen=True, slots=True)
class HookTest:
    """What ``/script test`` shows: the text in and out, and each script's run."""

    hook: Hook
    text_in: str
    text_out: str
    stop: bool
    reports: list[HookReport]
    message: str


def _clean_name(name: str | None) -> str:
    name = " ".join(sanitise(name or "").split()) or DEFAULT_SCRIPT_NAME
    if len(name) > SCRIPT_NAME_MAX:
        raise InvalidInput(f"A script's name can be at most {SCRIPT_NAME_MAX} characters.")
    return name


async def _script_named(session: AsyncSession, adventure_id: int, name: str) -> AdventureScript:
    name = sanitise(name)
    script = await session.scalar(
        select(AdventureScript).where(
            col(AdventureScript.adventure_id) == adventure_id,
            func.lower(col(AdventureScript.name)) == name.casefold(),
        )
    )
    if script is None:
        raise NotFound(
            f"This adventure has no script called “{echo(name, QUOTE_MAX)}”. "
            "`/script list` shows them."
        )
    return script


class ScriptService:
    """What a front end calls for ``/script``: each command is one method, given the place and
    who acts. Built once with what a turn's scripts run under (the context engine, the
    sandbox's limits, the card cap), so a test runs a hook exactly as a turn would."""

    def __init__(
        self,
        db: Database,
        context: ContextBuilder,
        *,
        limits: sandbox.Limits,
        max_cards: int,
        max_chars: int,
        rate_limits: UsageLimits | None = None,
    ) -> None:
        self.db = db
        self.context = context
        self.limits = limits
        #: /script test per minute (None: no limit, for tools and tests).
        self.rate_limits = rate_limits
        self.max_cards = max_cards
        #: The most characters one uploaded file may have.
        self.max_chars = max_chars

    def check_size(self, filename: str, size: int) -> None:
        """Refuse a file by its announced size, before downloading it."""
        # Four bytes a character at most.
        if size > self.max_chars * 4:
            raise InvalidInput(
                f"“{filename}” is {size:,} bytes; a script may have at most "
                f"{self.max_chars:,} characters."
            )

    async def upload(
        self,
        channel_id: int,
        actor: Actor,
        part: ScriptPart | str,
        data: bytes,
        filename: str,
        *,
        name: str | None = None,
    ) -> tuple[ScriptView, bool]:
        """Set one part of the named script (created when new) to an uploaded file's code.
        Returns the script and whether it is new."""
        code = _decode(data, filename, max_chars=self.max_chars)
        part = _part(part)
        name = _clean_name(name)
        # The right, then the rate limit, before any parsing: the syntax check runs in the
        # workers every scripted adventure shares, and a hostile file can keep one busy.
        async with self.db.session() as session:
            here = await adventure_here(session, channel_id)
            check_may_script(here, actor)
        if self.rate_limits is not None:
            await self.rate_limits.use(Kind.SCRIPT_TEST, actor)
        problem = await workers.syntax_error(code, self.limits, owner=workers.owner_of(here.id))
        if problem:
            raise InvalidInput(
                f"The {part.label} code does not parse, so it was not saved: {problem}"
            )
        async with self.db.transaction() as session:
            adventure = await adventure_here(session, channel_id, for_update=True)
            check_may_script(adventure, actor)
            assert adventure.id is not None
            try:
                script = await _script_named(session, adventure.id, name)
                created = False
            except NotFound:
                count = await session.scalar(
                    select(func.count()).where(col(AdventureScript.adventure_id) == adventure.id)
                )
                if (count or 0) >= MAX_SCRIPTS:
                    raise InvalidInput(
                        f"This adventure already has {MAX_SCRIPTS} scripts; remove one first."
                    ) from None
                last = await session.scalar(
                    select(func.max(col(AdventureScript.position))).where(
                        col(AdventureScript.adventure_id) == adventure.id
                    )
                )
                script = AdventureScript(
                    adventure_id=adventure.id,
                    name=name,
                    position=(last + 1) if last is not None else 0,
                )
                session.add(script)
                created = True
            setattr(script, part.column, code)
            await session.flush()
            return _view(script), created

    async def scripts(self, channel_id: int) -> list[ScriptView]:
        """The adventure's scripts, in the order they run (anyone may list them)."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            rows = await session.scalars(
                select(AdventureScript)
                .where(col(AdventureScript.adventure_id) == adventure.id)
                .order_by(col(AdventureScript.position), col(AdventureScript.id))
            )
            return [_view(row) for row in rows]

    async def set_enabled(
        self, channel_id: int, actor: Actor, name: str, enabled: bool
    ) -> ScriptView:
        async with self.db.transaction() as session:
            adventure = await adventure_here(session, channel_id, for_update=True)
            check_may_script(adventure, actor)
            assert adventure.id is not None
            script = await _script_named(session, adventure.id, _clean_name(name))
            script.enabled = enabled
            await session.flush()
            return _view(script)

    async def remove(
        self, channel_id: int, actor: Actor, name: str, part: ScriptPart | str | None = None
    ) -> ScriptView | None:
        """Remove a whole script, or one part of it (the script is kept). Returns what is
        left."""
        async with self.db.transaction() as session:
            adventure = await adventure_here(session, channel_id, for_update=True)
            check_may_script(adventure, actor)
            assert adventure.id is not None
            script = await _script_named(session, adventure.id, _clean_name(name))
            if part is None:
                await session.delete(script)
                return None
            part = _part(part)
            if not (getattr(script, part.column) or "").strip():
                raise NotFound(f"The script “{script.name}” has no {part.label} code to remove.")
            setattr(script, part.column, "")
            await session.flush()
            return _view(script)

    async def names(self, channel_id: int, typed: str) -> list[str]:
        """Names for autocomplete."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            rows = await session.scalars(
                select(col(AdventureScript.name))
                .where(col(AdventureScript.adventure_id) == adventure.id)
                .order_by(col(AdventureScript.position), col(AdventureScript.id))
            )
            typed = typed.casefold()
            return [name for name in rows if typed in name.casefold()][:25]

    async def test_hook(
        self, channel_id: int, actor: Actor, hook: Hook | str, *, text: str | None = None
    ) -> HookTest:
        """Run ``hook`` of the adventure's enabled scripts as the next turn would; save nothing.

        ``text`` is the input for onInput (a /do action) or the output for onOutput (default:
        the newest narration); onModelContext gets the context the next turn would build.
        """
        hook = _hook(hook)
        if self.rate_limits is not None:
            await self.rate_limits.use(Kind.SCRIPT_TEST, actor)
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            check_may_script(adventure, actor)
            scripts = await TurnScripts.load(
                session, adventure, limits=self.limits, max_cards=self.max_cards
            )
            if scripts is None or not scripts.has(hook):
                raise NotFound(
                    f"No enabled script of this adventure has {hook.label} code to test."
                )
            action_text = ""
            if hook is not Hook.OUTPUT:
                action_text = format_action(
                    PlayerAction(ActionType.DO, text or "look around"), max_chars=4000
                )
            if hook is Hook.CONTEXT:
                inputs = await self.context.gather(
                    session, adventure, action_text, script_state=scripts.state
                )
            elif hook is Hook.OUTPUT and text is None:
                nodes = await line_tail(session, adventure.head_node_id or 0, 1)
                text = nodes[-1].text if nodes and nodes[-1].role == Role.NARRATOR else ""
        stop = False
        if hook is Hook.INPUT:
            text_in = action_text
            try:
                text_out = await scripts.on_input(action_text, ActionType.DO)
            except ScriptStopped:
                text_out, stop = "", True
            except InvalidInput:
                text_out = ""
        elif hook is Hook.CONTEXT:
            scripts.add_current_action(action_text, ActionType.DO)
            built = self.context.build(_with_cards(inputs, scripts))
            text_in = built.script_text
            try:
                text_out = (await scripts.rewrite_context(built)).script_text
            except ScriptStopped:
                text_out, stop = "", True
        else:
            text_in = text or ""
            text_out = await scripts.on_output(text_in)
            stop = text_out == "stop"
        return HookTest(hook, text_in, text_out, stop, scripts.reports, scripts.message)


def _decode(data: bytes, filename: str, *, max_chars: int) -> str:
    """An uploaded file's text; a clear error for a file that is not a script."""
    if not data.strip():
        raise InvalidInput(f"“{filename}” is empty.")
    try:
        code = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInput(
            f"“{filename}” is not UTF-8 text. Upload the script as a .js or .txt file."
        ) from None
    if "\x00" in code:
        raise InvalidInput(f"“{filename}” is a binary file, not a script.")
    if len(code) > max_chars:
        raise InvalidInput(
            f"“{filename}” is {len(code):,} characters long; a script may have at most "
            f"{max_chars:,}."
        )
    return code


def _with_cards(inputs: ContextInputs, scripts: TurnScripts) -> ContextInputs:
    return replace(inputs, cards=scripts.context_cards())


def _view(script: AdventureScript) -> ScriptView:
    sizes = {
        part.label: len(getattr(script, part.column) or "")
        for part in ScriptPart
        if (getattr(script, part.column) or "").strip()
    }
    return ScriptView(script.name, script.enabled, script.position, sizes)


def _part(part: ScriptPart | str) -> ScriptPart:
    try:
        return ScriptPart(part)
    except ValueError:
        raise InvalidInput(
            f"“{part}” is not a script part: choose library, input, context or output."
        ) from None


def _hook(hook: Hook | str) -> Hook:
    try:
        return Hook(hook)
    except ValueError:
        raise InvalidInput(f"“{hook}” is not a hook: choose input, context or output.") from None
