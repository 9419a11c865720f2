"""The operator's moderation check (``engine.turns.moderation``): an OpenAI-compatible
``/moderations`` endpoint (the fake model server's, which flags the words a test names) judges
actions and narrations for the place's rating. A flagged action is refused privately with
nothing stored; a flagged narration is not shown, the turn fails with Retry; a checker that
fails or does not answer lets the text through, or refuses it when the operator says so."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select

from engine.people.content import Rating
from engine.storage.models import StoryNode
from engine.turns.moderation import REFUSED
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.fakes.openai_replies import Reply


def test_what_a_flag_refuses_depends_on_the_rating() -> None:
    assert REFUSED[Rating.SAFE] is None  # every flag
    moderate, mature = REFUSED[Rating.MODERATE], REFUSED[Rating.MATURE]
    assert moderate is not None and mature is not None
    assert "violence/graphic" in moderate and "violence/graphic" not in mature
    assert "sexual/minors" in mature  # at every rating


def _chats(fake_model) -> list[dict]:
    return [r for r in fake_model.requests if r.get("_path") != "/v1/moderations"]


async def _nodes(env: DiscordEnv) -> int:
    async with env.bot.services.db.session() as session:
        return await session.scalar(select(func.count()).select_from(StoryNode)) or 0


def _said(env: DiscordEnv, record) -> list:
    return [m for m in env.fake.messages(record.channel_id) if m.interaction_id == record.id]


async def test_flagged_actions_and_narrations_are_held_back(
    tmp_path: Path, fake_model, caplog, database_url: str
):
    fake_model.moderation_flags = {"gore": "violence/graphic", "entrails": "violence/graphic"}
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, moderation_url=fake_model.base_url
    ) as env:
        thread = await env.start_thread()
        before = await _nodes(env)
        refused = await env.fake.slash(env.bob, thread, "do", action="paint the walls with gore")
        await env.done()
        (answer,) = _said(env, refused)
        assert "refused by this bot's moderation check (violence/graphic" in answer.content
        assert answer.visible_to == env.bob  # to the player alone
        assert _chats(fake_model) == [] and await _nodes(env) == before

        fake_model.queue(
            Reply(text="The beast spills its entrails on the floor.", delay=0.01),
            "The beast flees into the dark.",
        )
        played = await env.fake.slash(env.bob, thread, "do", action="strike the beast")
        await env.done()
        failed = env.fake.message(played.original_message_id)
        assert "held back by this bot's moderation check" in failed.content
        assert [label for label, _, _ in failed.buttons] == ["Retry"]
        assert await _nodes(env) == before  # nothing stored, the action included
        await env.fake.press(env.bob, failed.id, label="Retry")
        await env.done()
        assert env.narration(thread)[-1] == "The beast flees into the dark."
        insights = await env.fake.slash(env.bob, thread, "insights")
        await env.done()
        shown = str(env.fake.message(insights.original_message_id).embeds)
        assert "passed the moderation check" in shown


async def test_a_checker_that_fails_lets_the_text_through_unless_the_operator_refuses(
    tmp_path: Path, fake_model, caplog, database_url: str
):
    async with campfire_on_standin(
        tmp_path,
        fake_model,
        caplog,
        database_url,
        moderation_url=fake_model.base_url,
        moderation_timeout=1.0,
    ) as env:
        thread = await env.start_thread()
        fake_model.queue_moderation_fault("500")
        fake_model.queue("The door opens.")
        await env.fake.slash(env.bob, thread, "do", action="open the door")
        await env.done()
        assert env.narration(thread)[-1] == "The door opens."
        assert "moderation check skipped" in caplog.text

    async with campfire_on_standin(
        tmp_path / "closed",
        fake_model,
        caplog,
        database_url,
        moderation_url=fake_model.base_url,
        moderation_timeout=1.0,
        moderation_fail_closed=True,
    ) as env:
        thread = await env.start_thread()
        fake_model.queue_moderation_fault("timeout")
        record = await env.fake.slash(env.bob, thread, "do", action="knock")
        await env.done()
        message = env.fake.message(record.original_message_id)
        assert "moderation check could not run" in message.content
        assert [label for label, _, _ in message.buttons] == ["Retry"]
        fake_model.queue("Someone answers.")
        await env.fake.press(env.bob, message.id, label="Retry")
        await env.done()
        assert env.narration(thread)[-1] == "Someone answers."
