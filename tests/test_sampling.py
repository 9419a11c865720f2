"""Sampling as players tune it: what each kind of model server is sent (over real HTTP, recorded
by the fake model server), what the embedded model is given, and the bounds every value is held
to, with refusals that name the range."""

from __future__ import annotations

import inspect
import json

import pytest

from bot.config import ConfigError, load_settings
from engine.errors import InvalidInput
from engine.llm.providers.base import ChatMessage, GenerationParams
from engine.llm.providers.dialects import DIALECTS, EMBEDDED, dialect_for
from engine.llm.providers.local import LocalLlamaProvider, bundled_model_path
from engine.llm.providers.openai_compat import OpenAICompatibleProvider
from engine.llm.sampling import (
    MIN_P_RANGE,
    REPETITION_PENALTY_RANGE,
    STOP_STRING_CHARS,
    STOP_STRINGS_MAX,
    TOP_P_RANGE,
    check_range,
    parse_stop_strings,
)
from engine.platform.events import StreamEnd, TextDelta
from tests.fakes.openai_server import FakeModelServer

MESSAGES = [ChatMessage("user", "look around the cave")]
#: Every setting set, and five stop strings: one more than OpenAI takes.
TUNED = GenerationParams(
    max_tokens=60,
    temperature=0.7,
    top_p=0.9,
    min_p=0.05,
    repetition_penalty=1.15,
    presence_penalty=0.4,
    frequency_penalty=0.3,
    stop=("\n>", "\nYou:", "THE END", "***", "[Narrator]"),
)
#: The fields every request has, whatever the sampling.
BASE = {"model", "messages", "stream", "stream_options", "max_tokens", "temperature"}
OPENAI_STOPS = ["\n>", "\nYou:", "THE END", "***"]
ALL_STOPS = [*OPENAI_STOPS, "[Narrator]"]
OPENAI_FIELDS = {"top_p": 0.9, "presence_penalty": 0.4, "frequency_penalty": 0.3}
EXTENSIONS = {"min_p": 0.05}


async def _sent(fake: FakeModelServer, kind: str | None, params: GenerationParams) -> dict:
    """The body a provider of ``kind`` sent the fake server for one reply, without the base."""
    fake.queue("The cave is dark.")
    provider = OpenAICompatibleProvider(
        fake.base_url, fake.model, timeout=2.0, dialect=DIALECTS[kind] if kind else None
    )
    try:
        async for _ in provider.stream(MESSAGES, params):
            pass
    finally:
        await provider.aclose()
    body = fake.requests[-1]
    assert body["max_tokens"] == params.max_tokens and body["temperature"] == params.temperature
    return {k: v for k, v in body.items() if k not in BASE and not k.startswith("_")}


# Each server's own documentation, cited in engine/llm/providers/dialects.py.
EXPECTED = {
    # OpenAI: its own fields only, at most 4 stop sequences.
    "openai": {**OPENAI_FIELDS, "stop": OPENAI_STOPS},
    # llama.cpp's server: /completion's options, the penalty as repeat_penalty, any stops.
    "llama.cpp": {**OPENAI_FIELDS, **EXTENSIONS, "repeat_penalty": 1.15, "stop": ALL_STOPS},
    "vllm": {**OPENAI_FIELDS, **EXTENSIONS, "repetition_penalty": 1.15, "stop": ALL_STOPS},
    # KoboldCpp reads frequency_penalty only in place of a missing presence penalty.
    "koboldcpp": {
        "top_p": 0.9,
        "presence_penalty": 0.4,
        **EXTENSIONS,
        "repetition_penalty": 1.15,
        "stop": ALL_STOPS,
    },
    "openrouter": {**OPENAI_FIELDS, **EXTENSIONS, "repetition_penalty": 1.15, "stop": ALL_STOPS},
    # Ollama's /v1 takes no repetition penalty or min-p.
    "ollama": {**OPENAI_FIELDS, "stop": ALL_STOPS},
    # A server Campfire does not know: what any server of the dialect takes.
    "compatible": {**OPENAI_FIELDS, "stop": OPENAI_STOPS},
}


@pytest.mark.parametrize("kind", list(EXPECTED))
async def test_each_kind_of_server_is_sent_exactly_what_it_takes(fake_model, kind):
    assert await _sent(fake_model, kind, TUNED) == EXPECTED[kind]


async def test_nothing_unset_is_sent_and_an_unknown_endpoint_gets_openais_fields(fake_model):
    assert await _sent(fake_model, "llama.cpp", GenerationParams(max_tokens=60)) == {}
    # The fake listens on 127.0.0.1: a server Campfire does not know.
    assert await _sent(fake_model, None, TUNED) == EXPECTED["compatible"]


def test_what_is_left_out_is_said_with_why():
    openai = TUNED.sampling(DIALECTS["openai"])
    assert openai.left_out == (
        "min_p 0.05 (OpenAI does not take it)",
        "repetition penalty 1.15 (OpenAI does not take it)",
        "stop “[Narrator]” (OpenAI takes at most 4)",
    )
    more = GenerationParams(stop=(*TUNED.stop, "END", "FIN")).sampling(DIALECTS["openai"])
    assert more.left_out == ("the last 3 stop strings (OpenAI takes at most 4)",)
    assert openai.sent[:3] == ("top_p 0.9", "presence_penalty 0.4", "frequency_penalty 0.3")
    assert openai.sent[3] == "stop “\\n>”, “\\nYou:”, “THE END”, “***”"
    llama = TUNED.sampling(DIALECTS["llama.cpp"])
    assert llama.left_out == ()
    assert "repetition penalty 1.15 (repeat_penalty)" in llama.sent
    kobold = TUNED.sampling(DIALECTS["koboldcpp"])
    assert kobold.left_out == ("frequency_penalty 0.3 (KoboldCpp does not take it)",)


