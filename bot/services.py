"""Building the engine's services from the settings: the one place that reads both."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from bot.config import ConfigError, Settings
from engine.library.archive import AdventureArchive
from engine.library.formats.draft import ImportLimits
from engine.library.knowledge.library import KnowledgeLibrary
from engine.library.knowledge.retrieval import KnowledgeRetriever
from engine.library.scenarios.library import ScenarioLibrary
from engine.library.scenarios.shipped import seed_builtin_scenarios
from engine.library.scripting.manage import ScriptService
from engine.library.scripting.sandbox import Limits
from engine.llm.model_settings import ModelSettings
from engine.llm.providers.base import ChatProvider, GenerationParams, ReplyLimits
from engine.llm.providers.dialects import dialect_for
from engine.llm.providers.embeddings import EmbeddingClient
from engine.llm.providers.endpoint_policy import EndpointPolicy
from engine.llm.providers.local import LocalLlamaProvider
from engine.llm.providers.moderation import ModerationClient
from engine.llm.providers.openai_compat import OpenAICompatibleProvider
from engine.llm.providers.resolver import ChosenModels, ModelLimits, OperatorDefault
from engine.llm.retrieval.retriever import Retriever
from engine.people.adventure_caps import AdventureCaps
from engine.people.blocks import Blocks
from engine.people.content import ContentPolicy, Rating, clean_banned
from engine.people.host_controls import HostControls
from engine.people.limits import LimitRules, UsageLimits
from engine.people.profiles import Profiles
from engine.people.servers import ServerSettings
from engine.platform.coordination.instance import InstanceTaken, this_process
from engine.platform.coordination.jobs import JobLeases
from engine.platform.coordination.leases import TurnLeases
from engine.platform.crypto import SecretBox
from engine.platform.queue import AdventureQueue
from engine.platform.redaction import host_of, redact_logs
from engine.play.card_imports import CardImports
from engine.play.imports import AdventureImports
from engine.play.message_links import MessageLinks
from engine.play.operator_status import OperatorStatus
from engine.play.reports import TurnReports
from engine.play.round_panels import RoundPanelRecords
from engine.play.service import PlayService
from engine.play.shelf import AdventureShelf
from engine.prompt.tokens import encoding
from engine.services import Services
from engine.storage.database import Database
from engine.storage.dialect import hold_setup_lock
from engine.story.chapters.service import ChapterService
from engine.story.characters import CharacterService
from engine.story.memory.bank import MemoryBank
from engine.story.memory.retrieval import MemoryRetriever
from engine.story.memory.writer import MemoryWriter
from engine.story.narrative.service import StoryStateService
from engine.story.steering.card_proposals import CardProposals
from engine.story.steering.card_writer import CardWriter
from engine.story.steering.cards import StoryCards
from engine.story.steering.settings import GenerationDefaults, GenerationSettings
from engine.story.steering.text import SteeringText
from engine.story.suggestions.service import SuggestionService
from engine.story.tree import StoryTree
from engine.story.world.service import WorldStateService
from engine.turns.context import ContextEngine
from engine.turns.engine import TurnEngine
from engine.turns.insights import Insights
from engine.turns.moderation import Moderator

log = logging.getLogger(__name__)


def reply_limits(settings: Settings) -> ReplyLimits:
    return ReplyLimits(seconds=settings.model_reply_seconds, chars=settings.model_reply_chars)


def make_chat_provider(settings: Settings) -> ChatProvider:
    """The operator's endpoint when one is set, otherwise the embedded model."""
    if settings.model_url:
        key = settings.model_api_key.get_secret_value() if settings.model_api_key else None
        return OpenAICompatibleProvider(
            settings.model_url,
            settings.model_name,
            api_key=key,
            timeout=settings.model_timeout,
            limits=reply_limits(settings),
            private_address=True,
            tokenizer=settings.model_tokenizer,
            dialect=dialect_for(settings.model_url, settings.model_kind),
        )
    return LocalLlamaProvider(
        settings.local_model_path,
        # Room for the reply and for the model's tokenizer counting more than Campfire's own
        # (cl100k): a prompt past n_ctx would fail the turn, and the room costs little memory.
        n_ctx=min(2 * embedded_budget(settings) + reply_tokens(settings), 16384),
        limits=reply_limits(settings),
    )


def reply_tokens(settings: Settings) -> int:
    """The most tokens a narration may have: on the embedded model, fewer (it writes about
    20 a second, and what it writes the next turn reads again)."""
    if settings.model_url:
        return settings.max_output_tokens
    return min(settings.max_output_tokens, settings.embedded_max_output_tokens)


def embedded_budget(settings: Settings) -> int:
    """The context budget on the embedded model: chosen for speed (``CAMPFIRE_EMBEDDED_…``)."""
    return min(settings.context_tokens, settings.embedded_context_tokens)


def content_policy(settings: Settings) -> ContentPolicy:
    """The operator's content rules (``engine.people.content``)."""
    return ContentPolicy(
        default=Rating[settings.content_rating.upper()],
        ceiling=Rating[settings.content_ceiling.upper()],
        banned=tuple(clean_banned(settings.banned_words)),
    )


