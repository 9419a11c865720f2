"""Who a process is in lease rows (``engine.platform.coordination.instance``): the same instance
after a restart, never the same as another live process; and what that lets a restarted process take
back at once, on a real database."""

from __future__ import annotations

import stat
from datetime import UTC, datetime

import pytest

from engine.platform.coordination.instance import InstanceTaken, this_process
from engine.platform.coordination.jobs import JobLeases
from engine.platform.coordination.leases import LeaseBusy, TurnLeases
from tests.helpers import new_adventure

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def test_a_restart_is_the_same_instance_and_a_second_process_another(tmp_path):
    first = this_process(tmp_path)
    # While it lives, another process on the same data folder is another instance.
    second = this_process(tmp_path)
    assert second.name != first.name
    first.close()  # it dies: the operating system drops its lock
    again = this_process(tmp_path)
    assert again.name == first.name and again.incarnation != first.incarnation
    assert again.holder == f"{first.name}/{again.incarnation}"
    # The kept name is the operator's alone to read.
    for path in tmp_path.glob("instance-*.lock"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    second.close()
    again.close()


def test_an_operators_instance_name_is_held_by_one_live_process(tmp_path):
    shard = this_process(tmp_path, name="shard-0")
    assert shard.name == "shard-0"
    with pytest.raises(InstanceTaken, match="shard-0"):
        this_process(tmp_path, name="shard-0")
    shard.close()
    again = this_process(tmp_path, name="shard-0")
    assert again.name == "shard-0"
    again.close()
    with pytest.raises(ValueError):
        this_process(tmp_path, name="a/b")


async def test_a_restarted_process_takes_back_its_turn_leases_at_once(db, tmp_path):
    adventure = await new_adventure(db)
    other = await new_adventure(db, channel_id=2)
    before = this_process(tmp_path)
    neighbour = this_process(tmp_path)  # a second live process on the same folder
    dead = TurnLeases(db, holder=before.holder, clock=lambda: NOW)
    cut_off = await dead.claim(adventure)
    busy = await TurnLeases(db, holder=neighbour.holder, clock=lambda: NOW).claim(other)
    before.close()  # killed: nothing released, the leases live on for 30 s

    after = this_process(tmp_path)
    assert after.name == before.name
    restarted = TurnLeases(db, holder=after.holder, clock=lambda: NOW)
    # Not expired, yet its own from before the restart: reaped at start-up …
    assert await restarted.reap_expired() == [adventure]
    taken = await restarted.claim(adventure)
    assert taken.reclaimed_from is None and taken.token == cut_off.token + 1
    # … while the neighbour's live lease is not its to take.
    with pytest.raises(LeaseBusy):
        await restarted.claim(other)
    assert await TurnLeases(db, holder=neighbour.holder, clock=lambda: NOW).heartbeat(busy)
    # And the neighbour, starting up, takes back nothing of the first one's.
    assert await TurnLeases(db, holder=neighbour.holder, clock=lambda: NOW).reap_expired() == []
    after.close()
    neighbour.close()


async def test_a_claim_takes_over_a_lease_of_its_own_earlier_incarnation(db, tmp_path):
    adventure = await new_adventure(db)
    before = this_process(tmp_path)
    cut_off = await TurnLeases(db, holder=before.holder, clock=lambda: NOW).claim(adventure)
    before.close()
    after = this_process(tmp_path)
    taken = await TurnLeases(db, holder=after.holder, clock=lambda: NOW).claim(adventure)
    assert taken.reclaimed_from == before.holder and taken.token == cut_off.token + 1
    after.close()


async def test_a_restarted_process_takes_back_its_job_leases(db, tmp_path):
    before = this_process(tmp_path)
    neighbour = this_process(tmp_path)
    assert await JobLeases(db, holder=before.holder, clock=lambda: NOW).claim("cleanup")
    assert await JobLeases(db, holder=neighbour.holder, clock=lambda: NOW).claim("sweep")
    before.close()

    after = this_process(tmp_path)
    jobs = JobLeases(db, holder=after.holder, clock=lambda: NOW)
    assert await jobs.running(["cleanup", "sweep"]) == {"sweep"}
    assert await jobs.claim("cleanup") is not None  # at its next claim …
    assert await jobs.claim("sweep") is None  # … but not the neighbour's
    after.close()

    again = this_process(tmp_path)
    assert again.name == before.name
    assert await JobLeases(db, holder=again.holder, clock=lambda: NOW).reap_earlier() == ["cleanup"]
    assert await JobLeases(db, holder=neighbour.holder, clock=lambda: NOW).reap_earlier() == []
    again.close()
    neighbour.close()
