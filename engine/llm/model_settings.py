"""``/model``: a server's or a player's own model, set, shown, tested and cleared.

In a server its managers choose the model the server's adventures use (stored on the server's
row); in a DM a player chooses the model their own adventures use (``user_models``). Who may is
``engine.people.access``'s rule. The URL is checked by ``engine.llm.providers.endpoint_policy``
before it
is stored (and again on every connection). The key is encrypted at rest and never shown again:
what anyone is shown is that one is set and its last four characters.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import delete, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, ModelError, ReasoningExhausted
from engine.llm.model_choice import OPERATORS_ENDPOINT, ModelChoice, choice_here
from engine.llm.providers.base import ChatMessage, GenerationParams
from engine.llm.providers.endpoint_policy import EndpointPolicy
from engine.llm.providers.resolver import ChosenModels
from engine.people.access.checks import check_may_choose_model
from engine.people.access.rules import Actor
from engine.people.accounts import touch_actor
from engine.people.limits import Charge, Kind, UsageLimits
from engine.platform.crypto import SecretBox
from engine.platform.events import StreamEnd, TextDelta, Usage
from engine.storage.database import Database
from engine.storage.models import Server, UserModel, utcnow

MAX_URL_CHARS = 500
MAX_MODEL_CHARS = 200
MAX_KEY_CHARS = 1000
#: How many of a key's last characters are shown, so its owner can tell which key it is.
KEY_TAIL = 4

#: The tiny request ``/model test`` sends.
TEST_MESSAGES = (
    ChatMessage("system", "You are being tested. Answer with one word."),
    ChatMessage("user", "Say ready."),
)
TEST_PARAMS = GenerationParams(max_tokens=32, temperature=0.0)
#: More than the two messages above take with any chat template's wrapping.
TEST_PROMPT_TOKENS = 64


@dataclass(frozen=True, slots=True)
class ModelView:
    """What ``/model show`` says: whose model the place uses, never the key itself."""

    #: "server" in a server, "player" in a DM.
    place: str
    #: The place's own model; None when the operator's is used.
    url: str | None = None
    model: str | None = None
    #: The key's last characters ("4f2a"); None when no key is stored.
    key_tail: str | None = None
    #: A model picked on the operator's endpoint (``url`` is then no address).
    picked: bool = False


@dataclass(frozen=True, slots=True)
class ModelTest:
    ok: bool
    #: What the model said (success), or the provider's error, readable by a player.
    said: str
    seconds: float


def _tail(key: str | None) -> str | None:
    if not key:
        return None
    return key[-KEY_TAIL:] if len(key) > KEY_TAIL * 2 else "…"


def _checked_text(name: str, value: str, most: int) -> str:
    value = value.strip()
    if not value:
        raise InvalidInput(f"The {name} is empty; nothing was changed.")
    if len(value) > most:
        raise InvalidInput(f"The {name} is longer than {most} characters; nothing was changed.")
    if any(ch.isspace() for ch in value):
        raise InvalidInput(f"The {name} has spaces in it; nothing was changed.")
    return value


async def _store(
    session: AsyncSession, actor: Actor, url: str, model: str, encrypted: str | None
) -> None:
    """The place's model: the server's in a server, the player's own in a DM."""
    if actor.server_id is not None:
        await session.execute(
            update(Server)
            .where(col(Server.id) == actor.server_id)
            .values(model_url=url, model_name=model, model_api_key_encrypted=encrypted)
        )
        return
    row = await session.get(UserModel, actor.user_id)
    if row is None:
        row = UserModel(user_id=actor.user_id, url=url, model_name=model)
    row.url, row.model_name, row.api_key_encrypted = url, model, encrypted
    row.updated_at = utcnow()
    session.add(row)


