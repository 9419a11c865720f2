"""Campfire's settings: one typed object read from the environment and an optional ``.env``.

Every variable is documented in ``docs/configuration.md`` and ``.env.example``. A wrong value
stops start-up with a message naming the variable and what it expects (``ConfigError``).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Annotated, Any, Literal

import platformdirs
from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from engine.llm.providers.dialects import KINDS
from engine.llm.providers.logit_bias import TOKENIZERS
from engine.platform.coordination.instance import NAME_PATTERN
from engine.platform.redaction import redact, url_secrets
from engine.prompt.card_cap import DEFAULT_MAX_CARDS
from engine.storage.private_files import private_file, private_folder

SECRET_KEY_FILE = "secret.key"
#: Settings whose values are never repeated back, not even in an error about them.
SECRET_FIELDS = (
    "discord_token",
    "model_api_key",
    "embedding_api_key",
    "moderation_api_key",
    "secret_key",
)


class ConfigError(Exception):
    """A setting is missing or malformed; the message says which and what it expects."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CAMPFIRE_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        # `KEY=` in a copied .env.example means "not set", not "set to nothing".
        env_ignore_empty=True,
        validate_default=True,
    )

    discord_token: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("DISCORD_TOKEN", "CAMPFIRE_DISCORD_TOKEN"),
        description="Bot token; without it `python -m bot` opens the console.",
    )
    data_dir: Path = Field(
        default_factory=lambda: Path(platformdirs.user_data_dir("campfire", appauthor=False)),
        description="Where the database, the secret key and logs live (created owner-only).",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy async URL; default an SQLite file in the data directory.",
    )

    model_url: str | None = Field(
        default=None,
        description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1. Unset: the "
        "embedded SmolLM2 model.",
    )
    model_api_key: SecretStr | None = None
    model_name: str = "llama3.1"
    max_output_tokens: int = Field(default=300, ge=16, le=32768)
    temperature: float = Field(default=0.8, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    context_tokens: int = Field(default=4096, ge=512, le=1_000_000)
    embedded_context_tokens: int = Field(
        default=2048,
        ge=512,
        le=8192,
        description="The context budget on the embedded model (at most context_tokens): a "
        "small CPU reads about 160 prompt tokens a second, so a smaller prompt answers sooner.",
    )
    embedded_max_output_tokens: int = Field(
        default=120,
        ge=16,
        le=4096,
        description="The longest narration on the embedded model (at most max_output_tokens).",
    )
    model_timeout: float = Field(default=60.0, gt=0.0, le=3600.0)
    model_reply_seconds: float = Field(
        default=180.0,
        gt=0.0,
        le=3600.0,
        description="The longest one model reply may take, start to end, before it is stopped.",
    )
    model_reply_chars: int = Field(
        default=20_000,
        ge=100,
        le=1_000_000,
        description="The most characters (story and reasoning) one model reply may have.",
    )
    local_model_path: Path | None = Field(
        default=None, description="Another GGUF file for the embedded model."
    )
    model_tokenizer: str | None = Field(
        default=None,
        description="The tokenizer of the model at CAMPFIRE_MODEL_URL (cl100k_base); when set, "
        "banned words of one token are banned in its replies by logit bias. Unset: none is "
        "sent (token ids of another tokenizer would ban other words).",
    )
    model_kind: str | None = Field(
        default=None,
        description="The kind of server at CAMPFIRE_MODEL_URL (openai, llama.cpp, vllm, "
        "koboldcpp, openrouter, ollama, compatible): which of an adventure's sampling settings "
        "it is sent (min-p and the repetition penalty only where it takes them). Unset: known "
        "by the host (OpenAI's, OpenRouter's), else OpenAI's own fields only.",
    )

    embedding_url: str | None = None
    embedding_model: str | None = None
    embedding_api_key: SecretStr | None = None
    moderation_url: str | None = Field(
        default=None,
        description="An OpenAI-compatible server whose /moderations checks actions and "
        "narrations for the place's content rating; unset: nothing is checked.",
    )
    moderation_model: str = "omni-moderation-latest"
    moderation_api_key: SecretStr | None = None
    moderation_fail_closed: bool = Field(
        default=False,
        description="When the moderation check fails or does not answer: refuse the text "
        "(the player presses Retry) instead of letting it through.",
    )
    moderation_timeout: float = Field(default=10.0, gt=0.0, le=120.0)
    embedding_floor: float | None = Field(
        default=None,
        ge=-1.0,
        le=1.0,
        description="Cosine floor for semantic memory admission; unset: Campfire's table for "
        "known models (an unknown model gets lexical retrieval only).",
    )
    memory_top_k: int = Field(default=5, ge=1, le=50)
    background_model_use: bool = Field(
        default=True,
        description="Whether background work (memories, the story summary) may use the "
        "default model.",
    )

    secret_key: SecretStr | None = Field(
        default=None,
        description="Encrypts stored API keys. Unset: generated into the data directory once.",
    )
    guest_retention_days: int = Field(default=30, ge=1, le=3650)
    server_grace_days: int = Field(default=7, ge=0, le=3650)
    allow_private_endpoints: bool = Field(
        default=False,
        description="Let players use any non-public address for their own models: every "
        "service on the bot's network (the database, the metrics port, a cloud's metadata "
        "service) becomes reachable to them. Prefer CAMPFIRE_TRUSTED_ENDPOINT_HOSTS.",
    )
    # NoDecode: the environment gives "ollama,llm.lan", not JSON; _host_list reads it.
    trusted_endpoint_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="Host names players may use for their own models although they resolve to "
        "private addresses, comma-separated (a companion model server: `ollama`); only these "
        "names, nothing else on the network.",
    )

    content_rating: Literal["safe", "moderate", "mature"] = Field(
        default="moderate",
        description="The content rating of a server or DM that has not chosen its own: safe, "
        "moderate or mature. Mature applies only in channels Discord marks age-restricted.",
    )
    content_ceiling: Literal["safe", "moderate", "mature"] = Field(
        default="mature",
        description="The highest content rating any server or player may choose.",
    )
    # NoDecode: the environment gives "word,a phrase", not JSON; _word_list reads it.
    banned_words: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="Words and phrases banned in every adventure, comma-separated: an action "
        "holding one is refused, a narration's are masked.",
    )
    max_action_chars: int = Field(default=2000, ge=1, le=4000)
    message_play: bool = Field(
        default=True,
        description="Let adventures play by plain messages where their hosts switch it on. "
        "Off: the bot asks Discord for no messages at all (neither the GUILD_MESSAGES nor the "
        "DIRECT_MESSAGES intent), and only slash commands and buttons play.",
    )
    message_content: bool = Field(
        default=False,
        description="Ask Discord for the Message Content intent (privileged: switch it on in "
        "the Developer Portal first), so plain messages play where an adventure enables it; "
        "without it only messages that mention the bot play.",
    )
    round_timeout_seconds: float = Field(
        default=120.0,
        gt=0.0,
        le=86400.0,
        description="How long a round (/host mode rounds) waits for late players before it "
        "closes with the actions it has.",
    )
    max_import_bytes: int = Field(default=2 * 1024 * 1024, ge=1024, le=10 * 1024 * 1024)
    # A character card PNG carries its picture too; only its text chunk is read.
    max_import_image_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, le=25 * 1024 * 1024)
    max_story_cards: int = Field(default=DEFAULT_MAX_CARDS, ge=1, le=10_000)
    # Published scripts are big: Auto-Cards is 0.3 M characters, Localized Languages 2 M.
    max_script_chars: int = Field(default=2_500_000, ge=1, le=10_000_000)
    script_memory_mb: int = Field(default=16, ge=1, le=1024)
    script_time_seconds: float = Field(default=2.0, gt=0.0, le=60.0)
    script_turn_seconds: float = Field(default=6.0, gt=0.0, le=600.0)
    max_script_state_chars: int = Field(default=100_000, ge=1_000, le=10_000_000)
    max_memories: int = Field(default=200, ge=1, le=100_000)
    max_queued_actions: int = Field(default=5, ge=1, le=100)
    # Adventures one player may begin (start or import) in any hour, and host at once.
    adventures_per_hour: int = Field(default=10, ge=1, le=10_000)
    active_adventures_per_user: int = Field(default=25, ge=1, le=100_000)

    # --- the operator's budget and the rate limits (engine.people.limits) -------------------------
    # NoDecode: the environment gives "llama3.1,qwen2.5", not JSON; _model_whitelist reads it.
    model_whitelist: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="Models players may pick on the operator's endpoint, comma-separated "
        "(CAMPFIRE_MODEL_NAME always may). Empty: only CAMPFIRE_MODEL_NAME.",
    )
    user_tokens_per_day: int = Field(
        default=500_000,
        ge=0,
        description="Tokens one player may use on the operator's model per UTC day (0: no cap).",
    )
    server_tokens_per_day: int = Field(
        default=2_000_000,
        ge=0,
        description="Tokens one server may use on the operator's model per UTC day (0: no cap).",
    )
    turns_per_user_per_minute: int = Field(default=12, ge=1, le=10_000)
    turns_per_adventure_per_minute: int = Field(default=20, ge=1, le=10_000)
    script_tests_per_minute: int = Field(default=6, ge=1, le=10_000)
    model_checks_per_minute: int = Field(
        default=4,
        ge=1,
        le=10_000,
        description="/model set and /model test per player a minute (each reaches an endpoint).",
    )
    card_writes_per_minute: int = Field(
        default=3,
        ge=1,
        le=10_000,
        description="/card generate per player a minute (each is a call of the model).",
    )
    imports_per_day: int = Field(default=30, ge=1, le=100_000)
    scenarios_per_library: int = Field(
        default=200,
        ge=1,
        le=100_000,
        description="Scenarios one library holds (a player's own, or a server's).",
    )
    actions_per_adventure: int = Field(
        default=20_000,
        ge=10,
        le=10_000_000,
        description="Story entries (actions and narrations) one adventure may hold.",
    )
    cooldown_seconds: int = Field(
        default=30,
        ge=1,
        le=86_400,
        description="The extra wait after a second refusal by a rate limit within 10 minutes; "
        "it doubles with each further one.",
    )
    cooldown_max_seconds: int = Field(default=900, ge=1, le=86_400)
    cards_per_user: int = Field(
        default=10_000,
        ge=1,
        le=10_000_000,
        description="Story cards players may add (/card add) to the adventures one player "
        "hosts, all together.",
    )
    memories_per_user: int = Field(
        default=10_000,
        ge=1,
        le=10_000_000,
        description="Live memories players may add (/memory add) to the adventures one "
        "player hosts, all together.",
    )

    log_level: str = Field(default="INFO", pattern=r"^(?i:debug|info|warning|error|critical)$")
    instance_name: str | None = Field(
        default=None,
        description="This process's name in lease rows, the same after a restart. Unset: one "
        "kept in the data folder (a second process on the same folder gets another).",
    )
    shard_count: int | None = Field(
        default=None,
        ge=1,
        description="How many Discord shards the bot runs in all. Unset: Discord's "
        "recommendation (GET /gateway/bot), asked at every start.",
    )
    # NoDecode: the environment gives "0-3" or "0,2", not JSON; _shard_id_list reads it.
    shard_ids: Annotated[tuple[int, ...] | None, NoDecode] = Field(
        default=None,
        description="The shards this process runs: numbers and ranges, comma-separated (0-3, "
        "or 0,2,5-7); the others run in other processes on the same database. Unset: all.",
    )
    discord_requests_per_second: int = Field(
        default=50,
        ge=1,
        le=100_000,
        description="The bot's global request budget on Discord (50 a second unless Discord "
        "raised it for the bot); processes running some shards each take their share.",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="The port of this process's /healthz and /metrics (Prometheus). Unset: "
        "no such server.",
    )
    metrics_host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="The address /healthz and /metrics listen on; 0.0.0.0 for every interface "
        "(a scraper on another machine or container).",
    )

    # --- running a public bot: the operator, the secret (issue 18, models part) ---------------
    # NoDecode: the environment gives "123,456", not JSON; _operator_id_list reads it.
    operator_ids: Annotated[tuple[int, ...], NoDecode] = Field(
        default=(),
        description="Discord user ids of the bot's operators, comma-separated, besides the "
        "application's owner (who always is one): they may use /operator.",
    )
    require_secret_key: bool = Field(
        default=False,
        description="Refuse to start unless CAMPFIRE_SECRET_KEY is set (hosted deployments: "
        "no key generated into the data folder).",
    )

    @field_validator("operator_ids", mode="before")
    @classmethod
    def _operator_id_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return tuple(int(part) for part in value.split(",") if part.strip())
            except ValueError:
                raise ValueError("Discord user ids separated by commas") from None
        return value

    @field_validator("content_ceiling")
    @classmethod
    def _ceiling_above_default(cls, value: str, info: ValidationInfo) -> str:
        order = ("safe", "moderate", "mature")
        default = info.data.get("content_rating")
        if default is not None and order.index(default) > order.index(value):
            raise ValueError(
                f"at least CAMPFIRE_CONTENT_RATING ({default}): the default cannot be above "
                "the ceiling"
            )
        return value

    @field_validator("banned_words", mode="before")
    @classmethod
    def _word_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("trusted_endpoint_hosts", mode="before")
    @classmethod
    def _host_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip().lower() for part in value.split(",") if part.strip())
        return value

    @field_validator("model_url", "embedding_url", "moderation_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("an http:// or https:// URL")
        return value

    @field_validator("model_tokenizer")
    @classmethod
    def _tokenizer(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if value.strip() not in TOKENIZERS:
            raise ValueError(f"one of {', '.join(TOKENIZERS)}, or nothing")
        return value.strip()

    @field_validator("model_kind")
    @classmethod
    def _kind(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if value.strip().lower() not in KINDS:
            raise ValueError(f"one of {', '.join(KINDS)}, or nothing")
        return value.strip().lower()

    @field_validator("model_whitelist", mode="before")
    @classmethod
    def _model_names(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @field_validator("instance_name")
    @classmethod
    def _instance_name(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not NAME_PATTERN.match(value.strip()):
            raise ValueError("1 to 64 letters, digits or . _ : -")
        return value.strip()

    @field_validator("shard_ids", mode="before")
    @classmethod
    def _shard_id_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            if not value.strip():
                return None
            try:
                return tuple(shard for part in value.split(",") for shard in _shard_range(part))
            except ValueError:
                raise ValueError(
                    "shard numbers and ranges separated by commas, e.g. 0-3 or 0,2,5-7"
                ) from None
        return value

    @field_validator("shard_ids")
    @classmethod
    def _shard_ids(cls, value: tuple[int, ...] | None, info: ValidationInfo) -> Any:
        if value is None:
            return None
        if "shard_count" not in info.data:
            return value  # CAMPFIRE_SHARD_COUNT itself is wrong, and said so
        # discord.py needs the total to route a process's share (AutoShardedClient).
        count = info.data["shard_count"]
        if count is None:
            raise ValueError("CAMPFIRE_SHARD_COUNT set too, when a process runs only some shards")
        if not value:
            raise ValueError("at least one shard number")
        outside = [shard for shard in value if not 0 <= shard < count]
        if outside:
            raise ValueError(
                f"shard numbers from 0 to {count - 1} (CAMPFIRE_SHARD_COUNT is {count})"
            )
        if len(set(value)) != len(value):
            raise ValueError("each shard number once")
        return tuple(sorted(value))

    @field_validator("message_content")
    @classmethod
    def _content_of_messages_played(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("message_play") is False:
            raise ValueError(
                "false while CAMPFIRE_MESSAGE_PLAY is false: no message is read, so its "
                "content is not needed (set one of the two)"
            )
        return value

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("a URL starting with sqlite+aiosqlite:// or postgresql+asyncpg://")
        return value

    @property
    def effective_database_url(self) -> str:
        return self.database_url or f"sqlite+aiosqlite:///{self.data_dir / 'campfire.db'}"

    @property
    def secret_values(self) -> tuple[str, ...]:
        """Every secret these settings hold: keys, the token, the URLs' passwords. Masked in
        anything shown or logged (engine.platform.redaction)."""
        values: list[str] = []
        for name in SECRET_FIELDS:
            secret = getattr(self, name)
            if secret is not None:
                values.append(secret.get_secret_value())
        for url in (self.database_url, self.model_url, self.embedding_url, self.moderation_url):
            values.extend(url_secrets(url))
        return tuple(values)

    def ensure_data_dir(self) -> Path:
        """The data folder, created owner-only when missing."""
        try:
            private_folder(self.data_dir)
        except OSError as exc:
            raise ConfigError(
                f"CAMPFIRE_DATA_DIR: cannot create {self.data_dir} ({exc.strerror}); "
                "expected a writable folder."
            ) from None
        return self.data_dir

    def resolve_secret_key(self) -> bytes:
        """The key for encrypting secrets at rest: from the environment, or the data directory.

        Generated on first run and reused after, so stored API keys stay readable across
        restarts without the operator having to invent a key.
        """
        if self.secret_key is None and self.require_secret_key:
            raise ConfigError(
                "CAMPFIRE_SECRET_KEY: not set, and CAMPFIRE_REQUIRE_SECRET_KEY is true. Set "
                "the key in the environment (at least 16 characters, e.g. from "
                "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`); Campfire "
                "will not generate one on disk."
            )
        if self.secret_key is not None:
            raw = self.secret_key.get_secret_value().strip()
            if len(raw) < 16:
                raise ConfigError("CAMPFIRE_SECRET_KEY: expected at least 16 characters.")
            return raw.encode()
        path = self.ensure_data_dir() / SECRET_KEY_FILE
        if path.exists():
            return private_file(path).read_bytes().strip()
        key = secrets.token_urlsafe(32).encode()
        # Created with owner-only permissions from the start, never world-readable.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        return key


def _shard_range(part: str) -> range:
    """``"5"`` or ``"5-7"`` (both ends included), as CAMPFIRE_SHARD_IDS writes them."""
    first, dash, last = part.strip().partition("-")
    if not dash:
        return range(int(first), int(first) + 1)
    if int(last) < int(first):
        raise ValueError("a range runs upwards")
    return range(int(first), int(last) + 1)


def env_name(field: str) -> str:
    if field == "discord_token":
        return "DISCORD_TOKEN"
    return f"CAMPFIRE_{field.upper()}"


def load_settings(**overrides: Any) -> Settings:
    """Read settings, turning validation errors into one message per bad variable.

    The message repeats the wrong value, so the operator sees what was read; a secret's value is
    never repeated, and a URL's password is masked (the message goes to a terminal and logs).
    """
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else "?"
            line = f"{env_name(field)}: expected {_expected(error)}"
            if field not in SECRET_FIELDS:
                got = error.get("input")
                line += f", got {redact(repr(got), url_secrets(str(got)))}"
            lines.append(line)
        raise ConfigError("Campfire cannot start:\n  " + "\n  ".join(lines)) from None


def _expected(error: Any) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind in ("int_parsing", "int_from_float"):
        return "a whole number"
    if kind == "float_parsing":
        return "a number"
    if kind == "bool_parsing":
        return "true or false"
    if kind in ("greater_than_equal", "greater_than"):
        return f"a number {'≥' if kind.endswith('equal') else '>'} {ctx.get('ge', ctx.get('gt'))}"
    if kind in ("less_than_equal", "less_than"):
        return f"a number {'≤' if kind.endswith('equal') else '<'} {ctx.get('le', ctx.get('lt'))}"
    if kind == "string_pattern_mismatch":
        return "one of debug, info, warning, error, critical"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return error["msg"].lower()
