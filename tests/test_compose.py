"""docker-compose.yml's scale profile: two processes that together run every shard once, each
with settings Campfire accepts, its own name in the lease rows, its own data and metrics port,
on the profile's PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.config import load_settings

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


def _services() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]


def test_the_scale_profile_splits_the_shards_between_two_processes(tmp_path, monkeypatch):
    services = _services()
    shards = {name: s for name, s in services.items() if "scale" in s.get("profiles", [])}
    processes = {name: s for name, s in shards.items() if name != "postgres"}
    assert len(processes) == 2 and "postgres" in shards
    run: list[int] = []
    counts, names, ports, volumes = set(), set(), set(), set()
    for service in processes.values():
        env = {k: str(v) for k, v in service["environment"].items()}
        assert env["CAMPFIRE_DATABASE_URL"].startswith("postgresql+asyncpg://")
        assert "@postgres:" in env["CAMPFIRE_DATABASE_URL"]
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("CAMPFIRE_DATA_DIR", str(tmp_path))
        settings = load_settings()  # raises ConfigError on anything Campfire would refuse
        assert settings.shard_ids is not None and settings.shard_count is not None
        run += settings.shard_ids
        counts.add(settings.shard_count)
        names.add(settings.instance_name)
        ports.add(settings.metrics_port)
        volumes.add(tuple(service["volumes"]))
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
    (count,) = counts
    assert sorted(run) == list(range(count))  # every shard, each once
    assert len(names) == len(ports) == len(volumes) == 2