def make_context_engine(settings: Settings, retrievers: Sequence[Retriever]) -> ContextEngine:
    """The context engine for the operator's model. On the embedded one, a smaller budget: on a
    small CPU, reading the prompt is most of a turn's wait (the layout, the same for every
    model, lets llama.cpp and hosted providers reuse the prefix they have read:
    ``engine.turns.context``)."""
    embedded = not settings.model_url
    return ContextEngine(
        budget=embedded_budget(settings) if embedded else settings.context_tokens,
        max_output_tokens=reply_tokens(settings),
        retrievers=retrievers,
        content=content_policy(settings),
    )


def make_moderator(settings: Settings) -> Moderator:
    """The operator's moderation check (``engine.turns.moderation``); checks nothing unset."""
    if not settings.moderation_url:
        return Moderator()
    key = settings.moderation_api_key
    client = ModerationClient(
        settings.moderation_url,
        settings.moderation_model,
        api_key=key.get_secret_value() if key else None,
        timeout=settings.moderation_timeout,
    )
    return Moderator(client, fail_closed=settings.moderation_fail_closed)


def make_embedder(settings: Settings) -> EmbeddingClient | None:
    if not (settings.embedding_url and settings.embedding_model):
        return None
    key = settings.embedding_api_key.get_secret_value() if settings.embedding_api_key else None
    return EmbeddingClient(
        settings.embedding_url,
        settings.embedding_model,
        api_key=key,
        limits=reply_limits(settings),
    )


def limit_rules(settings: Settings) -> LimitRules:
    return LimitRules(
        user_tokens_per_day=settings.user_tokens_per_day,
        server_tokens_per_day=settings.server_tokens_per_day,
        # A turn's whole window on the operator's model (make_context_engine's budget).
        turn_reserve_tokens=settings.context_tokens
        if settings.model_url
        else embedded_budget(settings),
        turns_per_user_per_minute=settings.turns_per_user_per_minute,
        turns_per_adventure_per_minute=settings.turns_per_adventure_per_minute,
        script_tests_per_minute=settings.script_tests_per_minute,
        model_checks_per_minute=settings.model_checks_per_minute,
        card_writes_per_minute=settings.card_writes_per_minute,
        imports_per_day=settings.imports_per_day,
        scenarios_per_library=settings.scenarios_per_library,
        actions_per_adventure=settings.actions_per_adventure,
        cooldown_seconds=settings.cooldown_seconds,
        cooldown_max_seconds=settings.cooldown_max_seconds,
        cards_per_user=settings.cards_per_user,
        memories_per_user=settings.memories_per_user,
    )


