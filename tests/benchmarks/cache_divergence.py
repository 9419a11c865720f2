"""How far the embedded model's next-token distributions move when it reuses its cache.

``bench_embedded --divergence`` keeps the narration prompts of its play and the narrations the
player read, then reads each prompt, and the narration after it, on four llama.cpp contexts:

- **afresh**: every prompt read from its first token (what the model would compute with no
  cache at all; the reference);
- **batches of 64**: the same, read 64 tokens at a time instead of 512. Nothing differs but
  how llama.cpp groups the arithmetic, so this is the floor every kind of reuse sits on;
- **prefix only**: the prompt's common prefix with the last one kept, the rest read (what
  llama-cpp-python's ``Llama.generate`` does on its own; Campfire before ``kv_reuse``);
- **runs moved**: the common prefix kept and the story's runs found further along the cache
  moved into place (``engine.llm.providers.kv_reuse.realign``). A moved run keeps what it
  attended to when it was read, the entries that made way included, and so does all that is
  read after it while it stays in the cache;
- **runs moved, refreshed**: the same, then, after each narration that moved runs, a second
  context reads exactly what the first holds and takes over (``kv_reuse.refresh``: what
  Campfire's narrator does in the players' pause, when they pause long enough).

At each narration token (the narration teacher-forced, so every context predicts the same
positions) it compares the context's distribution with the afresh one, at the narration's own
temperature: the Kullback-Leibler divergence, and the total variation distance, which is the
chance that one sample drawn from each with shared randomness differs (how often the narration
would take another word at that point). A narration samples with top-p and a repeat penalty
too; the comparison leaves those out, so it is the raw distributions' distance.

It prints, over the measured turns (11-20) and then over the turns where runs were moved::

    cache divergence at turns 11-20 (<n> turns, <n> tokens): batches of 64 KL <x> nats,
    differ <x> %, top-1 same <x> %; prefix only ...; runs moved ...; runs moved, refreshed ...
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tests.benchmarks.bench_embedded import Narration

#: The narration tokens compared after each prompt (a narration is at most 120).
CONTINUATION = 120


def decode(llama: Any, tokens: Sequence[int]) -> np.ndarray:
    """Decode ``tokens`` after what ``llama`` holds, in its batches; every token's logits."""
    rows = []
    vocab = llama.n_vocab()
    for i in range(0, len(tokens), llama.n_batch):
        batch = tokens[i : i + llama.n_batch]
        llama._batch.set_batch(batch=batch, n_past=llama.n_tokens, logits_all=True)
        llama._ctx.decode(llama._batch)
        logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(len(batch) * vocab,))
        rows.append(logits.reshape(len(batch), vocab).astype(np.float64))
        llama.input_ids[llama.n_tokens : llama.n_tokens + len(batch)] = batch
        llama.n_tokens += len(batch)
    return np.concatenate(rows)


def read(llama: Any, prompt: Sequence[int], narration: Sequence[int], keep: int) -> np.ndarray:
    """Keep ``keep`` tokens of what ``llama`` holds, read the rest of ``prompt``, then the
    narration; the distributions' logits predicting each narration token."""
    llama._ctx.kv_cache_seq_rm(-1, keep, -1)
    llama.n_tokens = keep
    llama.eval(prompt[keep:])
    vocab = llama.n_vocab()
    last = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(vocab,)).astype(np.float64)
    following = decode(llama, narration[:-1]) if len(narration) > 1 else np.empty((0, vocab))
    return np.vstack([last, following])


def log_softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    scaled = logits / max(temperature, 1e-6)
    scaled -= scaled.max(axis=1, keepdims=True)
    return scaled - np.log(np.exp(scaled).sum(axis=1, keepdims=True))


@dataclass
class Distance:
    """One context's distance from the afresh reading, token by token."""

    kl: list[float] = field(default_factory=list)
    differ: list[float] = field(default_factory=list)
    top1_same: list[bool] = field(default_factory=list)

    def add(self, reference: np.ndarray, logits: np.ndarray, temperature: float) -> None:
        log_p, log_q = log_softmax(reference, temperature), log_softmax(logits, temperature)
        p, q = np.exp(log_p), np.exp(log_q)
        self.kl.extend((p * (log_p - log_q)).sum(axis=1).tolist())
        self.differ.extend((0.5 * np.abs(p - q).sum(axis=1)).tolist())
        self.top1_same.extend((reference.argmax(axis=1) == logits.argmax(axis=1)).tolist())

    def extend(self, other: Distance) -> None:
        self.kl += other.kl
        self.differ += other.differ
        self.top1_same += other.top1_same

    def line(self) -> str:
        if not self.kl:
            return "no tokens"
        return (
            f"KL {statistics.fmean(self.kl):.4f} nats, differ "
            f"{100 * statistics.fmean(self.differ):.1f} %, top-1 same "
            f"{100 * statistics.fmean(self.top1_same):.1f} %"
        )


