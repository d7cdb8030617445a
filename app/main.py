"""``create_app(settings)``: the FastAPI app; its lifespan owns the tokenizer, the session
store, the upstream client and the alignment check (retried until the upstream answers)."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio.to_thread
import httpx
from fastapi import Depends, FastAPI

from app.api import chat, debug, errors, messages, models, openai_responses
from app.api.auth import ApiKeys, authenticate
from app.config import Settings
from app.process_memory import (
    ReturnFreedMemory,
    freeze_startup_heap,
    thaw_startup_heap,
    trim_floor,
)
from app.protocol.anthropic_request import ChatTranslator as AnthropicTranslator
from app.protocol.incremental_json import BodyParser
from app.protocol.output import resolve as resolve_tool_format
from app.protocol.responses_request import ChatTranslator as ResponsesTranslator
from app.rendering import ChatTemplate, RenderCache
from app.service.alignment import PROBES, learn
from app.service.chat import ChatService, ModelCard
from app.sessions import SessionTokenizer
from app.sessions.ids_json import IdsJsonCache
from app.sessions.memory import MemoryStore, SessionStore
from app.sessions.redis_store import RedisStore
from app.sessions.registry import SessionRegistry
from app.sessions.store_entry import fingerprint
from app.sessions.typed_specials import TypedSpecials
from app.telemetry import Telemetry
from app.tokenization import reference_process
from app.upstream import dialect_named
from app.upstream.client import UpstreamClient
from app.upstream.learned import Learned
from app.upstream.readiness import Readiness

log = logging.getLogger("toksplice")

GIL_SWITCH_S = 0.001
"""How long a thread may hold the GIL while another waits for it, for the proxy's lifetime.
CPython's 5 ms default is what a request waited whenever a background thread (span export,
the shadow verifier's copy) held the GIL when it needed it: the slowest calls' 5 ms."""


def create_app(settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None) -> FastAPI:
    """The proxy app; ``transport`` replaces the network (tests inject faults with it)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = UpstreamClient(settings, transport)
        # everything remembered of the sessions, token states included: one LRU, one budget
        app.state.sessions = sessions = SessionRegistry(settings.store_bytes)
        store = session_store(settings, sessions)
        app.state.telemetry = telemetry = Telemetry(settings)
        service: ChatService | None = None
        switch = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_S)
        try:
            app.state.chat = service = await _build_service(
                settings, client, store, sessions, telemetry
            )
            # The client APIs' own per-session memos (keyed by API and caller, see ``api``).
            app.state.anthropic_body = BodyParser(sessions.slot("anthropic_body"))
            app.state.anthropic_translator = AnthropicTranslator(sessions.slot("anthropic"))
            app.state.responses_parsers = (
                BodyParser(sessions.slot("responses_body"), array="input"),
                ResponsesTranslator(sessions.slot("responses")),
            )
            freeze_startup_heap()
            yield
        finally:
            if service is not None:
                await service.readiness.aclose()
            await client.aclose()
            telemetry.close()
            await anyio.to_thread.run_sync(reference_process.close_all)
            if isinstance(store, RedisStore):
                await anyio.to_thread.run_sync(store.close)
            sys.setswitchinterval(switch)
            thaw_startup_heap()

    app = FastAPI(title="toksplice", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.state.api_keys = (
        ApiKeys.from_file(settings.api_keys_file) if settings.api_keys_file else None
    )
    app.add_middleware(ReturnFreedMemory, trim_above=trim_floor(settings.store_bytes))
    errors.install(app, (chat.API, messages.API, openai_responses.API))
    keyed = [Depends(authenticate)]
    app.include_router(chat.router, dependencies=keyed)
    app.include_router(models.router)
    app.include_router(models.listing, dependencies=keyed)
    app.include_router(messages.router, dependencies=keyed)
    app.include_router(openai_responses.router, dependencies=keyed)
    app.include_router(debug.router)
    return app


def session_store(settings: Settings, sessions: SessionRegistry) -> MemoryStore | RedisStore:
    """This process's session states (text, ids and offsets), a slot of each session's
    context in ``sessions``, and Redis behind them when ``settings.store`` names one."""
    local = MemoryStore(registry=sessions)
    if settings.store == "memory":
        return local
    return RedisStore(
        settings.store,
        tokenizer=fingerprint(settings.tokenizer_file.read_bytes()),
        local=local,
        ttl_s=settings.store_ttl,
        timeout_s=settings.redis_timeout,
    )


async def _build_service(
    settings: Settings,
    client: UpstreamClient,
    store: SessionStore,
    sessions: SessionRegistry,
    telemetry: Telemetry,
) -> ChatService:
    tokenizer = SessionTokenizer.from_file(
        settings.tokenizer_file,
        store=store,
        recent=sessions.slot("recent"),
        gpu_cold_start=settings.gpu_cold_start,
        parallel_chunk=settings.parallel_chunk,
        cpu_encoder=settings.cpu_encoder,
    )
    template = load_template(settings.template_source, settings.tokenizer_file)
    dialect = dialect_named(settings.dialect)
    upstream_name = settings.upstream_model or settings.served_model
    readiness = Readiness(
        lambda: learn(
            client, dialect, tokenizer, template, upstream_name, check=settings.alignment_check
        ),
        gated=settings.alignment_check,
        breaks=lambda: client.breaks,
        recheck_s=settings.alignment_recheck_s,
    )
    client.before_resend = readiness.before_resend
    readiness.subscribe(_log_learned)
    sources = dict.fromkeys((template.source(tools=False), template.source(tools=True)))
    tool_format, chosen = resolve_tool_format(settings.tool_format, sources)
    log.info("tool format: %s (%s)", tool_format or "none", chosen)
    strips_billing_line = settings.strips_billing_line(tool_format)
    stripped = "stripped" if strips_billing_line else "kept"
    log.info("Claude Code's billing line: %s (%s)", stripped, settings.strip_billing_line)
    card = ModelCard(
        name=settings.served_model,
        upstream_name=upstream_name,
        template=template,
        tool_format=tool_format,
        reasoning=settings.reasoning,
        strips_billing_line=strips_billing_line,
    )
    log.info(
        "serving %r via %s at %s (tokenizer family %s)",
        card.name,
        dialect.name,
        settings.upstream,
        tokenizer.spec.family,
    )
    await readiness.start()
    return ChatService(
        card=card,
        tokenizer=tokenizer,
        dialect=dialect,
        client=client,
        ids_cache=IdsJsonCache(sessions.slot("ids_json")),
        render_cache=RenderCache(sessions.slot("render")),
        typed_specials=TypedSpecials(
            tokenizer.reference.tokenizer,
            sessions=sessions,
            parallel_chunk=settings.parallel_chunk,
            cpu_encoder=settings.cpu_encoder,
        ),
        bodies=BodyParser(sessions.slot("body")),
        warned=sessions.slot("tools_warned"),
        telemetry=telemetry,
        readiness=readiness,
    )


def _log_learned(learned: Learned) -> None:
    alignment = learned.alignment
    if alignment is not None and not alignment.ok:
        log.error(
            "TOKENIZER MISMATCH: the upstream tokenizes %d probe(s) differently (%s); "
            "forwarding rendered TEXT instead of token ids",
            len(alignment.mismatches),
            "; ".join(map(repr, alignment.mismatches)),
        )
    elif alignment is not None and alignment.verified:
        log.info(
            "alignment check: the upstream's /tokenize gives our ids on all %d probes",
            len(PROBES) + 1,
        )
    log.info(
        "upstream context: %s tokens; sending %s",
        learned.context_tokens or "unknown",
        "text" if learned.send_text else "token ids",
    )


def load_template(path: Path, tokenizer_file: Path | None = None) -> ChatTemplate:
    """A chat template from tokenizer_config.json (or its folder), a .jinja file or a .gguf
    model; a .jinja file gets the special tokens of the tokenizer_config.json beside
    ``tokenizer_file`` (``ChatTemplate.load``)."""
    return ChatTemplate.load(path, tokenizer_file=tokenizer_file)
