"""What the embedded model keeps of the prompt it read when the prompt's middle moved.

llama.cpp skips the prompt's prefix it evaluated for the last reply (``Llama.generate``), and
nothing after the first token that differs. On the turns where the history window's start
steps (``engine.turns.context``: ``ANCHOR_STEP`` entries make way at once) the first change is
just after the story's heading, so a turn read the whole story again: on two cores, 1,500
tokens and 7–10 s before the first words, against about 1 s on other turns.

The story that stays is still in llama.cpp's cache, only further along. So, as llama.cpp's own
server does with ``--cache-reuse N`` ("min chunk size to attempt reusing from the cache via KV
shifting", tools/server/README.md; ggml-org/llama.cpp discussion #13606), the runs of the new
prompt found in the cache are moved into place: the cached tokens between are removed
(``llama_memory_seq_rm``) and the run's positions shifted down to where the prompt has them
(``llama_memory_seq_add``; the rotary embeddings are rotated by llama.cpp at the next decode).
A run keeps what it attended to when read (the entries that made way), as llama.cpp's context
shift does; only runs of ``MIN_RUN`` tokens or more are moved, so a stray common word or
heading is read afresh.

What a moved run holds is not what reading the prompt afresh would give: it attended to what
made way. Measured token by token (``tests/benchmarks/cache_divergence.py``) on the bench's
play, the narrations' distributions after a move differ from a fresh reading's by about 0.005
nats a token, and about one sampled token in forty would change; keeping only the prefix, or
reading in other batch sizes, changes nothing measurable. So the context remembers where its
cache stopped being exact (``stale_from``), and ``refresh`` reads that part again exactly on
another context, in the players' pause (``LocalLlamaProvider``): only the turn that moved runs
narrates on them.

``reuse_plan`` is the pure arithmetic (tested without a model); ``realign`` applies it to a
llama-cpp-python ``Llama`` before its ``generate`` looks for the common prefix.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

#: The shortest run of cached tokens moved into place (llama.cpp's server: ``--cache-reuse``).
#: A story entry is 40–150 tokens; shorter runs are headings and common words, read afresh.
MIN_RUN = 32


@dataclass(frozen=True, slots=True)
class Move:
    """``length`` cached tokens at ``start`` go to ``to`` (``to <= start``), in the prompt."""

    start: int
    to: int
    length: int


@dataclass(frozen=True, slots=True)
class Plan:
    """The common prefix kept in place, then the runs moved down after it."""

    prefix: int
    moves: tuple[Move, ...]

    @property
    def kept(self) -> int:
        """The prompt tokens not read again: the prefix and every moved run."""
        return self.prefix + sum(move.length for move in self.moves)


def reuse_plan(cached: Sequence[int], prompt: Sequence[int], *, min_run: int = MIN_RUN) -> Plan:
    """What of ``cached`` (the tokens llama.cpp holds, position by position) the new ``prompt``
    can keep: its common prefix, then runs found further along the cache, each moved to where
    the prompt continues (llama.cpp server's cache reuse: the cache is scanned forward for the
    prompt's next tokens; a run shorter than ``min_run`` is skipped over).

    At least the prompt's last token is left to read, so its logits are computed afresh.
    """
    limit = len(prompt) - 1
    prefix = 0
    for before, after in zip(cached, prompt[:limit], strict=False):
        if before != after:
            break
        prefix += 1
    moves: list[Move] = []
    head_c = head_p = prefix
    while head_c < len(cached) and head_p < limit:
        run = 0
        while (
            head_c + run < len(cached)
            and head_p + run < limit
            and cached[head_c + run] == prompt[head_p + run]
        ):
            run += 1
        if run >= min_run:
            moves.append(Move(head_c, head_p, run))
            head_c += run
            head_p += run
        else:
            head_c += 1
    return Plan(prefix, tuple(moves))


def stale_from(llama: Any) -> int | None:
    """The first position of ``llama``'s cache that is not what reading its tokens afresh
    would hold (a moved run, and all after it, which attended to it); None when all is exact."""
    return getattr(llama, "stale_from", None)


def _note_stale(llama: Any, prefix: int, moved: bool) -> None:
    """What of ``llama``'s cache is exact once ``prefix`` tokens are kept in place and, if
    ``moved``, runs moved in after them (the rest of the prompt is read afresh after them)."""
    stale = stale_from(llama)
    if stale is not None and stale < prefix:
        return  # inexact before the kept prefix: stays so
    llama.stale_from = prefix if moved else None


def realign(llama: Any, prompt: Sequence[int], *, min_run: int = MIN_RUN) -> int:
    """Move the runs of ``prompt`` found in ``llama``'s cache into place (``reuse_plan``), so
    its ``generate`` finds them in the common prefix; returns the tokens it will not read again.
    Notes where the cache stops being exact (``stale_from``).

    Runs on llama.cpp's thread, under the provider's run lock, before ``generate``.
    """
    import llama_cpp

    n_tokens = int(llama.n_tokens)
    cached = llama.input_ids[:n_tokens].tolist()
    plan = reuse_plan(cached, prompt, min_run=min_run)
    memory = llama_cpp.llama_get_memory(llama.ctx)
    if not plan.moves or memory is None or not llama_cpp.llama_memory_can_shift(memory):
        _note_stale(llama, plan.prefix, moved=False)
        return plan.prefix
    _note_stale(llama, plan.prefix, moved=True)
    # Positions not yet moved are still the cache's own; each move removes the cached tokens
    # between the prompt's position and the run's, then shifts the run down into the gap.
    for move in plan.moves:
        llama_cpp.llama_memory_seq_rm(memory, 0, move.to, move.start)
        llama_cpp.llama_memory_seq_add(
            memory, 0, move.start, move.start + move.length, move.to - move.start
        )
        cached[move.to : move.to + move.length] = cached[move.start : move.start + move.length]
    end = plan.moves[-1].to + plan.moves[-1].length
    # What is left past the last run has positions beyond ``end``: ``generate`` removes it
    # (``kv_cache_seq_rm`` from the common prefix on) before it reads the rest of the prompt.
    llama_cpp.llama_memory_seq_rm(memory, 0, end, -1)
    llama.input_ids[:end] = cached[:end]
    llama.n_tokens = end
    # The logits held are the old last token's: the next decode must compute them again.
    llama._requires_eval = True
    return plan.kept


class _Prompt(Exception):
    """Raised from ``generate`` with the prompt's tokens, so formatting reads nothing."""

    def __init__(self, tokens: Sequence[int]) -> None:
        self.tokens = list(tokens)


def prompt_tokens(llama: Any, messages: list[dict[str, str]]) -> list[int]:
    """The tokens ``llama``'s ``create_chat_completion`` reads for ``messages``: formatted by
    the model's chat template and tokenized as a narration's are, up to ``generate``, which is
    stopped before it reads anything. (llama-cpp-python has no call that only formats.)"""

    def capture(tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
        raise _Prompt(tokens)

    llama.generate = capture
    try:
        llama.create_chat_completion(messages=messages, max_tokens=1)
    except _Prompt as prompt:
        return prompt.tokens
    finally:
        del llama.generate
    raise RuntimeError("the chat formatting never asked to generate")


def moves_needed(llama: Any, prompt: Sequence[int]) -> bool:
    """Whether ``llama`` would move runs to keep what it holds of ``prompt``."""
    held = llama.input_ids[: int(llama.n_tokens)].tolist()
    return bool(reuse_plan(held, prompt, min_run=llama.shortest_run).moves)


def exact_prefix(llama: Any, tokens: Sequence[int]) -> int:
    """How many of ``tokens``, from the first, ``llama`` holds exactly as a fresh reading would
    (less the last token, whose logits must be computed)."""
    held = llama.input_ids[: int(llama.n_tokens)].tolist()
    kept = 0
    for before, after in zip(held, tokens[:-1], strict=False):
        if before != after:
            break
        kept += 1
    stale = stale_from(llama)
    return kept if stale is None else min(kept, stale)


def refresh(spare: Any, llama: Any) -> None:
    """Make ``spare`` hold what ``llama`` holds, read exactly: what of it ``spare`` holds
    exactly is kept, the rest read afresh. Raises if llama.cpp stops (its abort callback);
    ``spare`` then holds, exactly, what it had read. Runs on llama.cpp's thread."""
    tokens = llama.input_ids[: int(llama.n_tokens)].tolist()
    keep = exact_prefix(spare, tokens)
    spare._ctx.kv_cache_seq_rm(-1, keep, -1)
    spare.n_tokens = keep
    spare.stale_from = None
    spare.eval(tokens[keep:])
    # Its logits are those of the last token read, not of a prompt: the next ``generate``
    # reads at least one token again.
    spare._requires_eval = True


def reusing_llama(*, min_run: int = MIN_RUN, **settings: Any) -> Any:
    """A llama-cpp-python ``Llama`` (made with ``settings``) whose ``generate`` first moves
    what it can keep of the new prompt into place (``realign``, runs of ``min_run`` tokens or
    more); ``kept`` is then the prompt tokens the last generation did not read again. Imported
    here, on first use: llama-cpp-python is the 'local' extra."""
    from llama_cpp import Llama

    class ReusingLlama(Llama):
        kept = 0
        #: Runs shorter than this are not moved; ``sys.maxsize``: nothing is, the prompt is
        #: read exactly after the common prefix (``exactly``).
        shortest_run = min_run

        def generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
            self.kept = realign(self, tokens, min_run=self.shortest_run)
            return super().generate(tokens, *args, **kwargs)

    return ReusingLlama(**settings)


@contextmanager
def exactly(llama: Any) -> Iterator[None]:
    """``llama`` (from ``reusing_llama``) reads its next prompts exactly: what it holds
    inexactly is let go first, and no run is moved."""
    stale = stale_from(llama)
    if stale is not None:
        llama._ctx.kv_cache_seq_rm(-1, stale, -1)
        llama.n_tokens = min(int(llama.n_tokens), stale)
        llama.stale_from = None
    shortest, llama.shortest_run = llama.shortest_run, sys.maxsize
    try:
        yield
    finally:
        llama.shortest_run = shortest
