"""Checks of the fake OpenAI server itself, over real HTTP."""

from __future__ import annotations

import base64
import json
import math
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.openai_server import FAULTS, FakeModelServer, Reply, fake_embedding, tokens

MESSAGES = [{"role": "user", "content": "look around the cave"}]


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    # One client for the module: building a client costs ~40 ms (TLS context), which adds up.
    with httpx.Client(timeout=5.0) as client:
        yield client


@pytest.fixture
def fake() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server
    # The server swallows handler exceptions to stay quiet; make sure none happened.
    assert server.errors == []


def chat_body(stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {"model": "fake-model", "messages": MESSAGES, "stream": stream, **extra}


def stream_lines(http: httpx.Client, fake: FakeModelServer, **extra: Any) -> list[str]:
    with http.stream(
        "POST", f"{fake.base_url}/chat/completions", json=chat_body(**extra)
    ) as response:
        assert response.status_code == 200
        return list(response.iter_lines())


def events(lines: list[str]) -> list[dict[str, Any]]:
    """The JSON payloads of the data: lines, without [DONE]."""
    datas = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    return [json.loads(d) for d in datas if d != "[DONE]"]


def deltas(lines: list[str], field: str = "content") -> str:
    return "".join(e["choices"][0]["delta"].get(field) or "" for e in events(lines) if e["choices"])


# --------------------------------------------------------------------- streaming


def test_stream_reassembles_text_exactly(http: httpx.Client, fake: FakeModelServer) -> None:
    text = "  The cave\tis dark.\n\nA  drip echoes…  "
    fake.queue(text)
    with http.stream("POST", f"{fake.base_url}/chat/completions", json=chat_body()) as r:
        assert r.headers["content-type"] == "text/event-stream"
        assert r.headers["cache-control"] == "no-cache"
        assert "content-length" not in r.headers
        lines = list(r.iter_lines())
    assert lines[0] == ": keep-alive"
    assert [line for line in lines if line.startswith("data: ")][-1] == "data: [DONE]"
    chunks = events(lines)
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert deltas(lines) == text
    assert len(chunks) == 2 + len(tokens(text))
    assert chunks[-1]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "stop",
    }


def test_usage_chunk_only_when_requested(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue("one two three", "one two three")
    without = events(stream_lines(http, fake))
    assert all("usage" not in e for e in without)

    lines = stream_lines(http, fake, stream_options={"include_usage": True})
    last = events(lines)[-1]
    assert last["choices"] == []
    assert last["usage"] == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}
    assert all(e["usage"] is None for e in events(lines)[:-1])


def test_usage_numbers_can_be_scripted(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(text="hi", prompt_tokens=1000, completion_tokens=5))
    lines = stream_lines(http, fake, stream_options={"include_usage": True})
    assert events(lines)[-1]["usage"] == {
        "prompt_tokens": 1000,
        "completion_tokens": 5,
        "total_tokens": 1005,
    }


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_streams_before_content(
    http: httpx.Client, fake: FakeModelServer, field: str
) -> None:
    fake.queue(Reply(reasoning="Let me think. Twice.", text="Done.", reasoning_field=field))
    lines = stream_lines(http, fake)
    kinds = [
        next(iter(e["choices"][0]["delta"]), None)
        for e in events(lines)[1:-1]  # between the role chunk and the finish chunk
    ]
    assert kinds == [field] * 4 + ["content"]
    assert deltas(lines, field) == "Let me think. Twice."
    assert deltas(lines) == "Done."


def test_reasoning_exhaustion_finishes_with_length(
    http: httpx.Client, fake: FakeModelServer
) -> None:
    fake.queue(Reply(reasoning="hmm " * 5, text="", finish_reason="length"))
    lines = stream_lines(http, fake)
    assert deltas(lines) == ""
    assert events(lines)[-1]["choices"][0]["finish_reason"] == "length"


def test_delay_paces_chunks(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(text="a b", delay=0.05))
    start = time.monotonic()
    stream_lines(http, fake)  # role, 2 tokens, finish, [DONE]: five waits
    assert time.monotonic() - start >= 0.25


def test_status_delay_holds_headers(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(text="late", status_delay=0.2))
    start = time.monotonic()
    with http.stream("POST", f"{fake.base_url}/chat/completions", json=chat_body()) as r:
        assert time.monotonic() - start >= 0.2
        assert r.status_code == 200


# --------------------------------------------------------------------- faults


