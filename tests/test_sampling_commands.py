"""Sampling through Discord: /adventure settings sets, shows and refuses an adventure's sampling
and its author's note depth; the next turn sends the model exactly what its server takes (the
fake model server records each request) and Insights says what was sent and what was not; an
adventure file carries them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from discord.utils import escape_markdown as markdown
from sqlalchemy import select
from sqlmodel import col

from cogs.adventure_settings import settings_text
from engine.library.archive import AdventureArchive
from engine.library.formats.draft import ImportLimits
from engine.library.reading.errors import ImportRejected
from engine.llm.providers.dialects import DIALECTS
from engine.llm.sampling import STOP_STRING_CHARS, STOP_STRINGS_MAX
from engine.storage.models import Adventure
from engine.story.steering.settings import (
    AdventureSettings,
    GenerationDefaults,
    Sampling,
    _left_out,
)
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.fakes.openai_server import FakeModelServer
from tests.test_adventure_files import ALICE, grown_adventure
from tests.test_steering_commands import adventure_here, answer

TUNING = {
    "top_p": 0.9,
    "min_p": 0.05,
    "repetition_penalty": 1.1,
    "presence_penalty": 0.2,
    "frequency_penalty": 0.3,
}
OPENING = "Dusk settles"  # how the default scenario's opening narration begins


@pytest.fixture
async def llama_env(tmp_path, fake_model, caplog, database_url) -> AsyncIterator[DiscordEnv]:
    """Campfire whose operator names their server: llama.cpp's (``CAMPFIRE_MODEL_KIND``)."""
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, model_kind="llama.cpp"
    ) as environment:
        yield environment


def chats(fake_model: FakeModelServer) -> list[dict]:
    return [r for r in fake_model.requests if r["_path"].endswith("/chat/completions")]


async def insights(env: DiscordEnv, thread: int) -> str:
    record = await env.fake.slash(env.bob, thread, "insights")
    await env.done()
    return (await answer(env, record)).embeds[0]["description"]


async def test_settings_are_shown_and_the_next_turn_sends_them_all_to_llama_cpp(
    llama_env, fake_model
):
    env = llama_env
    thread = await env.start_thread()
    record = await env.fake.slash(
        env.alice,
        thread,
        "adventure settings",
        **TUNING,
        stop='["\\nYou:", "THE END"]',
        note_depth=2,
    )
    content = (await answer(env, record)).content
    assert content.startswith("Settings updated; they apply from the next turn.")
    assert (
        "Sampling: top_p **0.9** · min_p **0.05** · repetition_penalty **1.1** · "
        "presence_penalty **0.2** · frequency_penalty **0.3** (— the model server's own)"
    ) in content
    stops = "Stop strings: “\\\\n>” (Campfire's: the player's next action), “\\\\nYou:”, “THE END”"
    assert stops in content
    assert "Author's note: **2** entries from the end of the story" in content
    assert "prompt cache stops there" in content and "not sent" not in content

    await env.fake.slash(env.alice, thread, "note", text="Keep it eerie.")
    fake_model.queue("The lantern gutters.")
    await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await env.done()
    (request,) = chats(fake_model)
    sent = {k: request.get(k) for k in ("top_p", "min_p", "repeat_penalty", "stop")}
    assert sent == {
        "top_p": 0.9,
        "min_p": 0.05,
        "repeat_penalty": 1.1,
        "stop": ["\n>", "\nYou:", "THE END"],
    }
    assert (request["presence_penalty"], request["frequency_penalty"]) == (0.2, 0.3)
    assert "repetition_penalty" not in request  # llama.cpp's name is repeat_penalty
    # Depth 2, the new action the newest entry: the note comes before the opening narration.
    system, user = (m["content"] for m in request["messages"])
    assert "Keep it eerie." not in system
    assert user.index("[Author's note: Keep it eerie.]") < user.index(OPENING)
    assert user.index(OPENING) < user.index("> alice lights the lantern.")

    shown = await insights(env, thread)
    assert (
        "**Sampling sent:** "
        + markdown(
            "temperature 0.8, top_p 0.9, min_p 0.05, repetition penalty 1.1 (repeat_penalty), "
            "presence_penalty 0.2, frequency_penalty 0.3, stop “\\n>”, “\\nYou:”, “THE END”"
        )
        in shown
    )
    assert "Not sent" not in shown
    assert "Author's note         9 ▏░░░░░░░░░ depth 2: in the story" in shown


