"""Chapters and beats, decided in code: the plan an author writes is checked; the model's
reported events are folded only from the open chapter's vocabulary; a beat completes only when
its test holds on the folded fields; a stalled beat earns a nudge. Pure: no database."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from engine.errors import NotAllowed
from engine.library.formats.bundle import read_bundle, write_bundle
from engine.library.reading.errors import ImportRejected
from engine.people.access.checks import check_may_read_chapters
from engine.people.access.rules import Actor, may_read_chapters
from engine.storage.models import Adventure
from engine.story.chapters.plan import read_plan, write_plan
from engine.story.chapters.progress import fold, initial_progress, nudge_for
from engine.story.chapters.prompt import chapter_guide, chapter_nudge, events_part

SHIPPED = Path(__file__).parent.parent / "engine/library/scenarios/builtin/tidewatch-light.json"


def shipped_plan() -> dict:
    return read_plan(json.loads(SHIPPED.read_text(encoding="utf-8")))


def play(plan: dict, progress: dict, *turns: list, start: int = 1) -> tuple[dict, list]:
    """Fold each turn's events in order; the progress after, and each turn's fold."""
    folds = []
    for i, events in enumerate(turns):
        result = fold(plan, progress, events, turn_index=start + i)
        folds.append(result)
        progress = result.progress
    return progress, folds


def test_a_beat_completes_only_when_its_test_holds_on_the_folded_fields():
    plan = shipped_plan()
    start = initial_progress(plan)
    # A model that says the beat is done, in prose or in made-up events, changes nothing.
    progress, (said, made_up) = play(
        plan, start, [], ["reached_lamp_room", "beat_complete", "searched:attic"]
    )
    assert progress["beat"] == 0 and progress["fields"] == start["fields"]
    assert said.beat_done is None and made_up.beat_done is None
    assert [o.accepted for o in made_up.outcomes] == [False, False, False]
    assert "not an event of chapter “The Dark Lamp”" in made_up.outcomes[0].reason
    assert "searched takes one of lamp_room, boathouse, cottage" in made_up.outcomes[2].reason
    # An event of a later chapter is not this chapter's either.
    progress, (later,) = play(plan, progress, ["lamp_lit"])
    assert not later.outcomes[0].accepted and progress["beat"] == 0

    # The event that meets the test completes the beat, once.
    progress, (searched,) = play(plan, progress, ["searched:lamp_room"])
    assert searched.beat_done["id"] == "climb"
    assert progress["beat"] == 1 and progress["fields"]["places"] == ["lamp_room"]
    progress, (again,) = play(plan, progress, ["searched:lamp_room"])
    assert again.beat_done is None and not again.changed
    assert again.outcomes[0].reason == "places already holds lamp_room"
    assert [b["id"] for b in progress["beats_done"]] == ["climb"]


def test_the_same_event_twice_does_not_advance_twice():
    plan = shipped_plan()
    progress, _ = play(plan, initial_progress(plan), ["searched:lamp_room"])
    # Two clues are needed; the same clue reported twice in a turn counts once.
    progress, (twice,) = play(plan, progress, ["found_clue", "found_clue", "met_wren"])
    assert progress["fields"]["clues"] == 1
    assert [o.accepted for o in twice.outcomes] == [True, False, True]
    assert twice.outcomes[1].reason == "reported twice this turn"
    assert twice.beat_done is None
    # A second clue on a later turn completes the beat and ends the chapter.
    progress, (second,) = play(plan, progress, ["found_clue"], start=5)
    assert second.beat_done["id"] == "why"
    end = second.chapter_end
    assert end is not None and end.chapter_id == "dark_lamp" and not end.final
    assert end.facts["fields"] == {"places": ["lamp_room"], "clues": 2, "met_wren": True}
    assert [b["id"] for b in end.facts["beats"]] == ["climb", "why"]
    assert progress["chapter"] == 1 and progress["beat"] == 0
    assert progress["fields"] == {"crossed": False, "shards": 0, "saw_it": False}
    # The old chapter's events mean nothing now.
    progress, (old,) = play(plan, progress, ["found_clue"])
    assert not old.outcomes[0].accepted and progress["fields"]["shards"] == 0


def test_at_most_one_beat_a_turn_and_the_final_chapter_ends_the_plan():
    plan = shipped_plan()
    progress = initial_progress(plan)
    progress["chapter"] = 2
    progress["fields"] = {"lens_mended": False, "lamp_lit": False, "held": 0}
    # Everything at once: the first beat completes now, the second waits for the next turn.
    progress, (now,) = play(plan, progress, ["lens_mended", "lamp_lit", "held_fast"])
    assert now.beat_done["id"] == "mend" and now.chapter_end is None
    progress, (then,) = play(plan, progress, [], start=2)
    assert then.beat_done["id"] == "light"
    assert then.chapter_end.final and "Esterly rides at anchor" in then.chapter_end.epilogue
    assert progress["done"]
    progress, (after,) = play(plan, progress, ["lamp_lit"], start=3)
    assert after.outcomes[0].reason == "the chapters are finished"
    assert chapter_guide(plan, progress) == "" and events_part(plan, progress) is None


def test_counters_stop_at_their_most_and_odd_events_are_refused():
    plan = shipped_plan()
    progress, _ = play(plan, initial_progress(plan), ["searched:lamp_room"])
    odd = [{"event": "found_clue"}, 7, None, {"event": "met_wren", "extra": 1}, "found_clue:x"]
    progress, (result,) = play(plan, progress, odd)
    assert [o.accepted for o in result.outcomes] == [True, False, False, False, False]
    progress, (flood,) = play(plan, progress, [f"nope_{i}" for i in range(12)])
    assert sum(o.reason.startswith("more than 8") for o in flood.outcomes) == 4
    assert fold(plan, progress, "found_clue", turn_index=9).outcomes == []  # not a list


def test_a_stalled_beat_gets_a_nudge_from_its_hints_every_n_turns():
    plan = shipped_plan()
    progress = initial_progress(plan)
    nudges = []
    for turn in range(1, 12):
        nudges.append(nudge_for(plan, progress))
        progress = fold(plan, progress, [], turn_index=turn).progress
    # Default 5: the sixth turn's narrator is nudged (after five stalled), then the eleventh.
    given = [i for i, n in enumerate(nudges) if n is not None]
    assert given == [5, 10]
    first, second = nudges[5], nudges[10]
    assert first.text.startswith("The lighthouse door bangs open")
    assert second.text.startswith("A gull lands")  # the next hint
    assert "5 turns without progress on beat “Reach the lamp room”" in first.reason
    assert "nudged every 5" in first.reason
    # Progress ends the stall; the beat's own nudge_after (4) counts from there.
    progress = fold(plan, progress, ["searched:lamp_room"], turn_index=12).progress
    assert progress["stalled"] == 0 and nudge_for(plan, progress) is None
    for turn in range(13, 17):
        progress = fold(plan, progress, ["searched:lamp_room"], turn_index=turn).progress
    nudge = chapter_nudge(plan, progress)
    assert nudge is not None and "Wren" not in nudge.text
    assert "4 turns without progress on beat “Learn why the light failed”" in nudge.reason


def test_the_guide_names_the_open_beat_and_only_this_chapters_events():
    plan = shipped_plan()
    guide = chapter_guide(plan, initial_progress(plan))
    assert guide.startswith("Chapter 1 of 3: The Dark Lamp")
    assert "Now: Reach the lamp room." in guide
    assert "- searched:<lamp_room|boathouse|cottage>" in guide
    # The block is asked for once, by the held-back block's instruction, not by the guide.
    assert "lamp_lit" not in guide and "```state" not in guide
    part = events_part(plan, initial_progress(plan))
    assert part is not None and 'e.g. "searched:lamp_room"' in part.rule


def test_chapters_are_read_in_the_place_and_in_a_dm_by_its_player_alone():
    server = Adventure(title="Shared", server_id=5, host_id=1)
    dm = Adventure(title="Mine", owner_id=1, host_id=1)
    stranger, player = Actor(user_id=2, server_id=5), Actor(user_id=1)
    assert may_read_chapters(server, stranger)
    assert may_read_chapters(dm, player) and not may_read_chapters(dm, Actor(user_id=2))
    with pytest.raises(NotAllowed):
        check_may_read_chapters(dm, Actor(user_id=2))


def test_the_plan_is_checked_with_the_place_of_each_problem():
    raw = json.loads(SHIPPED.read_text(encoding="utf-8"))
    plan = read_plan(raw)
    assert plan["chapters"][0]["fallback"] == [
        "Waves break white against the rock; somewhere a shutter bangs."
    ]
    assert plan["chapters"][0]["beats"][1]["nudge_after"] == 4

    def broken(change) -> str:
        bad = copy.deepcopy(raw)
        change(bad)
        with pytest.raises(ImportRejected) as caught:
            read_plan(bad)
        return caught.value.message

    first = lambda r: r["chapters"][0]  # noqa: E731
    assert "no event of this chapter folds into “lamps”" in broken(
        lambda r: first(r)["beats"][0]["complete"]["all"].append({"field": "lamps", "is": True})
    )
    assert "only the final chapter may carry an epilogue" in broken(
        lambda r: first(r).update(epilogue="Too soon.")
    )
    assert "expected one of counter, set, flag" in broken(
        lambda r: first(r)["events"]["met_wren"].update(fold="toggle")
    )
    assert "“attic” is never added to “places”" in broken(
        lambda r: first(r)["beats"][0]["complete"].update(all=[{"field": "places", "has": "attic"}])
    )
    assert "the beat id “climb” is used twice" in broken(
        lambda r: first(r)["beats"][1].update(id="climb")
    )
    assert "chapters[1].events.Bad Name" in broken(
        lambda r: r["chapters"][1]["events"].update({"Bad Name": {"fold": "flag", "field": "x"}})
    )
    assert "only a flag is tested with is" in broken(
        lambda r: first(r)["beats"][0].update(complete={"any": [{"field": "clues", "is": True}]})
    )


def test_a_bundle_keeps_its_chapters_when_written_and_read_again():
    raw = json.loads(SHIPPED.read_text(encoding="utf-8"))
    draft = read_bundle(raw)
    written = write_bundle(draft)
    assert written["chapters"] == draft.chapters["chapters"]
    assert write_plan(read_plan(written)) == write_plan(draft.chapters)
    assert read_bundle(written).chapters == draft.chapters
    # A scenario without chapters writes none.
    assert "chapters" not in write_bundle(read_bundle({"title": "Plain", "prompt": "Go."}))
