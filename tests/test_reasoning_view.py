"""The model's reasoning, read on demand from Insights (the 🧠 Reasoning button): private to
whoever presses, never in the story; a turn without reasoning offers no button. Real discord.py
over the local stand-in, the fake model server streaming a reasoning trace, on both
databases."""

from __future__ import annotations

from tests.discord_env import DiscordEnv, answered
from tests.fakes.openai_server import Reply

THOUGHT = "The player lit a lantern; the reeds should react to the light."
STORY = "The lantern catches, and the reeds go still."


async def one_turn(env: DiscordEnv, fake_model, reply: Reply) -> int:
    thread = await env.start_thread()
    fake_model.queue(reply)
    await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await env.done()
    return thread


async def test_reasoning_is_read_privately_from_insights_and_never_in_the_story(
    env: DiscordEnv, fake_model
):
    thread = await one_turn(env, fake_model, Reply(text=STORY, reasoning=THOUGHT))
    assert env.narration(thread)[-1].startswith(STORY)
    assert all(THOUGHT not in text for text in env.narration(thread))

    record = await env.fake.slash(env.bob, thread, "insights")
    await env.done()
    insights = await answered(env, record)
    assert insights.visible_to == env.bob
    # Reasoning, and the server's 🚩 Report (``cogs.ui.reports``).
    assert [label for label, _, _ in insights.buttons] == ["Reasoning", "Report"]
    assert THOUGHT not in insights.content

    press = await env.fake.press(env.bob, insights.id, label="Reasoning")
    await env.done()
    answer = await answered(env, press)
    assert answer.visible_to == env.bob
    assert "Reasoning" in answer.content and "turn 1" in answer.content
    assert THOUGHT in answer.content
    # Still nowhere in the story.
    assert all(THOUGHT not in text for text in env.narration(thread))


async def test_a_turn_without_reasoning_offers_no_reasoning_view(env: DiscordEnv, fake_model):
    thread = await one_turn(env, fake_model, Reply(text=STORY))
    record = await env.fake.slash(env.bob, thread, "insights")
    await env.done()
    insights = await answered(env, record)
    assert insights.embeds and [label for label, _, _ in insights.buttons] == ["Report"]


async def test_a_long_trace_comes_as_a_file(env: DiscordEnv, fake_model):
    long_thought = " ".join(f"step{i}" for i in range(600))
    thread = await one_turn(env, fake_model, Reply(text=STORY, reasoning=long_thought))
    record = await env.fake.slash(env.alice, thread, "insights")
    await env.done()
    insights = await answered(env, record)
    press = await env.fake.press(env.alice, insights.id, label="Reasoning")
    await env.done()
    answer = await answered(env, press)
    (file,) = answer.attachments
    assert file.filename == "turn-1-reasoning.txt"
    assert file.content.decode() == long_thought
