"""Starting an adventure from a scenario."""

from __future__ import annotations

import copy
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import SQLModel, col

from engine.errors import InvalidInput, NotFound
from engine.library.formats.draft import MAX_OPTIONS, fill_placeholders, scenario_questions
from engine.library.formats.macros import USER_QUESTION, fill_user, uses_user
from engine.prompt.tokens import count_tokens
from engine.storage.models import (
    ActionType,
    Adventure,
    AdventureCard,
    AdventureScript,
    Branch,
    CardFields,
    Role,
    Scenario,
    ScenarioCard,
    ScenarioScript,
    ScriptFields,
    SteeringFields,
    StoryNode,
)
from engine.storage.party_models import Character
from engine.storage.play_models import ScenarioOpening
from engine.story.chapters.store import begin_chapters
from engine.story.characters import clean_name, name_key
from engine.story.world.apply import schema_of
from engine.story.world.schema import initial_state

MAIN_BRANCH = "main"


async def start_adventure(
    session: AsyncSession,
    scenario_id: int,
    *,
    channel_id: int | None = None,
    server_id: int | None = None,
    host_id: int | None = None,
    answers: dict[str, str] | None = None,
    opening: int = 0,
) -> Adventure:
    """Create an adventure, copying the scenario's fields, cards and scripts.

    ``answers`` fill the scenario's ``${placeholders}`` (asked for at /start) wherever they
    appear: the opening, the steering text and the cards; a character card's ``{{user}}`` is
    the answer to ``USER_QUESTION`` in a server, "you" in a DM (``macros.fill_user``).
    ``opening`` is the position of the opening chosen (``scenario_openings``; 0, the prompt).

    A server adventure belongs to the server; one outside a server (a DM) belongs to its host.
    The opening text is the root of the story tree, on a branch called "main". The caller
    commits.
    """
    scenario = await session.get(Scenario, scenario_id)
    if scenario is None:
        raise NotFound("That scenario no longer exists.")
    fields = _copy(scenario, SteeringFields)
    if opening:
        chosen = await session.get(ScenarioOpening, (scenario.id, opening))
        if chosen is None or (chosen.group_only and server_id is None):
            raise InvalidInput("That opening is not one this scenario offers here.")
        fields["prompt"] = chosen.text
    cards = [
        _copy(card, CardFields)
        for card in await session.scalars(
            select(ScenarioCard).where(col(ScenarioCard.scenario_id) == scenario.id)
        )
    ]
    if answers:
        for name in ("prompt", "plot_essentials", "authors_note", "ai_instructions"):
            fields[name] = fill_placeholders(str(fields[name]), answers)
        for card in cards:
            for name in ("title", "keys", "entry"):
                card[name] = fill_placeholders(str(card[name]), answers)
    user = (answers or {}).get(USER_QUESTION) if server_id is not None else None
    steering = ("prompt", "plot_essentials", "authors_note", "ai_instructions")
    texts = [str(fields[n]) for n in steering]
    plays_user = any(uses_user(t) for t in texts + [str(c["entry"]) for c in cards])
    for name in steering:
        fields[name] = fill_user(str(fields[name]), user)
    for card in cards:
        for name in ("title", "keys", "entry"):
            card[name] = fill_user(str(card[name]), user)
    adventure = Adventure(
        **fields,
        scenario_id=scenario.id,
        server_id=server_id,
        owner_id=None if server_id is not None else host_id,
        host_id=host_id,
        channel_id=channel_id,
    )
    schema = schema_of(adventure.stat_schema)
    if schema is not None:
        adventure.world_state = initial_state(schema)
    session.add(adventure)
    await session.flush()
    assert adventure.id is not None  # flushed just above
    if plays_user and user and host_id is not None:
        _name_host(session, adventure.id, host_id, user)
    await begin_chapters(session, adventure, scenario.id)

    session.add_all(AdventureCard(**card, adventure_id=adventure.id) for card in cards)
    scripts = await session.scalars(
        select(ScenarioScript).where(col(ScenarioScript.scenario_id) == scenario.id)
    )
    session.add_all(
        AdventureScript(**_copy(script, ScriptFields), adventure_id=adventure.id)
        for script in scripts
    )

    root = StoryNode(
        adventure_id=adventure.id,
        index=0,
        role=Role.NARRATOR,
        action=ActionType.START,
        author_id=host_id,
        text=adventure.prompt,
        token_count=count_tokens(adventure.prompt),
    )
    session.add(root)
    await session.flush()
    branch = Branch(adventure_id=adventure.id, name=MAIN_BRANCH, tip_node_id=root.id)
    session.add(branch)
    await session.flush()
    adventure.head_node_id = root.id
    adventure.active_branch_id = branch.id
    await session.flush()
    return adventure


