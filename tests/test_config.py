"""Settings: defaults, the environment, and messages that name the bad variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import ConfigError, load_settings

SOURCE_TREE = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    for name in list(__import__("os").environ):
        if name.startswith("CAMPFIRE_") or name == "DISCORD_TOKEN":
            monkeypatch.delenv(name)
    # No stray .env from the developer's checkout.
    monkeypatch.chdir(tmp_path)


def test_defaults_need_no_setup():
    settings = load_settings()
    assert settings.discord_token is None
    assert settings.model_url is None  # the embedded model
    # The platform's data folder, never inside the source tree.
    assert SOURCE_TREE not in settings.data_dir.resolve().parents
    assert settings.effective_database_url.startswith("sqlite+aiosqlite:///")
    assert settings.effective_database_url.endswith("campfire.db")
    assert settings.guest_retention_days == 30


def test_the_example_env_file_as_copied_gives_the_defaults(tmp_path):
    (tmp_path / ".env").write_text((SOURCE_TREE / ".env.example").read_text())
    settings = load_settings()
    defaults = load_settings(_env_file=None)
    assert settings.model_dump() == defaults.model_dump()
    assert settings.discord_token is None


def test_environment_and_dotenv_are_read(monkeypatch, tmp_path):
    monkeypatch.setenv("DISCORD_TOKEN", "abc.def")
    monkeypatch.setenv("CAMPFIRE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CAMPFIRE_MODEL_URL", "http://localhost:11434/v1/")
    (tmp_path / ".env").write_text("CAMPFIRE_TEMPERATURE=0.3\nCAMPFIRE_MODEL_NAME=qwen3\n")
    settings = load_settings()
    assert settings.discord_token.get_secret_value() == "abc.def"
    assert settings.data_dir == tmp_path / "data"
    assert settings.model_url == "http://localhost:11434/v1"
    assert settings.temperature == 0.3
    assert settings.model_name == "qwen3"
    assert str(tmp_path / "data" / "campfire.db") in settings.effective_database_url


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("CAMPFIRE_TEMPERATURE", "hot", "CAMPFIRE_TEMPERATURE: expected a number, got 'hot'"),
        ("CAMPFIRE_TEMPERATURE", "5", "CAMPFIRE_TEMPERATURE: expected a number ≤ 2.0"),
        ("CAMPFIRE_MAX_OUTPUT_TOKENS", "lots", "CAMPFIRE_MAX_OUTPUT_TOKENS: expected a whole"),
        ("CAMPFIRE_GUEST_RETENTION_DAYS", "0", "_RETENTION_DAYS: expected a number ≥ 1"),
        ("CAMPFIRE_MODEL_URL", "localhost:11434", "CAMPFIRE_MODEL_URL: expected an http:// or"),
        ("CAMPFIRE_DATABASE_URL", "sqlite:///x.db", "CAMPFIRE_DATABASE_URL: expected a URL"),
        ("CAMPFIRE_ALLOW_PRIVATE_ENDPOINTS", "maybe", "expected true or false"),
        ("CAMPFIRE_LOG_LEVEL", "loud", "CAMPFIRE_LOG_LEVEL: expected one of debug"),
        ("CAMPFIRE_METRICS_PORT", "70000", "CAMPFIRE_METRICS_PORT: expected a number ≤ 65535"),
    ],
)
def test_a_wrong_value_names_the_variable_and_what_it_expects(
    monkeypatch, variable, value, expected
):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert expected in str(caught.value)


def test_every_bad_variable_is_reported_at_once(monkeypatch):
    monkeypatch.setenv("CAMPFIRE_TEMPERATURE", "hot")
    monkeypatch.setenv("CAMPFIRE_CONTEXT_TOKENS", "12")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "CAMPFIRE_TEMPERATURE" in str(caught.value)
    assert "CAMPFIRE_CONTEXT_TOKENS" in str(caught.value)


def test_shards_are_read_from_the_environment(monkeypatch):
    settings = load_settings()
    assert settings.shard_count is None and settings.shard_ids is None  # Discord's advice, all
    monkeypatch.setenv("CAMPFIRE_SHARD_COUNT", "4")
    monkeypatch.setenv("CAMPFIRE_SHARD_IDS", "3, 1")
    settings = load_settings()
    assert settings.shard_count == 4 and settings.shard_ids == (1, 3)
    # Ranges, as a process of a larger layout names its share.
    monkeypatch.setenv("CAMPFIRE_SHARD_COUNT", "8")
    monkeypatch.setenv("CAMPFIRE_SHARD_IDS", "4-6, 0")
    assert load_settings().shard_ids == (0, 4, 5, 6)


@pytest.mark.parametrize(
    ("count", "ids", "expected"),
    [
        ("0", None, "CAMPFIRE_SHARD_COUNT: expected a number ≥ 1, got '0'"),
        (None, "0,1", "CAMPFIRE_SHARD_IDS: expected CAMPFIRE_SHARD_COUNT set too"),
        ("2", "0,2", "CAMPFIRE_SHARD_IDS: expected shard numbers from 0 to 1 (CAMPFIRE_SHARD_"),
        ("2", "1-2", "CAMPFIRE_SHARD_IDS: expected shard numbers from 0 to 1"),
        ("2", "-1", "CAMPFIRE_SHARD_IDS: expected shard numbers and ranges separated by commas"),
        ("2", "one", "CAMPFIRE_SHARD_IDS: expected shard numbers and ranges separated by commas"),
        ("4", "3-1", "CAMPFIRE_SHARD_IDS: expected shard numbers and ranges separated by commas"),
        ("3", "1,0-1", "CAMPFIRE_SHARD_IDS: expected each shard number once"),
    ],
)
def test_wrong_shards_are_explained(monkeypatch, count, ids, expected):
    if count is not None:
        monkeypatch.setenv("CAMPFIRE_SHARD_COUNT", count)
    if ids is not None:
        monkeypatch.setenv("CAMPFIRE_SHARD_IDS", ids)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert expected in str(caught.value)


def test_the_secret_key_is_generated_once_and_reused(monkeypatch, tmp_path):
    monkeypatch.setenv("CAMPFIRE_DATA_DIR", str(tmp_path / "data"))
    first = load_settings().resolve_secret_key()
    second = load_settings().resolve_secret_key()
    assert first == second and len(first) >= 32
    key_file = tmp_path / "data" / "secret.key"
    assert key_file.stat().st_mode & 0o077 == 0  # readable by the owner only

    monkeypatch.setenv("CAMPFIRE_SECRET_KEY", "an operator chosen secret")
    assert load_settings().resolve_secret_key() == b"an operator chosen secret"
    monkeypatch.setenv("CAMPFIRE_SECRET_KEY", "short")
    with pytest.raises(ConfigError, match="CAMPFIRE_SECRET_KEY"):
        load_settings().resolve_secret_key()


def test_an_unwritable_data_dir_is_explained(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("CAMPFIRE_DATA_DIR", str(blocker / "data"))
    with pytest.raises(ConfigError, match="CAMPFIRE_DATA_DIR"):
        load_settings().ensure_data_dir()


@pytest.mark.parametrize("document", [".env.example", "docs/configuration.md"])
def test_every_setting_is_documented(document):
    from bot.config import Settings, env_name

    text = (SOURCE_TREE / document).read_text()
    missing = [env_name(name) for name in Settings.model_fields if env_name(name) not in text]
    assert missing == []


def test_the_content_of_messages_is_not_asked_for_where_none_play(monkeypatch):
    monkeypatch.setenv("CAMPFIRE_MESSAGE_PLAY", "false")
    monkeypatch.setenv("CAMPFIRE_MESSAGE_CONTENT", "true")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "CAMPFIRE_MESSAGE_CONTENT" in str(caught.value)
    assert "CAMPFIRE_MESSAGE_PLAY is false" in str(caught.value)
