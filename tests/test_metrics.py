"""/healthz and /metrics: the bot on the stand-in with its operations port open, read over real
HTTP as Prometheus and a load balancer would."""

from __future__ import annotations

import shutil
import socket
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.errors import ModelServerError
from engine.storage.database import Database
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.fakes.openai_server import FakeModelServer, Reply
from tests.helpers import leave_dead_turn


def free_port() -> int:
    """A port nothing listens on now (the OS's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
async def watched(
    tmp_path: Path,
    fake_model: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    database_url: str,
) -> AsyncIterator[tuple[DiscordEnv, str]]:
    """The bot with its operations server on a free port, and that server's address."""
    port = free_port()
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, metrics_port=port
    ) as env:
        yield env, f"http://127.0.0.1:{port}"


async def scrape(base: str) -> dict[str, float]:
    """Every sample /metrics serves, by its name and labels."""
    async with httpx.AsyncClient() as client:
        response = await client.get(f"{base}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


async def test_a_turn_moves_the_turn_token_and_latency_metrics(watched, fake_model):
    env, base = watched
    thread = await env.start_thread()
    before = await scrape(base)
    fake_model.queue(
        Reply(
            text="The lantern flares; the road ahead is clear.",
            prompt_tokens=321,
            completion_tokens=45,
            delay=0.01,
        )
    )
    record = await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await env.done()
    assert record.failed is None
    after = await scrape(base)

    def moved(name: str) -> float:
        return after[name] - before.get(name, 0.0)

    assert moved("campfire_turns_total") == 1
    assert moved("campfire_model_prompt_tokens_total") == 321
    assert moved("campfire_model_completion_tokens_total") == 45
    assert moved("campfire_model_reply_seconds_count") == 1
    assert moved("campfire_model_reply_seconds_sum") > 0
    assert moved("campfire_model_first_token_seconds_count") == 1
    # The narration was streamed by edits, each counted as discord.py sent it.
    assert moved("campfire_discord_message_edits_total") >= len(env.fake.last_message(thread).edits)
    # The stand-in records every 429 it answers, and the env checks it answered none.
    assert after["campfire_discord_rate_limited_total"] == len(env.fake.rate_limited) == 0
    # Nothing waits once the turn is over.
    assert after["campfire_queue_running_adventures"] == 0
    assert after["campfire_queue_waiting_actions"] == 0
    assert not any(name.startswith("campfire_turns_failed_total") for name in after)


async def test_a_failed_turn_is_counted_by_its_kind(watched, fake_model):
    env, base = watched
    thread = await env.start_thread()
    fake_model.queue(Reply(fault="500"))
    await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await env.done()
    after = await scrape(base)
    failed = {name: value for name, value in after.items() if "turns_failed_total" in name}
    # The model server's 500: the kind is the error the players were told of.
    assert failed == {f"campfire_turns_failed_total{{kind={ModelServerError.__name__}}}": 1}
    assert "campfire_turns_total" not in after or after["campfire_turns_total"] == 0


async def test_a_lease_taken_over_from_a_dead_process_is_counted(watched, fake_model):
    env, base = watched
    thread = await env.start_thread()
    adventure = await env.bot.services.play.adventure_in(thread)
    assert adventure is not None
    # A process died mid-turn there a while ago; its lease has expired.
    await leave_dead_turn(
        env.bot.services.db,
        adventure.adventure_id,
        request_id=901,
        user_id=env.alice,
        action={"type": "do", "text": "knock twice"},
        clock=lambda: env.bot.services.leases.clock() - timedelta(minutes=5),
    )
    before = await scrape(base)
    fake_model.queue("The door opens.")
    await env.fake.slash(env.alice, thread, "do", action="knock again")
    await env.done()
    after = await scrape(base)
    assert (
        after["campfire_turn_lease_takeovers_total"] - before["campfire_turn_lease_takeovers_total"]
        == 1
    )
    assert after["campfire_turns_total"] - before.get("campfire_turns_total", 0) == 1


async def test_healthz_answers_ok_when_ready_and_the_database_answers(watched):
    env, base = watched
    async with httpx.AsyncClient() as client:
        response = await client.get(f"{base}/healthz")
    assert (response.status_code, response.text) == (200, "ok\n")


async def test_healthz_answers_503_with_the_reason_when_the_database_is_gone(
    watched, database_url, tmp_path
):
    env, base = watched
    services = env.bot.services
    # A database nobody answers at: PostgreSQL on a port where nothing listens, an SQLite file
    # whose folder was removed (Database makes the folder; SQLite cannot open a file in none).
    if database_url.startswith("postgresql"):
        gone = Database(f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/gone")
    else:
        gone = Database(f"sqlite+aiosqlite:///{tmp_path / 'removed' / 'campfire.db'}")
        shutil.rmtree(tmp_path / "removed")
    working, services.db = services.db, gone
    try:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{base}/healthz")
    finally:
        services.db = working
        await gone.dispose()
    assert response.status_code == 503
    assert response.text.startswith("the database did not answer")
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{base}/healthz")).status_code == 200
