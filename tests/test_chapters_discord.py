"""Chapters through Discord: a beat done shows under the turn, /chapters answers privately with
where the story stands and each ended chapter's recap, and refuses where there are none.
Real discord.py over the local stand-in, the fake model server behind the bot."""

from __future__ import annotations

import json

from tests.discord_env import DiscordEnv, answered
from tests.test_host_commands import act, refused


def said(prose: str, *events: str) -> str:
    return f"{prose}\n\n```state\n{json.dumps({'events': list(events)})}\n```"


async def chapters_text(env: DiscordEnv, thread: int, user: int) -> str:
    record = await env.fake.slash(user, thread, "chapters")
    await env.done()
    message = await answered(env, record)
    assert message.visible_to == user
    return message.embeds[0]["description"]


async def test_chapters_show_progress_and_recaps_privately(env: DiscordEnv, fake_model):
    thread = await env.start_thread(scenario="tidewatch")
    listed = await chapters_text(env, thread, env.bob)
    assert "▶️ 1. The Dark Lamp · beat 1 of 2: Reach the lamp room" in listed
    assert "🔒 2. (still ahead)" in listed and "Drowned Chapel" not in listed
    assert "No chapter has ended yet." in listed

    fake_model.queue(said("You climb to the lamp room.", "searched:lamp_room"))
    await act(env, thread, env.alice, "climb the stair")
    shown = env.narration(thread)[-1]
    assert shown.startswith("You climb to the lamp room.")
    assert "events" not in shown and "-# ✦ Reach the lamp room" in shown

    fake_model.queue(
        said("Wren waves from the slip.", "met_wren", "found_clue"),
        said("Chisel marks on the lens.", "found_clue"),
        "The apprentice learned the light was put out on purpose.",
    )
    await act(env, thread, env.alice, "call to the girl")
    await act(env, thread, env.alice, "look at the lens")
    shown = env.narration(thread)[-1]
    assert "📖 Chapter 1 “The Dark Lamp” complete · next: “The Drowned Chapel”" in shown

    listed = await chapters_text(env, thread, env.bob)
    assert "✅ 1. The Dark Lamp" in listed
    assert "▶️ 2. The Drowned Chapel · beat 1 of 2: Cross the causeway" in listed
    assert "**Chapter 1: The Dark Lamp**" in listed
    assert "The apprentice learned the light was put out on purpose." in listed
    # The tally in the scenario's words, not its ids ("lamp_room", "met_wren").
    assert "Tally: places: lamp room · clues: 2 · met Wren: yes" in listed
    recap_call = next(
        r["messages"][-1]["content"]
        for r in fake_model.requests
        if r["messages"][-1]["content"].endswith("Write the recap.")
    )
    assert "Tally: places: lamp room · clues: 2 · met Wren: yes" in recap_call


async def test_chapters_are_refused_privately_where_there_are_none(env: DiscordEnv):
    thread = await env.start_thread(scenario="lantern")
    text = await refused(env, await env.fake.slash(env.bob, thread, "chapters"))
    assert "has no chapters" in text
    text = await refused(env, await env.fake.slash(env.bob, env.channel, "chapters"))
    assert "no adventure" in text.lower()