def post_chat(http: httpx.Client, fake: FakeModelServer, **extra: Any) -> httpx.Response:
    return http.post(f"{fake.base_url}/chat/completions", json=chat_body(**extra))


@pytest.mark.parametrize("stream", [True, False])
def test_fault_500(http: httpx.Client, fake: FakeModelServer, stream: bool) -> None:
    fake.queue(Reply(fault="500"))
    r = post_chat(http, fake, stream=stream)
    assert r.status_code == 500
    assert r.json() == {"error": {"message": "Internal server error", "type": "server_error"}}


@pytest.mark.parametrize(("retry_after", "header"), [(2.0, "2"), (2.5, "3"), (0.2, "1")])
def test_fault_429_has_retry_after(
    http: httpx.Client, fake: FakeModelServer, retry_after: float, header: str
) -> None:
    fake.queue(Reply(fault="429", retry_after=retry_after))
    r = post_chat(http, fake)
    assert r.status_code == 429
    assert r.headers["retry-after"] == header
    assert r.json()["error"]["type"] == "rate_limit_error"


def test_faults_401_and_404(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(fault="401"), Reply(fault="404"))
    r = post_chat(http, fake)
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "invalid_api_key"
    r = post_chat(http, fake)
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "model_not_found"


def test_fault_timeout_and_stop_does_not_hang(http: httpx.Client) -> None:
    fake = FakeModelServer().start()
    fake.queue(Reply(fault="timeout"))
    with pytest.raises(httpx.ReadTimeout):
        http.post(
            f"{fake.base_url}/chat/completions",
            json=chat_body(),
            timeout=httpx.Timeout(5.0, read=0.5),
        )
    # The client gave up and closed its socket; the server notices.
    assert fake.wait_for_disconnect(timeout=1)
    start = time.monotonic()
    fake.stop()
    assert time.monotonic() - start < 1.0


def test_stop_cuts_a_held_request(http: httpx.Client) -> None:
    fake = FakeModelServer().start()
    fake.queue(Reply(fault="timeout"))
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            http.post(f"{fake.base_url}/chat/completions", json=chat_body(), timeout=5)
        except httpx.HTTPError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    time.sleep(0.2)
    start = time.monotonic()
    fake.stop()
    assert time.monotonic() - start < 1.0
    thread.join(timeout=2)
    assert not thread.is_alive()
    assert outcome and isinstance(outcome[0], httpx.RemoteProtocolError | httpx.ReadError)


def test_fault_stall_goes_silent_mid_stream(http: httpx.Client) -> None:
    fake = FakeModelServer().start()
    fake.queue(Reply(text="one two three four", fault="stall"))
    lines: list[str] = []
    with pytest.raises(httpx.ReadTimeout):
        with http.stream(
            "POST",
            f"{fake.base_url}/chat/completions",
            json=chat_body(),
            timeout=httpx.Timeout(5.0, read=0.5),
        ) as r:
            for line in r.iter_lines():
                lines.append(line)
    # Half the reply arrived, then nothing: no finish, no [DONE], the connection still open.
    assert deltas(lines) == "one two "
    assert "data: [DONE]" not in lines
    assert fake.wait_for_disconnect(timeout=1)
    fake.stop()


def test_fault_endless_streams_until_cut(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(text="on and ", fault="endless", delay=0.01))
    lines: list[str] = []

    def cut_later() -> None:
        assert fake.wait_for_chunks(20, timeout=5)
        fake.cut_endless_streams()

    cutter = threading.Thread(target=cut_later)
    cutter.start()
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        with http.stream("POST", f"{fake.base_url}/chat/completions", json=chat_body()) as r:
            for line in r.iter_lines():
                lines.append(line)
    cutter.join(timeout=5)
    text = deltas(lines)
    # Round after round of the text, never a finish reason.
    assert text.startswith("on and on and on and ") and len(text) >= 20 * 3
    assert all(c["choices"][0]["finish_reason"] is None for c in events(lines) if c["choices"])


def test_chunks_are_counted_as_they_stream(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(text="one two three", reasoning="hmm "))
    stream_lines(http, fake)
    assert fake.content_chunks == 4
    assert fake.wait_for_chunks(4, timeout=0)
    assert not fake.wait_for_chunks(5, timeout=0.05)


def test_fault_disconnect_breaks_the_stream(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(text="one two three four five six", fault="disconnect"))
    lines: list[str] = []
    # Chunked encoding cut short: h11 reports an incomplete body.
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        with http.stream("POST", f"{fake.base_url}/chat/completions", json=chat_body()) as r:
            for line in r.iter_lines():
                lines.append(line)
    assert deltas(lines) == "one two three "
    assert "data: [DONE]" not in lines


