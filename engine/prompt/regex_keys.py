"""Regular-expression keys: ``/pattern/flags``, as SillyTavern's World Info and NovelAI's
lorebooks write them, run on RE2 (google-re2), whose matching takes time linear in the text.

A JavaScript expression can backtrack for as long as it likes on a crafted key; every player is
untrusted, so no key may stall a turn. RE2 has no backtracking (its guarantee, github.com/
google/re2/wiki/WhyRE2), and a pattern's compiled program is bounded by ``MAX_MEMORY``; a
pattern is at most ``MAX_PATTERN_CHARS`` long and a card holds at most ``MAX_REGEX_KEYS``.
What RE2 cannot run (look-arounds, back-references: SillyTavern's keys are JavaScript's
``RegExp``) is refused, and the import names it. Flags as JavaScript's: ``i`` ignores case,
``s`` lets ``.`` match a line break, ``m`` makes ``^`` and ``$`` match at lines; ``g``, ``u``
and ``y`` change nothing for a search.

Pure; a pattern is compiled once per process (``compile_regex``' cache).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import re2

#: The longest pattern, the most regular-expression keys on one card, and the most memory RE2
#: may give one compiled pattern (its default is 8 MiB).
MAX_PATTERN_CHARS = 300
MAX_REGEX_KEYS = 16
MAX_MEMORY = 1 << 20

SLASHED = re.compile(r"^/(.+)/([a-z]*)$", re.DOTALL)
_FLAGS = set("gimsuy")


def is_regex_key(key: str) -> bool:
    return SLASHED.match(key.strip()) is not None


@lru_cache(maxsize=4096)
def compile_regex(key: str) -> Any | None:
    """The compiled ``/pattern/flags`` key, or None when it is not one RE2 runs in bounds."""
    match = SLASHED.match(key.strip())
    if match is None:
        return None
    pattern, flags = match.groups()
    if len(pattern) > MAX_PATTERN_CHARS or set(flags) - _FLAGS:
        return None
    options = re2.Options()
    options.max_mem = MAX_MEMORY
    options.log_errors = False
    options.case_sensitive = "i" not in flags
    options.dot_nl = "s" in flags
    try:
        return re2.compile(f"(?m){pattern}" if "m" in flags else pattern, options)
    except re2.error:
        return None


def find_regex(keys: tuple[str, ...], text: str) -> str | None:
    """The first of ``keys`` (``/pattern/flags``) found in ``text`` (as written), or None."""
    for key in keys:
        compiled = compile_regex(key)
        if compiled is not None and compiled.search(text) is not None:
            return key
    return None