@dataclass
class Turn:
    """One prompt's distances, and whether runs were moved for it."""

    distances: dict[str, Distance]
    moved: bool


class Context:
    """A llama.cpp context reading the prompts one after another, keeping what it may."""

    def __init__(
        self,
        settings: dict[str, Any],
        *,
        batch: int = 512,
        afresh: bool = False,
        moves: bool = False,
    ):
        from llama_cpp import Llama

        self.llama = Llama(**settings, n_batch=batch)
        self.afresh, self.moves = afresh, moves

    def keep(self, prompt: list[int]) -> int:
        """The prompt tokens it keeps (0 for a context that reads every prompt afresh)."""
        from engine.llm.providers.kv_reuse import exact_prefix, realign

        if self.afresh:
            return 0
        return realign(self.llama, prompt) if self.moves else exact_prefix(self.llama, prompt)

    def after(self) -> None:
        """What happens once the narration is read (nothing: it waits for the next prompt)."""


class Refreshed(Context):
    """Runs moved, then read again exactly on a second context, which takes over."""

    def __init__(self, settings: dict[str, Any]):
        super().__init__(settings, moves=True)
        self.spare = Context(settings).llama

    def after(self) -> None:
        from engine.llm.providers.kv_reuse import refresh, stale_from

        if stale_from(self.llama) is not None:
            refresh(self.spare, self.llama)
            self.llama, self.spare = self.spare, self.llama


CONTEXTS = ("batches of 64", "prefix only", "runs moved", "runs moved, refreshed")


def divergence(narrations: Sequence[Narration], texts: Sequence[str], measured: slice) -> list[str]:
    """Each of ``narrations``' prompts and the narration the player read (``texts``) on the
    four contexts; the summary lines (the measured turns, then the turns where runs moved)."""
    from engine.llm.providers.kv_reuse import prompt_tokens

    first = narrations[0].provider
    settings: dict[str, Any] = {
        "model_path": str(first.model_path),
        "n_ctx": first.n_ctx,
        "n_threads": first.threads,
        "n_threads_batch": first.threads,
        "verbose": False,
    }
    afresh = Context(settings).llama
    contexts = {
        "batches of 64": Context(settings, batch=64, afresh=True),
        "prefix only": Context(settings),
        "runs moved": Context(settings, moves=True),
        "runs moved, refreshed": Refreshed(settings),
    }
    turns: list[Turn] = []
    for i, (narration, text) in enumerate(zip(narrations, texts, strict=True)):
        chat = [{"role": m.role, "content": m.content} for m in narration.messages]
        prompt = prompt_tokens(afresh, chat)
        told = afresh.tokenize(text.encode(), add_bos=False, special=False)[:CONTINUATION]
        reference = read(afresh, prompt, told, keep=0)
        temperature = narration.params.temperature
        distances: dict[str, Distance] = {}
        kept: dict[str, int] = {}
        for name, context in contexts.items():
            kept[name] = keep = context.keep(prompt)
            distances[name] = Distance()
            logits = read(context.llama, prompt, told, keep)
            distances[name].add(reference, logits, temperature)
            context.after()
        moved = kept["runs moved"] > kept["prefix only"]
        turns.append(Turn(distances, moved))
        print(
            f"  prompt {i + 1:2}: {len(prompt)} tokens, {len(told)} narration tokens; "
            f"prefix only kept {kept['prefix only']}, runs moved kept {kept['runs moved']}; "
            f"runs moved {distances['runs moved'].line()}; refreshed "
            f"{distances['runs moved, refreshed'].line()}",
            flush=True,
        )
    lines = []
    for label, chosen in (
        ("at turns 11-20", turns[measured]),
        ("at the turns where runs were moved", [turn for turn in turns if turn.moved]),
    ):
        totals = {name: Distance() for name in CONTEXTS}
        for turn in chosen:
            for name in CONTEXTS:
                totals[name].extend(turn.distances[name])
        parts = "; ".join(f"{name} {totals[name].line()}" for name in CONTEXTS)
        lines.append(
            f"cache divergence {label} ({len(chosen)} turns, "
            f"{len(totals['runs moved'].kl)} tokens): {parts}"
        )
    return lines