def test_a_server_is_known_by_its_host_unless_the_operator_names_its_kind():
    assert dialect_for("https://api.openai.com/v1") is DIALECTS["openai"]
    assert dialect_for("https://openrouter.ai/api/v1") is DIALECTS["openrouter"]
    assert dialect_for("http://localhost:8080/v1") is DIALECTS["compatible"]
    assert dialect_for("http://localhost:8080/v1", "llama.cpp") is DIALECTS["llama.cpp"]
    provider = OpenAICompatibleProvider("https://api.openai.com/v1", "gpt-4o-mini")
    assert provider.dialect is DIALECTS["openai"]


def test_the_operators_kind_is_checked_at_start_up(tmp_path):
    settings = load_settings(data_dir=tmp_path, model_kind="  LLAMA.cpp ")
    assert settings.model_kind == "llama.cpp"
    with pytest.raises(ConfigError, match="CAMPFIRE_MODEL_KIND"):
        load_settings(data_dir=tmp_path, model_kind="kobold")


# --- the embedded model --------------------------------------------------------------------------


def test_the_embedded_model_is_given_every_setting_under_llama_cpp_pythons_names():
    from llama_cpp import Llama

    fields = TUNED.sampling(EMBEDDED).fields
    assert fields == {
        "top_p": 0.9,
        "min_p": 0.05,
        "repeat_penalty": 1.15,
        "presence_penalty": 0.4,
        "frequency_penalty": 0.3,
        "stop": ALL_STOPS,
    }
    # Each is a parameter of the call it is given to.
    assert set(fields) <= set(inspect.signature(Llama.create_chat_completion).parameters)
    assert LocalLlamaProvider.dialect is EMBEDDED


@pytest.mark.skipif(bundled_model_path() is None, reason="the 'local' extra is not installed")
async def test_the_embedded_model_stops_at_a_stop_string():
    """A real SmolLM2 run: greedy, it ends its first sentence within a few tokens; with "."
    as a stop string it stops there, the stop left out, and every other setting is taken."""
    provider = LocalLlamaProvider(n_ctx=512)
    messages = [ChatMessage("user", "Describe a quiet forest in two sentences.")]
    params = GenerationParams(
        max_tokens=60,
        temperature=0.0,
        min_p=0.05,
        repetition_penalty=1.1,
        presence_penalty=0.1,
        frequency_penalty=0.1,
        top_p=0.9,
        stop=(".",),
    )
    text, end = "", None
    try:
        async for chunk in provider.stream(messages, params):
            if isinstance(chunk, TextDelta):
                text += chunk.text
            elif isinstance(chunk, StreamEnd):
                end = chunk
    finally:
        await provider.aclose()
    assert text.strip() and "." not in text
    assert end is not None and end.finish_reason == "stop"
    assert end.usage is not None and end.usage.completion_tokens < 60


# --- the bounds ----------------------------------------------------------------------------------


def test_a_value_out_of_range_is_refused_with_the_range_named():
    with pytest.raises(InvalidInput, match=r"^top_p must be between 0.01 and 1; got 1.5\.$"):
        check_range("top_p", 1.5, TOP_P_RANGE)
    with pytest.raises(InvalidInput, match=r"^min_p must be between 0 and 1; got -0.1\.$"):
        check_range("min_p", -0.1, MIN_P_RANGE)
    with pytest.raises(InvalidInput, match="between 1 and 2; got nan"):
        check_range("repetition_penalty", float("nan"), REPETITION_PENALTY_RANGE)
    check_range("top_p", 1.0, TOP_P_RANGE)
    check_range("top_p", None, TOP_P_RANGE)


def test_stop_strings_are_a_json_list_as_sillytavern_writes_them():
    assert parse_stop_strings('["\\nYou:", "THE END", "THE END"]') == ("\nYou:", "THE END")
    assert parse_stop_strings("[]") == ()
    # Control characters go, as from any player's text; a tab and a line break stay.
    assert parse_stop_strings('["\\u0000\\tEnd\\r\\n"]') == ("\tEnd\n",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("THE END", "stop must be a JSON list of strings, as SillyTavern writes"),
        ('{"a": 1}', "stop must be a JSON list of strings"),
        ('["a", 3]', "stop must be a JSON list of strings"),
        (json.dumps(["x"] * 3 + [str(i) for i in range(9)]), "at most 8 strings; got 10"),
        (json.dumps(["a" * 41]), f"at most {STOP_STRING_CHARS} characters; “{'a' * 41}” has 41"),
        ('["\\u0000"]', "A stop string cannot be empty."),
        ("[" + '"a",' * 2000 + '"a"]', "needs no more than"),
    ],
)
def test_stop_strings_out_of_bounds_are_refused_saying_why(text, message):
    with pytest.raises(InvalidInput) as refused:
        parse_stop_strings(text)
    assert message in refused.value.message
    assert STOP_STRINGS_MAX == 8
