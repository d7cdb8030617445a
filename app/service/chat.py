"""The request path of a chat call: render, tokenize exactly, send ids, translate the answer.

``prepare`` does the CPU work (render, session tokenize, id JSON) in a worker thread so a
cold start of a long transcript never stalls the event loop; ``complete`` and ``stream`` own
the upstream exchange.  ``stream`` is an async generator whose ``async with`` holds the
upstream response: when the client goes away the generator is closed and the upstream
request with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import anyio.lowlevel
import anyio.to_thread
import httpx

from app.errors import (
    ContextOverflowError,
    NotFoundError,
    SystemTurnError,
    TemplateError,
)
from app.generation import ToolFormat
from app.memos import Memos
from app.pieced_text import PiecedText, joined
from app.protocol.chat_fields import forwarded
from app.protocol.chat_stream import ChatAssembler
from app.protocol.incremental_json import BodyParser
from app.protocol.openai_chat import ChatRequest
from app.protocol.output import Reasoning, reasoning_markers
from app.rendering import ChatTemplate, RenderCache
from app.rendering.continuation import continued
from app.service.callers import Caller, session_key
from app.service.format_tokens import format_tokens
from app.service.text_answer import INLINE_BYTES, StreamedText, finished, stop_strings, whole_text
from app.sessions import SessionTokenizer
from app.sessions.ids_json import IdsJsonCache
from app.sessions.typed_specials import TypedSpecials
from app.telemetry import Telemetry
from app.telemetry.observer import Exchange
from app.telemetry.oracle_source import RenderSource
from app.telemetry.timings import Timings
from app.tokenization import Encoding
from app.upstream.answers import chat_answer
from app.upstream.client import TraceHook, UpstreamClient, sse_events
from app.upstream.dialect import Dialect, Prompt, UpstreamCall
from app.upstream.learned import Learned
from app.upstream.readiness import Readiness
from app.upstream.stops import StopStrings

log = logging.getLogger(__name__)

INLINE_NEW_BYTES = 32 << 10
"""The most a session's body may grow by for its call to be rendered and tokenized on the
event loop: ~10 ms of encoding at the reference encoder's ~0.8 us a byte (2-core Xeon)."""


@dataclass(frozen=True, slots=True)
class PreparedChat:
    request: ChatRequest
    call: UpstreamCall
    encoding: Encoding
    starts_in_reasoning: bool
    timings: Timings
    tools_dropped: int = 0
    """Tools of the request the chat template rendered nothing of."""
    shadow_check: Callable[[], None] | None = None
    """Queues the shadow verifier's check of this prompt when it was sampled: made once the
    ids are on their way upstream (``Exchange.on_sent``)."""

    def headers(self) -> dict[str, str]:
        """Response headers that say how the prompt was tokenized and what it cost."""
        enc = self.encoding
        headers = {
            "server-timing": self.timings.server_timing(),
            "x-toksplice-route": enc.route,
            "x-toksplice-prompt-tokens": str(len(enc.ids)),
            "x-toksplice-reused-tokens": str(enc.reused_tokens),
        }
        if self.tools_dropped:
            headers["x-toksplice-tools-dropped"] = str(self.tools_dropped)
        return headers


@dataclass(frozen=True, slots=True)
class ModelCard:
    """What the proxy serves: the client-facing name and how it talks to the model."""

    name: str
    upstream_name: str
    template: ChatTemplate
    tool_format: ToolFormat | None
    reasoning: bool
    strips_billing_line: bool = False
    """System turns lose Claude Code's billing line (``Settings.strips_billing_line``)."""
    send_text: bool = False
    """True when the startup alignment check failed: the rendered text goes upstream."""
    context_tokens: int | None = None
    """The model's context as the upstream reports it (prompt and answer of one request);
    None until learned, or when the upstream does not say (then no request is refused for
    its length: the upstream decides)."""