async def build_services(settings: Settings) -> Services:
    # Also here, not only at start-up: whatever runs the services (the console, a test, a
    # benchmark) logs nothing these settings hold as secret.
    redact_logs(settings.secret_values)
    settings.ensure_data_dir()
    try:
        instance = this_process(settings.data_dir, name=settings.instance_name)
    except InstanceTaken as error:
        raise ConfigError(f"CAMPFIRE_INSTANCE_NAME: {error}") from None
    log.info("this process is instance %s (start %s)", instance.name, instance.incarnation)
    secrets = SecretBox(settings.resolve_secret_key())
    db = Database(settings.effective_database_url)
    await db.migrate()
    async with db.transaction() as session:
        await hold_setup_lock(session)
        count = await seed_builtin_scenarios(session)
    # The token counter's encoding, loaded off the event loop now rather than on it by the
    # first turn (a fraction of a second quiet, seconds on a loaded machine: an interaction
    # waiting behind it could miss Discord's 3 s).
    await asyncio.to_thread(encoding)
    log.info("database ready; %d shipped scenarios", count)
    provider = make_chat_provider(settings)
    # The operator's log names where (players are told the model's name alone).
    where = f" at {host_of(settings.model_url)}" if settings.model_url else ""
    log.info("narrating with %s%s", provider.label, where)
    # The operator may keep the default model for narration only (CAMPFIRE_BACKGROUND_MODEL_USE).
    default = OperatorDefault(
        provider,
        background=settings.background_model_use,
        # The embedded model keeps what it has read of the story between turns: background
        # work gets a context of its own, so the next turn reads on from the last, and gives
        # way to narration on the shared cores.
        background_provider=provider.background_client()
        if isinstance(provider, LocalLlamaProvider)
        else None,
    )
    # A server's or player's own model, checked by the endpoint policy (the operator's is not).
    policy = EndpointPolicy(
        allow_private=settings.allow_private_endpoints,
        trusted_hosts=frozenset(settings.trusted_endpoint_hosts),
    )
    providers = ChosenModels(
        default,
        secrets,
        policy,
        ModelLimits(timeout=settings.model_timeout, reply=reply_limits(settings)),
        whitelist=settings.model_whitelist,
    )
    params = GenerationParams(
        max_tokens=reply_tokens(settings),
        temperature=settings.temperature,
        top_p=settings.top_p,
    )
    embedder = make_embedder(settings)
    retriever = MemoryRetriever(
        embedder, top_k=settings.memory_top_k, floor=settings.embedding_floor
    )
    if note := retriever.semantic_off_reason():
        log.info("memory retrieval: %s", note)
    knowledge = KnowledgeRetriever(embedder, floor=settings.embedding_floor)
    context = make_context_engine(settings, [retriever, knowledge])
    script_limits = Limits(
        memory_bytes=settings.script_memory_mb * 1024 * 1024,
        time_seconds=settings.script_time_seconds,
        turn_seconds=settings.script_turn_seconds,
        state_chars=settings.max_script_state_chars,
    )
    limits = UsageLimits(db, limit_rules(settings))
    moderator = make_moderator(settings)
    turns = TurnEngine(
        db,
        providers,
        params=params,
        context=context,
        max_action_chars=settings.max_action_chars,
        script_limits=script_limits,
        max_story_cards=settings.max_story_cards,
        limits=limits,
        moderator=moderator,
    )
    # One name for this process in every lease row (turns and background jobs), so a reclaimed
    # lease says whose work was cut off, and a restart recognises its own.
    leases = TurnLeases(db, holder=instance.holder)
    jobs = JobLeases(db, holder=instance.holder)
    queue = AdventureQueue(cap=settings.max_queued_actions)
    caps = AdventureCaps(
        per_hour=settings.adventures_per_hour, active=settings.active_adventures_per_user
    )
    play = PlayService(
        db,
        turns,
        leases,
        queue,
        caps=caps,
        limits=limits,
        round_timeout_s=settings.round_timeout_seconds,
        content=content_policy(settings),
        moderator=moderator,
    )
    memory = MemoryWriter(
        db,
        providers,
        embedder,
        capacity=settings.max_memories,
        jobs=jobs,
        limits=limits,
        content=content_policy(settings),
    )
    import_limits = ImportLimits(
        max_bytes=settings.max_import_bytes,
        max_image_bytes=settings.max_import_image_bytes,
        max_cards=settings.max_story_cards,
        max_script_chars=settings.max_script_chars,
    )
    # An imported story obeys the content rules where it will run: banned words masked as it
    # is written, the moderation check before (engine.play.imports).
    archive = AdventureArchive(
        db, import_limits, caps=caps, rate_limits=limits, content=content_policy(settings)
    )
    # The blocked set, read before the first interaction (then on the scheduler).
    blocks = Blocks(db)
    await blocks.refresh()
    tree = StoryTree(db, queue)
    story_cards = StoryCards(db, max_cards=settings.max_story_cards, rate_limits=limits)
    card_writer = CardWriter(
        db,
        providers,
        max_cards=settings.max_story_cards,
        rate_limits=limits,
        content=content_policy(settings),
    )
    return Services(
        db,
        provider,
        embedder,
        secrets,
        turns,
        leases,
        play,
        ScenarioLibrary(db, import_limits, rate_limits=limits),
        archive,
        # Head moves wait for no turn: they are refused while one is being written here.
        tree,
        memory,
        jobs,
        # steering family (cogs: steering, memory, world_state, insights, profile, membership)
        steering_text=SteeringText(db),
        story_cards=story_cards,
        card_writer=card_writer,
        card_proposals=CardProposals(db, card_writer, story_cards),
        generation_settings=GenerationSettings(
            db,
            GenerationDefaults(
                context_tokens=settings.context_tokens,
                max_output_tokens=settings.max_output_tokens,
                temperature=settings.temperature,
                top_p=settings.top_p,
            ),
            providers=providers,
            ceilings=turns.ceilings,
        ),
        memory_bank=MemoryBank(db, capacity=settings.max_memories, rate_limits=limits),
        world_state=WorldStateService(db),
        insights=Insights(db),
        profiles=Profiles(
            db,
            retention_days=settings.guest_retention_days,
            queue=queue,
            content=content_policy(settings),
        ),
        # story and library family
        scripts=ScriptService(
            db,
            context,
            limits=script_limits,
            max_cards=settings.max_story_cards,
            max_chars=settings.max_script_chars,
            rate_limits=limits,
        ),
        message_links=MessageLinks(db),
        round_panels=RoundPanelRecords(db),
        characters=CharacterService(db),
        host_controls=HostControls(db),
        instance=instance,
        models=providers,
        model_settings=ModelSettings(db, secrets, policy, providers, rate_limits=limits),
        blocks=blocks,
        operator_status=OperatorStatus(db, queue),
        limits=limits,
        shelf=AdventureShelf(db, play.places, caps=caps),
        chapters=ChapterService(db),
        story_state=StoryStateService(db),
        suggestions=SuggestionService(db),
        knowledge=KnowledgeLibrary(
            db, max_bytes=settings.max_import_bytes, embedder=embedder, rate_limits=limits
        ),
        servers=ServerSettings(db, content_policy(settings)),
        reports=TurnReports(db, tree),
        imports=AdventureImports(db, archive, moderator, content_policy(settings)),
        card_imports=CardImports(
            db, import_limits, rate_limits=limits, content=content_policy(settings)
        ),
    )
