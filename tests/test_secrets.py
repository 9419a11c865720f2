"""Secrets stay secret: an endpoint's credentials, the API keys and the token never reach a
player, a log or a config error, and the data folder and its files are the owner's alone."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bot.__main__ import main
from bot.config import load_settings
from engine.platform.redaction import Redactor, host_of, redact_logs, redact_url
from engine.storage.dialect import create_engine
from tests.discord_env import campfire_on_standin
from tests.fakes.openai_server import Reply

PASSWORD = "hunter2"
API_KEY = "sk-operator-key-0123"


def leaks(text: str) -> list[str]:
    return [secret for secret in (PASSWORD, "bob:", API_KEY) if secret in text]


# --- the rules -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://bob:hunter2@127.0.0.1:8080/v1", "http://***@127.0.0.1:8080/v1"),
        ("https://bob:hun@ter2@models.example/v1", "https://***@models.example/v1"),
        (
            "https://models.example/v1?api_key=hunter2&x=1",
            "https://models.example/v1?api_key=***&x=1",
        ),
        (
            "postgresql+asyncpg://campfire:hunter2@db:5432/campfire",
            "postgresql+asyncpg://***@db:5432/campfire",
        ),
        ("http://localhost:11434/v1", "http://localhost:11434/v1"),
    ],
)
def test_a_url_keeps_its_place_and_loses_its_credentials(url, shown):
    assert redact_url(url) == shown
    assert redact_url(shown) == shown  # redacting twice changes nothing
    assert "hunter2" not in host_of(url) and "@" not in host_of(url)


def test_known_secrets_are_masked_wherever_they_appear():
    redact = Redactor([API_KEY, "abc", None])
    text = f"key {API_KEY} sent as Bearer {API_KEY}; the label is llama3.1:8b at bob:pw@host:1"
    assert redact(text) == "key *** sent as Bearer ***; the label is llama3.1:8b at ***@host:1"
    # Too short to mask everywhere ("abc" would blank out words), and not a real secret.
    assert redact("abc") == "abc"


def test_every_log_record_is_redacted_where_it_is_made(caplog):
    caplog.set_level(logging.DEBUG)
    redact_logs([API_KEY])
    log = logging.getLogger("some.library")
    log.info("POST %s", "http://bob:hunter2@host/v1")
    log.debug("key=%s", API_KEY)
    try:
        raise ValueError(f"refused {API_KEY}")
    except ValueError:
        log.exception("request failed")
    assert len(caplog.records) == 3
    assert leaks(caplog.text) == []
    assert "POST http://***@host/v1" in caplog.text and "refused ***" in caplog.text


# --- a player never sees them, a log never holds them --------------------------------------------


async def test_a_model_url_with_credentials_shows_no_address_and_logs_nothing_of_them(
    tmp_path, fake_model, caplog, database_url
):
    host = fake_model.base_url.split("//")[1].split("/")[0]
    url = fake_model.base_url.replace("http://", f"http://bob:{PASSWORD}@")
    # The model's HTTP client at debug too, whatever an earlier test in this process set it to
    # (``python -m bot`` quiets it; ``main`` runs in other tests here).
    for library in ("httpx", "httpcore"):
        caplog.set_level(logging.DEBUG, logger=library)
    async with campfire_on_standin(
        tmp_path,
        fake_model,
        caplog,
        database_url,
        log_level=logging.DEBUG,
        model_url=url,
        model_api_key=API_KEY,
    ) as env:
        await env.fake.slash(env.alice, env.channel, "start")
        await env.done()
        (thread,) = env.fake.threads(env.channel)
        fake_model.queue(Reply(fault="500"), "The lantern catches at last.")
        failed = await env.fake.slash(env.alice, thread, "do", action="light the lantern")
        await env.done()
        shown = env.fake.message(failed.original_message_id).content
        # The operator's address is theirs: players are told the model's name alone.
        assert "The model server at the operator's address had an internal error (500)" in shown
        assert host not in shown
        await env.fake.press(env.alice, failed.original_message_id, label="Retry")
        await env.done()
        assert env.narration(thread)[-1] == "The lantern catches at last."

        insights = await env.fake.slash(env.bob, thread, "insights")
        await env.done()
        (embed,) = env.fake.message(insights.original_message_id).embeds
        footer = embed["footer"]["text"]
        assert footer.startswith(f"{fake_model.model} · ") and host not in footer

        every_message = "\n".join(m.content + repr(m.embeds) for m in env.fake.messages(thread))
        assert leaks(shown + footer + every_message) == []
        logged = [
            (record.name, record.getMessage() + (record.exc_text or ""))
            for record in caplog.records
        ]
        # Debug lines of the libraries that see the secrets were captured (the model's HTTP
        # client, discord.py; on SQLite the database driver's too), so their silence means
        # something. Their number varies with the backend and the gateway's timing.
        sources = {name.split(".")[0] for name, _ in logged}
        assert {"httpx", "httpcore", "discord"} <= sources
        assert [(name, text) for name, text in logged if leaks(text)] == []
        assert leaks(caplog.text) == []


# --- config errors -------------------------------------------------------------------------------


def test_a_config_error_about_a_url_does_not_repeat_its_password(monkeypatch, tmp_path, capsys):
    for name in list(os.environ):
        if name.startswith("CAMPFIRE_") or name == "DISCORD_TOKEN":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAMPFIRE_DATABASE_URL", f"postgres://campfire:{PASSWORD}@db:5432/campfire")
    monkeypatch.setenv("CAMPFIRE_MODEL_URL", f"ftp://bob:{PASSWORD}@models.example/v1")
    assert main(["db", "upgrade"]) == 2
    error = capsys.readouterr().err
    assert "CAMPFIRE_DATABASE_URL: expected a URL starting with sqlite+aiosqlite://" in error
    assert "got 'postgres://***@db:5432/campfire'" in error
    assert "CAMPFIRE_MODEL_URL: expected an http:// or https:// URL" in error
    assert PASSWORD not in error and "bob:" not in error


# --- the data folder -----------------------------------------------------------------------------


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_data_folder_and_its_files_are_the_owners_alone(tmp_path, fake_model):
    data = tmp_path / "campfire" / "data"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("CAMPFIRE_") and key != "DISCORD_TOKEN"
    }
    env |= {
        # This source tree's bot, whichever one the environment has installed.
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
        "CAMPFIRE_DATA_DIR": str(data),
        "CAMPFIRE_MODEL_URL": fake_model.base_url,
        "CAMPFIRE_MODEL_NAME": fake_model.model,
    }
    fake_model.queue("The reeds rustle.")
    done = subprocess.run(
        [sys.executable, "-m", "bot"],
        input="/do listen\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        umask=0o022,  # the usual umask, which leaves new files readable by everyone
    )
    assert done.returncode == 0, done.stderr
    assert "The reeds rustle." in done.stdout
    assert mode(data) == 0o700
    files = {path.name: mode(path) for path in data.iterdir() if path.is_file()}
    assert {"campfire.db", "campfire.log", "secret.key"} <= files.keys()
    assert files == dict.fromkeys(files, 0o600)


def test_files_an_earlier_version_left_open_are_narrowed_and_the_folder_is_left_alone(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o755)  # the operator's (a volume, a shared mount)
    for name in ("campfire.db", "campfire.db-wal", "secret.key"):
        (data / name).write_bytes(b"")
        (data / name).chmod(0o644)
    settings = load_settings(_env_file=None, data_dir=data, secret_key=None)
    settings.resolve_secret_key()
    create_engine(settings.effective_database_url)
    assert mode(data) == 0o755
    assert {path.name: mode(path) for path in data.iterdir()} == {
        "campfire.db": 0o600,
        "campfire.db-wal": 0o600,
        "secret.key": 0o600,
    }