async def scenario_questions_of(
    session: AsyncSession, scenario: Scenario, *, group: bool = False
) -> list[str]:
    """The ``${questions}`` /start asks for the scenario (``scenario_questions``); in a group
    (a server), a character card's ``{{user}}`` asks the host's character's name first."""
    cards = [
        tuple(row)
        for row in await session.execute(
            select(col(ScenarioCard.title), col(ScenarioCard.keys), col(ScenarioCard.entry))
            .where(col(ScenarioCard.scenario_id) == scenario.id)
            .order_by(col(ScenarioCard.position), col(ScenarioCard.id))
        )
    ]
    assert scenario.id is not None
    openings = [o.text for o in await scenario_openings(session, scenario.id)]
    prompts = "\n".join([scenario.prompt, *openings])
    questions = scenario_questions(scenario.plot_essentials, prompts, scenario.authors_note, cards)
    texts = [scenario.plot_essentials, prompts, scenario.authors_note, scenario.ai_instructions]
    if (
        group
        and USER_QUESTION not in questions
        and uses_user("\n".join(texts + [p for c in cards for p in c]))
    ):
        questions.insert(0, USER_QUESTION)
    return questions


async def scenario_openings(session: AsyncSession, scenario_id: int) -> list[ScenarioOpening]:
    """The scenario's openings after its prompt, in order."""
    rows = await session.scalars(
        select(ScenarioOpening)
        .where(col(ScenarioOpening.scenario_id) == scenario_id)
        .order_by(col(ScenarioOpening.position))
    )
    return list(rows)


async def scenario_script_names(session: AsyncSession, scenario_id: int) -> list[str]:
    """The names of the scripts an adventure started from the scenario would run."""
    names = await session.scalars(
        select(col(ScenarioScript.name))
        .where(col(ScenarioScript.scenario_id) == scenario_id)
        .order_by(col(ScenarioScript.position), col(ScenarioScript.id))
    )
    return list(names)


async def options_offered(session: AsyncSession, scenario_id: int) -> list[tuple[str, str]]:
    """A menu scenario's options as /start offers them: (label, scenario id), one menu's worth."""
    options = await session.scalars(
        select(Scenario)
        .where(col(Scenario.parent_id) == scenario_id)
        .order_by(col(Scenario.id))
        .limit(MAX_OPTIONS)
    )
    return [(f"{o.icon} {o.title}".strip()[:100], str(o.id)) for o in options]


async def openings_offered(
    session: AsyncSession, scenario: Scenario, *, group: bool
) -> list[tuple[int, str]]:
    """The openings /start offers here, by position with their first words, the prompt first
    (none when the prompt is the only one); a group-only opening only to a group."""
    assert scenario.id is not None
    offered = [
        (o.position, o.text)
        for o in await scenario_openings(session, scenario.id)
        if group or not o.group_only
    ]
    if not offered:
        return []
    return [(p, opening_label(text)) for p, text in [(0, scenario.prompt), *offered]]


def _name_host(session: AsyncSession, adventure_id: int, host_id: int, answer: str) -> None:
    """The host's character is the card's ``{{user}}``, named as they answered, so their
    actions are written with the name the story calls them by. A name a character may not
    have (``clean_name``: markup, "You") still stands in the story; the host names their
    character with /character set then."""
    try:
        name = clean_name(answer)
    except InvalidInput:
        return
    session.add(
        Character(adventure_id=adventure_id, user_id=host_id, name=name, name_key=name_key(name))
    )


#: A button's label holds 80 characters: room for the opening's number before it ("12. ").
LABEL_MAX = 76


def opening_label(text: str) -> str:
    """An opening's first words as a button says them: on one line, without the emphasis
    marks roleplay greetings are written in (``*She looks up.*``)."""
    plain = " ".join(fill_user(text, None).replace("*", "").replace("_", " ").split())
    if len(plain) <= LABEL_MAX:
        return plain or "(empty)"
    return plain[: LABEL_MAX - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _copy(source: SQLModel, fields: type[SQLModel]) -> dict[str, Any]:
    """The values of the shared field set, deep enough that the copy owns its JSON.

    Keyed by field name, each value of its field's type: the sets differ, hence ``Any``.
    """
    return {name: copy.deepcopy(getattr(source, name)) for name in fields.model_fields}