def test_fault_disconnect_without_chunking_just_stops(http: httpx.Client) -> None:
    with FakeModelServer(chunked=False) as fake:
        fake.queue(Reply(text="one two three four", fault="disconnect"))
        lines = stream_lines(http, fake)
    # Read-until-close framing: the end looks clean, only the missing [DONE] tells.
    assert deltas(lines) == "one two "
    assert "data: [DONE]" not in lines


def test_fault_disconnect_non_streamed(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(text="one two", fault="disconnect"))
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        post_chat(http, fake, stream=False)


def test_fault_malformed(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(text="one two three", fault="malformed"))
    lines = stream_lines(http, fake)
    assert "data: {not json" in lines
    assert lines.index("data: {not json") < lines.index("data: [DONE]")
    good = [line for line in lines if line.startswith("data: {") and line != "data: {not json"]
    assert len(good) >= 2
    assert all(json.loads(line[6:]) for line in good)


def test_fault_malformed_non_streamed(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(text="x", fault="malformed"))
    r = post_chat(http, fake, stream=False)
    assert r.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        r.json()


def test_fault_empty(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(text="ignored", fault="empty"), Reply(text="ignored", fault="empty"))
    lines = stream_lines(http, fake)
    chunks = events(lines)
    assert len(chunks) == 2
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert deltas(lines) == ""
    assert "data: [DONE]" in lines
    r = post_chat(http, fake, stream=False)
    assert r.json()["choices"][0]["message"]["content"] == ""


def test_unknown_fault_is_rejected() -> None:
    with pytest.raises(ValueError):
        Reply(fault="explode")
    assert "timeout" in FAULTS


# --------------------------------------------------------------------- scripting


def test_queue_order_then_default(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue("first", Reply(text="second", finish_reason="length"))
    fake.default_text = "fallback"
    answers = [post_chat(http, fake, stream=False).json()["choices"][0] for _ in range(3)]
    assert [a["message"]["content"] for a in answers] == ["first", "second", "fallback"]
    assert [a["finish_reason"] for a in answers] == ["stop", "length", "stop"]
    assert fake.queued == 0


def test_default_reply_text(http: httpx.Client, fake: FakeModelServer) -> None:
    assert deltas(stream_lines(http, fake)) == "The story goes on."


def test_non_streamed_completion_shape(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(text="Done.", reasoning="think", reasoning_field="reasoning"))
    r = post_chat(http, fake, stream=False)
    assert r.headers["content-length"] == str(len(r.content))
    data = r.json()
    assert data["object"] == "chat.completion"
    assert data["choices"][0]["message"] == {
        "role": "assistant",
        "content": "Done.",
        "reasoning": "think",
    }
    assert data["usage"] == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}