async def test_a_server_that_does_not_take_a_setting_is_not_sent_it_and_players_are_told(
    env, fake_model
):
    """The operator named no kind and the fake listens on 127.0.0.1: a server Campfire does not
    know, sent OpenAI's own fields only (OpenAI refuses the others with a 400)."""
    thread = await env.start_thread()
    record = await env.fake.slash(
        env.alice, thread, "adventure settings", top_p=0.5, min_p=0.05, repetition_penalty=1.2
    )
    content = (await answer(env, record)).content
    assert (
        "⚠ This adventure's model runs on an OpenAI-compatible server, which is not sent: "
        + markdown(
            "min_p 0.05 (an OpenAI-compatible server does not take it); repetition penalty 1.2 "
            "(an OpenAI-compatible server does not take it)"
        )
        + "."
    ) in content

    fake_model.queue("The lantern gutters.")
    await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await env.done()
    (request,) = chats(fake_model)
    assert request["top_p"] == 0.5 and request["stop"] == ["\n>"]
    assert not {"min_p", "repetition_penalty", "repeat_penalty"} & set(request)
    # Unset: the note closes the system message, as before.
    shown = await insights(env, thread)
    assert "**Sampling sent:** " + markdown("temperature 0.8, top_p 0.5, stop “\\n>”") in shown
    assert (
        "**Not sent:** "
        + markdown(
            "min_p 0.05 (an OpenAI-compatible server does not take it); "
            "repetition penalty 1.2 (an OpenAI-compatible server does not take it)"
        )
        in shown
    )


@pytest.mark.parametrize(
    ("option", "refusal"),
    [
        ({"top_p": 1.5}, "⚠ top_p must be between 0.01 and 1; got 1.5."),
        ({"min_p": 2}, "⚠ min_p must be between 0 and 1; got 2."),
        ({"repetition_penalty": 0.5}, "⚠ repetition_penalty must be between 1 and 2; got 0.5."),
        ({"presence_penalty": -3}, "⚠ presence_penalty must be between -2 and 2; got -3."),
        ({"frequency_penalty": 2.5}, "⚠ frequency_penalty must be between -2 and 2; got 2.5."),
        ({"note_depth": 101}, "⚠ note_depth must be between 0 and 100; got 101."),
        ({"stop": "THE END"}, "⚠ stop must be a JSON list of strings, as SillyTavern writes"),
        ({"stop": json.dumps(["x" * 41])}, "⚠ A stop string may have at most 40 characters"),
    ],
)
async def test_a_value_out_of_range_is_refused_naming_the_range_and_nothing_changes(
    env, option, refusal
):
    thread = await env.start_thread()
    settings = {"temperature": 0.3, **option}
    record = await env.fake.slash(env.alice, thread, "adventure settings", **settings)
    assert (await answer(env, record)).content.startswith(refusal)
    adventure = await adventure_here(env, thread)
    assert adventure.temperature is None and adventure.stop_strings == []
    assert adventure.authors_note_depth is None and adventure.top_p is None


async def test_only_who_may_steer_sets_them_and_reset_returns_them_all(env):
    thread = await env.start_thread()
    refused = await env.fake.slash(env.bob, thread, "adventure settings", min_p=0.1)
    assert "Only alice" in (await answer(env, refused)).content
    record = await env.fake.slash(
        env.alice, thread, "adventure settings", **TUNING, stop='["END"]', note_depth=0
    )
    assert "Author's note: **0** entries" in (await answer(env, record)).content
    adventure = await adventure_here(env, thread)
    assert (adventure.min_p, adventure.stop_strings, adventure.authors_note_depth) == (
        0.05,
        ["END"],
        0,
    )
    # A stop list of its own replaces the old one; [] clears it.
    record = await env.fake.slash(env.alice, thread, "adventure settings", stop="[]")
    assert (
        "Stop strings: “\\\\n>” (Campfire's: the player's next action)\n"
        in (await answer(env, record)).content
    )
    assert (await adventure_here(env, thread)).stop_strings == []
    record = await env.fake.slash(env.alice, thread, "adventure settings", reset=True)
    content = (await answer(env, record)).content
    assert "Sampling: top_p — · min_p — · repetition_penalty —" in content
    assert "Author's note: closes the system message" in content
    adventure = await adventure_here(env, thread)
    assert [getattr(adventure, name) for name in TUNING] == [None] * 5
    assert adventure.authors_note_depth is None