class ChatService:
    def __init__(
        self,
        *,
        card: ModelCard,
        tokenizer: SessionTokenizer,
        dialect: Dialect,
        client: UpstreamClient,
        ids_cache: IdsJsonCache,
        render_cache: RenderCache,
        typed_specials: TypedSpecials,
        bodies: BodyParser,
        warned: Memos[bool],
        telemetry: Telemetry,
        readiness: Readiness,
    ) -> None:
        """``warned``: the sessions already told that the template drops their tools."""
        self.card = card
        self.readiness = readiness
        readiness.subscribe(self._learned)
        self.tokenizer = tokenizer
        self.dialect = dialect
        self.client = client
        self.ids_cache = ids_cache
        self.render_cache = render_cache
        self.typed_specials = typed_specials
        self.bodies = bodies
        self.telemetry = telemetry
        self.drops_tools = card.template.drops_tools()  # once, at startup
        self.reasoning = reasoning_markers(card.tool_format) if card.reasoning else None
        self.format_tokens = format_tokens(card.tool_format, tokenizer.reference.tokenizer)
        self._warned = warned

    def reasoning_style(self) -> str | None:
        """The reasoning markers split out of answers (``<think>…</think>``), if any."""
        markers = self.reasoning
        return None if markers is None else f"{markers.open}…{markers.close}"

    def _learned(self, learned: Learned) -> None:
        self.card = replace(
            self.card, send_text=learned.send_text, context_tokens=learned.context_tokens
        )

    async def prepare(
        self,
        request: ChatRequest,
        caller: Caller,
        timings: Timings,
        *,
        new_bytes: int | None = None,
        counting: bool = False,
    ) -> PreparedChat:
        """Render and tokenize.  A body that extends the session's previous one by
        ``new_bytes`` of at most ``INLINE_NEW_BYTES`` runs inline (the work is a repair of a
        few KB: a thread hop would cost more than it); everything else runs in a worker
        thread, so that neither a cold encode of a long transcript nor a long appended
        message stalls the event loop.  A prompt that does not fit the model's context is a
        ``ContextOverflowError``, unless only ``counting`` (nothing goes upstream)."""
        if request.model not in (self.card.name, self.card.upstream_name):
            raise NotFoundError(
                f"model: {request.model} does not exist; this proxy serves {self.card.name!r}",
                param="model",
            )
        for name in request.ignored_fields:
            self.telemetry.metrics.fields_dropped.labels(name).inc()
        if not counting:  # no ids upstream before the alignment check answered
            await self.readiness.ensure()
        if new_bytes is not None and new_bytes <= INLINE_NEW_BYTES:
            prepared = self._prepare(request, caller, timings)
        else:
            prepared = await anyio.to_thread.run_sync(self._prepare, request, caller, timings)
        if counting:  # nothing goes upstream: the check is queued now
            if prepared.shadow_check is not None:
                prepared.shadow_check()
        else:
            self._check_fits(prepared)
        return prepared

    def _check_fits(self, prepared: PreparedChat) -> None:
        context = self.card.context_tokens
        if context is None:
            return
        n_ids, asked = prepared.call.prompt.n_ids, prepared.request.sampling.max_tokens
        if n_ids >= context or (asked is not None and n_ids + asked > context):
            raise ContextOverflowError(prompt_tokens=n_ids, max_tokens=asked, context=context)

    def _prepare(self, request: ChatRequest, caller: Caller, timings: Timings) -> PreparedChat:
        key = session_key(caller, request.messages)
        started = time.perf_counter()
        timings.session, timings.prepare_started = key, started
        masked = self.typed_specials.mask(
            request.messages, request.tools, session=key, template_kwargs=request.template_kwargs
        )
        inputs = request.messages, request.tools, request.template_kwargs
        messages, tools, kwargs = inputs if masked is None else masked.data
        try:
            rendered = self.card.template.render_pieces(
                messages,
                tools=tools,
                add_generation_prompt=request.add_generation_prompt,
                chat_template_kwargs=kwargs,
                cache=self.render_cache,
                session=key,
                frozen=True,  # request objects are parsed here and only ever read
            )
        except TemplateError as exc:
            refused = self._system_turn_refused(request, messages, tools, kwargs, exc)
            raise refused or exc from exc
        if request.continue_final_message:
            rendered = continued(rendered, messages[-1])
        render_done = time.perf_counter()
        text: str | PiecedText = rendered
        if masked is None:
            encoding = self.tokenizer.encode(rendered, session=key)
        else:
            text = rendered.text()
            self.render_cache.make_room(text)  # this path joins: keep the join off fresh pages
            pieces = self.typed_specials.encode(text, masked, session=key)
            if self.card.send_text:
                text = masked.restore(text)
            encoding = Encoding(
                ids=pieces.ids,
                route="pieces",
                reused_tokens=pieces.reused,
                fallback="special-token text in client content",
                copied=pieces.copied,
                engines=pieces.engines,
            )
        ids_json = self.ids_cache.json_for(key, encoding.ids, encoding.copied)
        shadow_check = None
        if not self.card.send_text:  # the ids go upstream: the shadow verifier samples them
            source = RenderSource(self.card.template, *inputs, request.add_generation_prompt)
            shadow_check = self.telemetry.shadow.draw(
                self.tokenizer, key, text, encoding, masked, self.typed_specials, ids_json.text,
                source,
            )  # fmt: skip
        timings.render_s = render_done - started
        timings.tokenize_s = time.perf_counter() - render_done
        card = self.card
        prompt = Prompt(
            ids_json=ids_json.text,
            n_ids=len(encoding.ids),
            text=joined(text) if card.send_text else "",
            as_text=card.send_text,
        )
        call = UpstreamCall(
            model=card.upstream_name,
            prompt=prompt,
            sampling=request.sampling,
            stream=request.stream,
            chat_body=forwarded(request.body),
            room=None if card.context_tokens is None else card.context_tokens - len(encoding.ids),
            special_tokens=self.format_tokens.special_tokens,
            stop_token_ids=self.format_tokens.stop_token_ids,
        )
        dropped = self._tools_dropped(request, key)
        opens = _opens_reasoning(rendered, self.reasoning)
        return PreparedChat(request, call, encoding, opens, timings, dropped, shadow_check)

    def _tools_dropped(self, request: ChatRequest, key: str) -> int:
        """How many tools the template dropped: counted, and logged once per session."""
        if not (self.drops_tools and request.tools):
            return 0
        self.telemetry.metrics.tools_dropped.inc()
        if self._warned.get(key) is None:
            self._warned.put(key, True, 1)
            log.warning(
                "the chat template renders no tools: the %d tools of this session's requests "
                "are dropped, the model never sees them (session %s)",
                len(request.tools),
                key,
            )
        return len(request.tools)

    def _exchange(self, prepared: PreparedChat) -> Exchange:
        request = prepared.request
        return Exchange(
            prepared.timings,
            prepared.encoding,
            request.model,
            self.dialect.name,
            request.stream,
            prepared.shadow_check,
        )

    async def complete(self, prepared: PreparedChat) -> dict[str, Any]:
        """The whole answer as one OpenAI chat completion."""
        with self.telemetry.observe(self._exchange(prepared)) as seen:
            return seen.reply(await self._complete(prepared, seen.http_trace))

    async def _complete(self, prepared: PreparedChat, trace: TraceHook) -> dict[str, Any]:
        path, body = self.dialect.request(prepared.call)
        prepared.timings.upstream_sent = time.perf_counter()
        headers = _trace_headers(prepared.timings)
        as_text = prepared.call.prompt.as_text
        payload = await self.client.post_json(path, body, trace, headers, as_text=as_text)
        if self.dialect.chat_native:
            completion = chat_answer(payload, chunk=False)
            finished(_chat_finish_reason(completion))
            return dict(completion, model=prepared.request.model)
        stops = await self._stop_strings(prepared)
        return await anyio.to_thread.run_sync(  # a thread hop is nothing beside a generation
            partial(whole_text, top_logprobs=prepared.call.sampling.logprobs),
            self.dialect,
            self.tokenizer.reference.tokenizer,
            self._assembler(prepared),
            stops,
            payload,
            prepared.call.prompt.n_ids,
            self.format_tokens.dropped_ids,
        )

    async def chunks(self, prepared: PreparedChat) -> AsyncIterator[dict[str, Any] | None]:
        """The answer as OpenAI ``chat.completion.chunk`` objects, for every client API to
        translate.  The first item is None, yielded once the upstream accepted the request:
        errors before it (upstream down, refused) are the caller's to answer with a status;
        errors after it end the stream.  The ``async with`` owns the upstream response, so
        closing this generator (a client that went away) cancels the upstream request."""
        path, body = self.dialect.request(prepared.call)
        with self.telemetry.observe(self._exchange(prepared)) as seen:
            prepared.timings.upstream_sent = time.perf_counter()
            headers = _trace_headers(prepared.timings)
            as_text = prepared.call.prompt.as_text
            sent = self.client.stream(path, body, seen.http_trace, headers, as_text=as_text)
            async with sent as response:
                seen.accepted()
                yield None
                async for chunk in self._chunks(prepared, response):
                    seen.chunk(chunk)
                    yield chunk

    async def _chunks(
        self, prepared: PreparedChat, response: httpx.Response
    ) -> AsyncIterator[dict[str, Any]]:
        """The answer's chunks; an upstream event of ``INLINE_BYTES`` or more is worked in a
        worker thread (``StreamedText``)."""
        if self.dialect.chat_native:
            reason = None
            async for payload, _ in sse_events(response, self.client.max_line_bytes):
                chunk = chat_answer(payload, chunk=True)
                reason = _chat_finish_reason(chunk) or reason
                yield dict(chunk, model=prepared.request.model)
            finished(reason)
            return
        assembler = self._assembler(prepared)
        yield assembler.first_chunk()
        answer = StreamedText(
            self.dialect,
            self.tokenizer.reference.tokenizer,
            assembler,
            await self._stop_strings(prepared),
            prepared.call.prompt.n_ids,
            self.format_tokens.dropped_ids,
            top_logprobs=prepared.call.sampling.logprobs,
        )
        async for payload, size in sse_events(response, self.client.max_line_bytes):
            if size < INLINE_BYTES:
                chunks = answer.step(payload)
                await anyio.lowlevel.checkpoint()  # events already read wait their turn
            else:
                chunks = await anyio.to_thread.run_sync(answer.step, payload)
            for chunk in chunks:
                yield chunk
        for chunk in answer.end(prepared.request.include_usage):
            yield chunk

    async def _stop_strings(self, prepared: PreparedChat) -> StopStrings:
        """The stop strings we cut at: a tokens-out upstream's (the others cut themselves)."""
        return await stop_strings(prepared.call.sampling.stop if self.dialect.tokens_out else [])

    def _assembler(self, prepared: PreparedChat) -> ChatAssembler:
        return ChatAssembler(
            model=prepared.request.model,
            tools=prepared.request.tools,
            tool_format=self.card.tool_format,
            reasoning=self.card.reasoning,
            starts_in_reasoning=prepared.starts_in_reasoning,
            control_tokens=self.format_tokens.control_tokens,
        )

    def _system_turn_refused(
        self,
        request: ChatRequest,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        kwargs: dict[str, Any] | None,
        raised: TemplateError,
    ) -> SystemTurnError | None:
        """The template raised: was it for a system message after the first?  Proven by
        rendering the same request without those messages (an error path: the cost does not
        matter), never assumed, so a client's fallback is asked for only when it helps."""
        later = [i for i, m in enumerate(messages) if i > 0 and m.get("role") == "system"]
        if not later:
            return None
        kept = [m for i, m in enumerate(messages) if i not in later]
        try:
            self.card.template.render_pieces(
                kept,
                tools=tools,
                add_generation_prompt=request.add_generation_prompt,
                chat_template_kwargs=kwargs,
            )
        except TemplateError:
            return None
        return SystemTurnError(later[0], str(raised))


def _trace_headers(timings: Timings) -> dict[str, str] | None:
    """The W3C trace headers the upstream request carries (the request's trace, joined)."""
    return None if timings.trace is None else timings.trace.upstream_headers()


def _chat_finish_reason(payload: Any) -> str | None:
    """The finish reason of an OpenAI chat completion or chunk, if it has one."""
    choices = payload.get("choices") if isinstance(payload, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    reason = first.get("finish_reason") if isinstance(first, dict) else None
    return reason if isinstance(reason, str) else None


def _opens_reasoning(text: PiecedText, markers: Reasoning | None) -> bool:
    """The generation prompt ends inside an opened reasoning block (DeepSeek-R1 style)."""
    return markers is not None and markers.opened_by(text.tail(64))