def test_client_going_away_is_counted(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue(Reply(text="word " * 200, delay=0.01))
    with http.stream("POST", f"{fake.base_url}/chat/completions", json=chat_body()) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                break  # leave mid-stream; closing the response drops the connection
    assert fake.wait_for_disconnect(timeout=2)
    assert fake.disconnects == 1


def test_requests_are_recorded(http: httpx.Client, fake: FakeModelServer) -> None:
    post_chat(http, fake, stream=False, temperature=0.7)
    http.post(
        f"{fake.base_url}/embeddings",
        json={"model": "fake-embed", "input": "x"},
        headers={"X-Trace": "abc"},
    )
    first, second = fake.requests
    assert first["_path"] == "/v1/chat/completions"
    assert first["temperature"] == 0.7
    assert first["messages"] == MESSAGES
    assert first["_headers"]["content-type"] == "application/json"
    assert second["_path"] == "/v1/embeddings"
    assert second["_headers"]["x-trace"] == "abc"


# --------------------------------------------------------------------- auth and models


def test_wrong_key_is_401(http: httpx.Client) -> None:
    with FakeModelServer(api_key="sk-right") as fake:
        fake.queue("kept for the good request")
        url = f"{fake.base_url}/chat/completions"
        bad = http.post(url, json=chat_body(stream=False), headers={"Authorization": "Bearer x"})
        assert bad.status_code == 401
        assert bad.json() == {
            "error": {
                "message": "Incorrect API key provided",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        }
        missing = http.post(f"{fake.base_url}/embeddings", json={"model": "fake-embed"})
        assert missing.status_code == 401
        assert http.get(f"{fake.base_url}/models").status_code == 401
        good = http.post(
            url, json=chat_body(stream=False), headers={"Authorization": "Bearer sk-right"}
        )
        assert good.json()["choices"][0]["message"]["content"] == "kept for the good request"


def test_wrong_model_is_404_and_keeps_the_queue(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue("still here")
    r = http.post(f"{fake.base_url}/chat/completions", json=chat_body(stream=False, model="gpt-9"))
    assert r.status_code == 404
    assert r.json() == {
        "error": {
            "message": "The model `gpt-9` does not exist",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    }
    assert fake.queued == 1
    r = http.post(f"{fake.base_url}/embeddings", json={"model": "fake-model", "input": "x"})
    assert r.status_code == 404


def test_models_and_unknown_paths(http: httpx.Client, fake: FakeModelServer) -> None:
    models = http.get(f"{fake.base_url}/models").json()
    assert [m["id"] for m in models["data"]] == ["fake-model", "fake-embed"]
    assert http.get(f"{fake.base_url}/nothing").status_code == 404
    assert http.post(f"{fake.base_url}/completions", json={}).status_code == 404


def test_bad_json_is_400(http: httpx.Client, fake: FakeModelServer) -> None:
    r = http.post(f"{fake.base_url}/chat/completions", content=b"{nope")
    assert r.status_code == 400
    assert fake.requests[0]["_raw"] == "{nope"


# --------------------------------------------------------------------- embeddings


def embed(http: httpx.Client, fake: FakeModelServer, inputs: Any, **extra: Any) -> httpx.Response:
    return http.post(
        f"{fake.base_url}/embeddings", json={"model": "fake-embed", "input": inputs, **extra}
    )


def test_embeddings_are_deterministic_and_normalised(
    http: httpx.Client, fake: FakeModelServer
) -> None:
    one = embed(http, fake, ["a dragon", "a cave", "a dragon"]).json()
    again = embed(http, fake, "a dragon").json()
    assert one["object"] == "list"
    assert one["model"] == "fake-embed"
    vectors = [d["embedding"] for d in one["data"]]
    assert [d["index"] for d in one["data"]] == [0, 1, 2]
    assert all(len(v) == 8 for v in vectors)
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0) for v in vectors)
    assert vectors[0] == vectors[2] == again["data"][0]["embedding"]
    assert vectors[0] != vectors[1]
    assert vectors[0] == fake_embedding("a dragon", 8)


def test_embedding_dim_and_base64(http: httpx.Client) -> None:
    with FakeModelServer(embedding_dim=32) as fake:
        plain = embed(http, fake, "x").json()["data"][0]["embedding"]
        packed = embed(http, fake, "x", encoding_format="base64").json()["data"][0]["embedding"]
    assert len(plain) == 32
    unpacked = struct.unpack("<32f", base64.b64decode(packed))
    assert all(
        math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7) for a, b in zip(plain, unpacked, strict=True)
    )


def test_embedding_faults(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue_embedding_fault("500")
    fake.queue_embedding_fault("429", retry_after=3)
    fake.queue("chat replies are not used by embeddings")
    assert embed(http, fake, "x").status_code == 500
    limited = embed(http, fake, "x")
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "3"
    assert embed(http, fake, "x").status_code == 200
    assert fake.queued == 1
    with pytest.raises(ValueError):
        fake.queue_embedding_fault("disconnect")


def test_embedding_timeout_fault(http: httpx.Client, fake: FakeModelServer) -> None:
    fake.queue_embedding_fault("timeout")
    with pytest.raises(httpx.ReadTimeout):
        http.post(
            f"{fake.base_url}/embeddings",
            json={"model": "fake-embed", "input": "x"},
            timeout=httpx.Timeout(5.0, read=0.3),
        )


# --------------------------------------------------------------------- developer CLI


def test_cli_serves_in_the_foreground(http: httpx.Client) -> None:
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai_server", "--text", "Hello by hand."],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        r = http.post(f"{base_url}/chat/completions", json=chat_body(stream=False))
        assert r.json()["choices"][0]["message"]["content"] == "Hello by hand."
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            # Generous: the check is that Ctrl-C exits cleanly, not how fast (the machine may be
            # busy).
            assert proc.wait(timeout=30) == 0
        finally:
            proc.kill()  # never left behind, whatever failed (nothing if it has exited)
            proc.wait()