class ModelSettings:
    def __init__(
        self,
        db: Database,
        secrets: SecretBox,
        policy: EndpointPolicy,
        models: ChosenModels,
        *,
        rate_limits: UsageLimits | None = None,
    ) -> None:
        """``rate_limits``: how often a player may set or test a model (None: no limit, for
        tools and tests); each reaches an endpoint the player chose."""
        self.db = db
        self.secrets = secrets
        self.policy = policy
        self.models = models
        self.rate_limits = rate_limits

    async def _count_check(self, actor: Actor) -> None:
        if self.rate_limits is not None:
            await self.rate_limits.use(Kind.MODEL_CHECK, actor)

    async def set(self, actor: Actor, url: str, model: str, key: str | None) -> ModelView:
        """Store the model for the actor's place. A key left out keeps the stored one only
        when the URL is the same: a stored key is never sent to an address it was not given
        for."""
        check_may_choose_model(actor)
        url = _checked_text("URL", url, MAX_URL_CHARS).rstrip("/")
        model = _checked_text("model name", model, MAX_MODEL_CHARS)
        if key is not None:
            key = _checked_text("key", key, MAX_KEY_CHARS)
        await self._count_check(actor)
        await self.policy.check(url)
        async with self.db.transaction() as session:
            await touch_actor(session, actor)
            stored = await choice_here(session, actor.server_id, actor.user_id)
            if key is not None:
                encrypted: str | None = self.secrets.encrypt(key)
            elif stored is not None and stored.url == url:
                encrypted = stored.key_encrypted
            else:
                encrypted = None
            await _store(session, actor, url, model, encrypted)
        return self._view(actor, ModelChoice("player", url, model, encrypted))

    def offered(self) -> tuple[str, ...]:
        """The models players may pick on the operator's endpoint (``/model pick``)."""
        return self.models.offered()

    async def pick(self, actor: Actor, model: str) -> ModelView:
        """Use one of the operator's whitelisted models here, on the operator's endpoint
        (``CAMPFIRE_MODEL_WHITELIST``): the operator's budget and ceilings hold as for its
        default model. A model the operator does not offer is refused."""
        check_may_choose_model(actor)
        model = _checked_text("model name", model, MAX_MODEL_CHARS)
        if not self.models.pickable(model):
            offered = ", ".join(f"`{name}`" for name in self.offered())
            raise InvalidInput(
                f"“{model}” is not a model the operator offers here"
                + (f": pick one of {offered}." if offered else "; none is offered.")
                + " Nothing was changed."
            )
        async with self.db.transaction() as session:
            await touch_actor(session, actor)
            await _store(session, actor, OPERATORS_ENDPOINT, model, None)
        return self._view(actor, ModelChoice("player", OPERATORS_ENDPOINT, model))

    async def show(self, actor: Actor) -> ModelView:
        async with self.db.session() as session:
            choice = await choice_here(session, actor.server_id, actor.user_id)
        return self._view(actor, choice)

    async def clear(self, actor: Actor) -> ModelChoice | None:
        """Forget the place's own model (and its key), or its pick of the operator's models;
        what was forgotten (None when nothing was set)."""
        check_may_choose_model(actor)
        async with self.db.transaction() as session:
            before = await choice_here(session, actor.server_id, actor.user_id)
            if actor.server_id is not None:
                result = await session.execute(
                    update(Server)
                    .where(col(Server.id) == actor.server_id, col(Server.model_url).is_not(None))
                    .values(model_url=None, model_name=None, model_api_key_encrypted=None)
                )
            else:
                result = await session.execute(
                    delete(UserModel).where(col(UserModel.user_id) == actor.user_id)
                )
        return before if getattr(result, "rowcount", 0) else None

    async def test(self, actor: Actor) -> ModelTest | None:
        """Send the place's own model a tiny request; None when the place has none."""
        async with self.db.session() as session:
            choice = await choice_here(session, actor.server_id, actor.user_id)
        if choice is None:
            return None
        await self._count_check(actor)
        started = time.monotonic()
        try:
            if not choice.on_operators_endpoint:  # the operator's address is not checked
                await self.policy.check(choice.url)
            provider = self.models.provider_for(choice)
            text, usage = "", None
            async for chunk in provider.stream(list(TEST_MESSAGES), TEST_PARAMS):
                if isinstance(chunk, TextDelta):
                    text += chunk.text
                elif isinstance(chunk, StreamEnd):
                    usage = chunk.usage
            if choice.on_operators_endpoint and self.rate_limits is not None:
                # One of the operator's models, picked: the operator pays for the test too
                # (what the provider counted; without its count, the most the test can cost).
                await self.rate_limits.count_background(
                    Charge(actor.user_id, actor.server_id),
                    usage or Usage(TEST_PROMPT_TOKENS, TEST_PARAMS.max_tokens),
                )
        except ReasoningExhausted:
            text = "(it reasoned through the whole tiny budget: it answers)"
        except ModelError as error:
            return ModelTest(False, str(error), time.monotonic() - started)
        return ModelTest(True, text.strip()[:200], time.monotonic() - started)

    def _view(self, actor: Actor, choice: ModelChoice | None) -> ModelView:
        place = "server" if actor.server_id is not None else "player"
        if choice is None:
            return ModelView(place)
        key = self.secrets.decrypt(choice.key_encrypted) if choice.key_encrypted else None
        return ModelView(
            place, choice.url, choice.model, _tail(key), picked=choice.on_operators_endpoint
        )
