"""How soon the embedded model's narration starts, turn after turn.

Run by hand (it is not part of the normal test run; it needs the 'local' extra)::

    .venv/bin/python -m tests.benchmarks.bench_embedded [--turns 20] [--before] [--without-runs]
        [--pause] [--same-prompts] [--divergence]

Campfire's real bot on the local Discord stand-in, narrating with the embedded SmolLM2 model,
on a temporary SQLite database: a DM adventure of *The Lantern Road*, then ``--turns`` actions
(``PlayService.act``, as the front end calls it). For each turn it measures the time from the
action to the narration's first text, the prompt's tokens and how many of them llama.cpp did
not read again (the prefix it had evaluated for the turn before). The figures are those of
turns 11 to 20, where the story has grown past the window's first steps.

It prints one summary line::

    embedded: first text p50 <s> s, p95 <s> s at turns 11-20, prompt <n> tokens, reused <n>
    tokens, read afresh p50 <n> max <n> tokens, on moved runs <n> of <n> turns; prose: <n>
    words p50, <n> of <n> sentences repeated

(the tokens: medians, and the most any one turn read afresh: on a busy machine the seconds
vary with the other work, the tokens read do not). The prose check: the narrations' length,
and how many of their sentences of five words or more repeat one written earlier in the run.
``--before`` first plays the same turns
as a remote model's settings would: its budget (``CAMPFIRE_CONTEXT_TOKENS``), its reply
length, and one llama.cpp context shared with the memory writer (the layout is now the same
for every model), in this same run, and prints its line first, marked ``(remote layout)``.
``--without-runs`` first plays the embedded layout with llama.cpp keeping only the common
prefix of the last prompt, as it did before it moved the story's runs into place when the
window steps (``engine.llm.providers.kv_reuse``), and prints its line marked
``(prefix only)``. Target: first text p50 <= 1.5 s and p95 <= 4 s on a 2-core machine.

Two plays part ways at the first narration that differs, so their prose compares two stories.
``--same-prompts`` compares the cache alone: it keeps the narration prompts of the play
(``--without-runs``: of the prefix-only play), then narrates each of them twice with one seed,
on a llama.cpp context that moves runs into place from the prompt before and on one that reads
every prompt afresh, and prints the prose check of both::

    same prompts: runs moved prose: <n> words p50, <n> of <n> sentences repeated; read
    afresh prose: ...; identical <n> of <n>

(with one seed, a token the cache changed sends the rest of the narration another way; what
the line shows is whether the changes lean one way).

``--divergence`` compares the cache's effect token by token: the play's prompts and narrations
read on contexts that keep the cache each way, each token's distribution against a fresh
reading's (``tests/benchmarks/cache_divergence.py`` says what it prints). ``--pause SECONDS`` plays
as a player who reads each narration that long before acting (outside the turn's timing): the
narrator's second context reads the next prompt ahead meanwhile, as it does for real players;
without it the bench acts at once, and that work gives way every time.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bot.config import load_settings
from bot.discord_bot import CampfireBot
from bot.services import make_context_engine
from bot.standin import StandIn
from engine.llm.providers.base import ChatMessage, GenerationParams
from engine.llm.providers.local import LocalLlamaProvider, bundled_model_path
from engine.llm.providers.resolver import OperatorDefault
from engine.people.access.rules import Actor
from engine.platform.events import TextDelta
from engine.story.actions import ActionType, PlayerAction
from engine.turns.context import ContextEngine
from engine.turns.events import TurnDone

TARGET_S = 1.5
TARGET_P95_S = 4.0
MEASURED = slice(10, 20)  # turns 11-20
ACTIONS = [
    "light the lantern",
    "look at the fallen milestone",
    "follow the humming into the reeds",
    "call out to whoever is singing",
    "raise the lantern high",
    "wade into the shallow water",
    "pick up the small brass key",
    "ask the heron where the bell is",
    "walk on toward the bell",
    "climb the old stone steps",
    "knock on the chapel door",
    "light the thirteenth lantern again",
    "listen at the keyhole",
    "open the door slowly",
    "step inside and look around",
    "speak the tune aloud",
    "touch the cold bell",
    "sit down on the pew and wait",
    "follow the shadow outside",
    "walk back to the road",
]


#: A sentence as the prose check compares it: its words, lower-cased.
SENTENCE = re.compile(r"[^.!?]+[.!?]")
#: Shorter sentences ("He nods.") repeat in any story; longer ones repeated are a loop.
LOOP_WORDS = 5


def sentences(text: str) -> list[str]:
    words = (" ".join(re.findall(r"\w+", part.lower())) for part in SENTENCE.findall(text))
    return [sentence for sentence in words if len(sentence.split()) >= LOOP_WORDS]


@dataclass
class Figures:
    first_text_s: list[float] = field(default_factory=list)
    prompt: list[int] = field(default_factory=list)
    reused: list[int] = field(default_factory=list)
    #: Each turn's narration, for the prose check.
    texts: list[str] = field(default_factory=list)
    #: Whether each turn narrated on runs moved into place.
    moved: list[bool] = field(default_factory=list)

    def prose(self) -> str:
        """The prose check at turns 11-20: the narrations' length, and how many of their
        sentences repeat one written before in the run (a small model's loop)."""
        told: set[str] = set()
        for text in self.texts[: MEASURED.start]:
            told.update(sentences(text))
        repeated = total = 0
        for text in self.texts[MEASURED]:
            for sentence in sentences(text):
                total += 1
                repeated += sentence in told
                told.add(sentence)
        words = [len(text.split()) for text in self.texts[MEASURED]] or [0]
        return (
            f"prose: {statistics.median(words):.0f} words p50, {repeated} of {total} "
            f"sentences repeated"
        )

    def p50_p95(self) -> tuple[float, float]:
        first = self.first_text_s[MEASURED] or self.first_text_s
        p95 = statistics.quantiles(first, n=20)[-1] if len(first) > 1 else first[0]
        return statistics.median(first), p95

    def summary(self, label: str = "") -> str:
        prompt = self.prompt[MEASURED] or self.prompt
        reused = self.reused[MEASURED] or self.reused
        # What each turn read afresh: the figure the wait follows, whatever else the cores do.
        fresh = [whole - kept for whole, kept in zip(prompt, reused, strict=True)]
        p50, p95 = self.p50_p95()
        return (
            f"embedded: first text p50 {p50:.2f} s, p95 {p95:.2f} s at "
            f"turns 11-20, prompt {statistics.median(prompt):.0f} tokens, reused "
            f"{statistics.median(reused):.0f} tokens, read afresh p50 "
            f"{statistics.median(fresh):.0f} max {max(fresh)} tokens, on moved runs "
            f"{sum(self.moved[MEASURED])} of {len(self.moved[MEASURED])} turns; "
            f"{self.prose()}{label}"
        )


@dataclass(frozen=True)
class Narration:
    """One narration's call to the embedded model, as the turn made it."""

    provider: LocalLlamaProvider
    messages: list[ChatMessage]
    params: GenerationParams


def keep_narrations(provider: LocalLlamaProvider, kept: list[Narration]) -> None:
    """Keep each narration ``provider`` is asked for (it still narrates)."""
    stream = provider._stream

    def keeping(messages: Sequence[ChatMessage], params: GenerationParams) -> Any:
        kept.append(Narration(provider, list(messages), params))
        return stream(messages, params)

    provider._stream = keeping  # type: ignore[method-assign]


async def play(
    data_dir: Path,
    turns: int,
    *,
    remote_layout: bool,
    prefix_only: bool = False,
    narrations: list[Narration] | None = None,
    pause: float = 0.0,
) -> Figures:
    # One player plays faster here than the turn rate limits let a person.
    settings = load_settings(
        data_dir=data_dir, turns_per_user_per_minute=10_000, turns_per_adventure_per_minute=10_000
    )
    bot = CampfireBot(settings)
    standin = StandIn(bot)
    fake = standin.fake
    player = fake.add_user("player")
    dm = fake.dm_channel(player)
    figures = Figures()
    async with standin:
        if remote_layout:
            # What a turn on the embedded model was before: the context engine, reply length
            # and context size a remote model gets, and one context for all its work.
            services = bot.services
            remote = settings.model_copy(update={"model_url": "http://remote.invalid/v1"})
            context = services.turns.context
            assert isinstance(context, ContextEngine)
            services.turns.context = make_context_engine(remote, context.retrievers)
            services.turns.params = replace(
                services.turns.params, max_tokens=settings.max_output_tokens
            )
            provider = services.provider
            provider.n_ctx = min(settings.context_tokens, 8192)  # type: ignore[attr-defined]
            services.models.default = OperatorDefault(provider)
        if prefix_only:
            # No run of the last prompt is long enough to move: the common prefix alone.
            default = bot.services.models.default
            for provider in (default.provider, default.background_provider):
                assert isinstance(provider, LocalLlamaProvider)
                provider.min_run = sys.maxsize
        if narrations is not None:
            narrator = bot.services.models.default.provider
            assert isinstance(narrator, LocalLlamaProvider)
            keep_narrations(narrator, narrations)
        await fake.slash(player, dm, "start", scenario="lantern")
        await standin.idle(timeout=600)
        if narrations is not None:
            narrations.clear()  # the opening is the scenario's, not the model's
        actor = Actor(player, "player")
        for i in range(turns):
            started = time.perf_counter()
            first: float | None = None
            last = None
            events = bot.services.play.act(
                actor,
                dm,
                PlayerAction(ActionType.DO, ACTIONS[i % len(ACTIONS)], player),
                request_id=10**15 + i,
            )
            async for event in events:
                if first is None and isinstance(event, TextDelta) and event.text.strip():
                    first = time.perf_counter() - started
                last = event
            if not isinstance(last, TurnDone):
                raise RuntimeError(f"turn {i + 1} ended with {last!r}")
            usage = last.result.usage
            figures.first_text_s.append(
                first if first is not None else time.perf_counter() - started
            )
            figures.prompt.append(usage.prompt_tokens if usage else 0)
            figures.reused.append((usage.cached_tokens or 0) if usage else 0)
            figures.texts.append(last.result.text)
            narrator = bot.services.models.default.provider
            # Whether the turn narrated on runs moved into place (``kv_reuse``), not on what a
            # fresh reading gives.
            moved = isinstance(narrator, LocalLlamaProvider) and not narrator.exact
            figures.moved.append(moved)
            print(
                f"  turn {i + 1:2}: first text {figures.first_text_s[-1]:5.2f} s, prompt "
                f"{figures.prompt[-1]} tokens, reused {figures.reused[-1]}"
                f"{', on moved runs' if moved else ''}",
                flush=True,
            )
            # The player reads the narration before acting: meanwhile the next prompt is read
            # ahead (``LocalLlamaProvider.read_ahead``) and the memory writer works.
            await asyncio.sleep(pause)
        await standin.idle(timeout=600)
    return figures


def narrate_again(narrations: list[Narration], seed: int = 1234) -> str:
    """Each kept narration's prompt narrated again with ``seed``, runs moved and read afresh;
    the line comparing their prose."""
    from llama_cpp import Llama

    from engine.llm.providers.kv_reuse import MIN_RUN, reusing_llama

    first = narrations[0].provider
    settings = {
        "model_path": str(first.model_path),
        "n_ctx": first.n_ctx,
        "n_threads": first.threads,
        "n_threads_batch": first.threads,
        "verbose": False,
    }
    moved, afresh = reusing_llama(min_run=MIN_RUN, **settings), Llama(**settings)

    def narrate(llama: Any, narration: Narration) -> str:
        provider, params = narration.provider, narration.params
        sampling = {
            "top_p": 0.95,
            "repeat_penalty": provider.repeat_penalty,
            **params.sampling(provider.dialect).fields,
        }
        out = llama.create_chat_completion(
            messages=[{"role": m.role, "content": m.content} for m in narration.messages],
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            logit_bias=provider.logit_bias(llama, params.avoid),
            seed=seed,
            **sampling,
        )
        return out["choices"][0]["message"]["content"] or ""

    with_moves, read_afresh = Figures(), Figures()
    for i, narration in enumerate(narrations):
        with_moves.texts.append(narrate(moved, narration))
        afresh.reset()
        read_afresh.texts.append(narrate(afresh, narration))
        print(
            f"  prompt {i + 1:2}: runs moved kept {moved.kept} tokens, "
            f"{len(with_moves.texts[-1].split())} words; read afresh "
            f"{len(read_afresh.texts[-1].split())} words",
            flush=True,
        )
    identical = sum(
        a == b for a, b in zip(with_moves.texts[MEASURED], read_afresh.texts[MEASURED], strict=True)
    )
    return (
        f"same prompts: runs moved {with_moves.prose()}; read afresh {read_afresh.prose()}; "
        f"identical {identical} of {len(with_moves.texts[MEASURED])}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument(
        "--before", action="store_true", help="first play in the remote model's layout"
    )
    parser.add_argument(
        "--without-runs",
        action="store_true",
        help="first play keeping only the last prompt's common prefix (no runs moved)",
    )
    parser.add_argument(
        "--same-prompts",
        action="store_true",
        help="then narrate the play's prompts again, runs moved and read afresh",
    )
    parser.add_argument(
        "--pause",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="the player reads each narration this long before acting (default: acts at once)",
    )
    parser.add_argument(
        "--divergence",
        action="store_true",
        help="then compare the next-token distributions of the play's prompts and narrations "
        "read afresh, in batches of 64, with the prefix only and with runs moved",
    )
    args = parser.parse_args(argv)
    if bundled_model_path() is None:
        print("the embedded model is not installed (the 'local' extra)", file=sys.stderr)
        return 2
    lines = []
    with tempfile.TemporaryDirectory(prefix="campfire-bench-embedded-") as tmp:
        if args.before:
            print("remote layout:", flush=True)
            before = asyncio.run(play(Path(tmp) / "before", args.turns, remote_layout=True))
            lines.append(before.summary(" (remote layout)"))
        narrations: list[Narration] = []
        keep = args.same_prompts or args.divergence
        kept_from: Figures | None = None
        if args.without_runs:
            print("embedded layout, prefix only:", flush=True)
            prefix = asyncio.run(
                play(
                    Path(tmp) / "prefix",
                    args.turns,
                    remote_layout=False,
                    prefix_only=True,
                    narrations=narrations if keep else None,
                )
            )
            lines.append(prefix.summary(" (prefix only)"))
            kept_from = prefix if keep else None
        print("embedded layout:", flush=True)
        after = asyncio.run(
            play(
                Path(tmp) / "after",
                args.turns,
                remote_layout=False,
                narrations=narrations if keep and kept_from is None else None,
                pause=args.pause,
            )
        )
        kept_from = kept_from or after
        if args.same_prompts:
            print("the same prompts again:", flush=True)
            lines.append(narrate_again(narrations))
        if args.divergence:
            from tests.benchmarks.cache_divergence import divergence

            print("the prompts and narrations read on four contexts:", flush=True)
            lines += divergence(narrations, kept_from.texts, MEASURED)
    for line in lines:
        print(line)
    print(after.summary(), flush=True)
    p50, p95 = after.p50_p95()
    met = p50 <= TARGET_S and p95 <= TARGET_P95_S
    print(
        f"target first text p50 <= {TARGET_S} s and p95 <= {TARGET_P95_S} s: "
        f"{'met' if met else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