# --- an adventure file carries them --------------------------------------------------------------


async def test_an_adventure_file_carries_its_sampling_and_refuses_a_value_past_its_range(
    db, provider, fake_model
):
    archive = AdventureArchive(db, ImportLimits())
    adventure_id = await grown_adventure(db, provider, fake_model, channel_id=1)
    async with db.session() as session, session.begin():
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None
        for name, value in TUNING.items():
            setattr(adventure, name, value)
        adventure.stop_strings = ["\nYou:"]
        adventure.authors_note_depth = 3
    raw = json.loads((await archive.export(ALICE, 1)).content)
    carried = {**TUNING, "stop_strings": ["\nYou:"], "authors_note_depth": 3}
    assert {name: raw["settings"][name] for name in carried} == carried
    await archive.restore(ALICE, 2, await archive.read(json.dumps(raw).encode()))
    async with db.session() as session:
        restored = await session.scalar(select(Adventure).where(col(Adventure.channel_id) == 2))
    assert restored is not None
    assert {name: getattr(restored, name) for name in TUNING} == TUNING
    assert (restored.stop_strings, restored.authors_note_depth) == (["\nYou:"], 3)

    for key, value, message in (
        ("min_p", 3, "settings.min_p: min_p must be between 0 and 1; got 3."),
        ("stop_strings", list("abcdefghi"), "settings.stop_strings: stop may hold at most 8"),
        ("authors_note_depth", 500, "settings.authors_note_depth: 500 is out of range (0 to"),
    ):
        bad = json.loads(json.dumps(raw))
        bad["settings"][key] = value
        with pytest.raises(ImportRejected) as refused:
            await archive.read(json.dumps(bad).encode())
        assert str(refused.value).startswith(message)
    # A file from before they travelled: the model server's own, the note's usual place.
    for key in (*TUNING, "stop_strings", "authors_note_depth"):
        del raw["settings"][key]
    await archive.restore(ALICE, 3, await archive.read(json.dumps(raw).encode()))
    async with db.session() as session:
        older = await session.scalar(select(Adventure).where(col(Adventure.channel_id) == 3))
    assert older is not None and older.top_p is None and older.stop_strings == []


async def test_the_operators_top_p_is_the_default_an_adventure_sets_its_own(
    tmp_path, fake_model, caplog, database_url
):
    async with campfire_on_standin(tmp_path, fake_model, caplog, database_url, top_p=0.95) as env:
        thread = await env.start_thread()
        record = await env.fake.slash(env.alice, thread, "adventure settings")
        assert "Sampling: top_p 0.95 (default) · min_p —" in (await answer(env, record)).content
        record = await env.fake.slash(env.alice, thread, "adventure settings", top_p=0.5)
        assert "Sampling: top_p **0.5** · min_p —" in (await answer(env, record)).content
        fake_model.queue("The lantern gutters.")
        await env.fake.slash(env.alice, thread, "do", action="light the lantern")
        await env.done()
        assert [request["top_p"] for request in chats(fake_model)] == [0.5]


def test_the_longest_settings_still_fit_one_discord_message():
    """Every setting set, eight stop strings of forty line breaks (each shown escaped), held to
    the operator's ceilings and half of it not sent: one message (Discord's 2,000 characters)
    still holds all of it, the stop strings cut short."""
    stops = tuple(f"*{i}*" + "\n" * (STOP_STRING_CHARS - 3) for i in range(STOP_STRINGS_MAX))
    settings = AdventureSettings(
        1,
        "T" * 100,
        100_000,
        2_000,
        1.1,
        GenerationDefaults(4096, 300, 0.8, 0.95),
        True,
        100,
        held=("context 100,000 tokens held to the operator's 4,096",) * 2,
        sampling=Sampling(0.9, 0.05, 1.1, -0.25, -0.35, stops, 100),
    )
    openai = DIALECTS["openai"]
    text = settings_text(
        replace(settings, dialect=openai, left_out=_left_out(settings, openai)), changed=True
    )
    assert len(text) <= 2000
    assert text.endswith("returns every generation setting to its default.")
    assert "the last 5 stop strings (OpenAI takes at most 4)" in text
