"""The request body: read within the size limit, decode as JSON."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread
import orjson
from fastapi import Request

from app import bounded_json
from app.errors import BadRequestError, PayloadTooLargeError, RequestTimeoutError
from app.protocol.incremental_json import BodyParser, ParsedBody
from app.telemetry.timings import Timings

INLINE_PARSE_BYTES = 256 << 10
"""Bodies up to this size are parsed on the event loop (~10 ms at worst: a body of escaped
quotes, whose string scan costs the most), and so is a larger one that extends its session's
previous body by at most this many bytes outside the reused array (those are all it parses);
the rest in a worker thread, where a thread hop costs more than the parse it saves."""
INLINE_JOIN_BYTES = 8 << 20
"""A body over this size is joined from its chunks in the worker thread too (a 53 MB body's
join took ~10-25 ms), and its extension of the session's previous body is looked for there."""


async def json_body(
    request: Request,
    limit: int,
    timings: Timings | None = None,
    parser: BodyParser | None = None,
    key: str | None = None,
) -> ParsedBody:
    """The decoded JSON body (``parser`` reuses the ``key``'s previous parse); 413 past
    ``limit`` bytes (before reading it when the length is declared), 400 for malformed JSON,
    invalid UTF-8 or lone surrogates; 408 when the client takes longer than the settings'
    ``client_timeout`` to send it (a stalled client must not hold a connection forever)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLargeError(
            f"request body of {declared} bytes is over the {limit}-byte limit"
        )
    chunks: list[bytes] = []
    size = 0
    seconds = request.app.state.settings.client_timeout
    try:
        async with asyncio.timeout(seconds):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLargeError(f"request body is over the {limit}-byte limit")
                chunks.append(chunk)
    except TimeoutError:
        raise RequestTimeoutError(f"the request body did not arrive within {seconds} s") from None
    if timings is not None:
        timings.read_s = time.perf_counter() - timings.received
    if not size:
        raise BadRequestError("the request body is empty; send a JSON object")
    if size > INLINE_JOIN_BYTES:
        return await anyio.to_thread.run_sync(_joined_and_parsed, chunks, parser, key)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if size <= INLINE_PARSE_BYTES:
        return _parsed(data, parser, key)
    if parser is not None:
        extended = _guarded(data, lambda: parser.extend(data, key, INLINE_PARSE_BYTES))
        if extended is not None:
            return extended
    return await anyio.to_thread.run_sync(_parsed, data, parser, key)


def _joined_and_parsed(
    chunks: list[bytes], parser: BodyParser | None, key: str | None
) -> ParsedBody:
    return _parsed(b"".join(chunks), parser, key)


def _parsed(data: bytes, parser: BodyParser | None, key: str | None) -> ParsedBody:
    if parser is None:
        return _guarded(data, lambda: ParsedBody(bounded_json.loads(data), 0))
    return _guarded(data, lambda: parser.parse(data, key))


_T = TypeVar("_T")


def _guarded(data: bytes, parse: Callable[[], _T]) -> _T:
    """``parse()`` of ``data``, its ``JSONDecodeError`` as a 400 naming bad UTF-8 or JSON."""
    try:
        return parse()
    except orjson.JSONDecodeError as exc:
        bad = bounded_json.utf8_error(data)
        if bad is not None:
            raise BadRequestError(
                f"the request body is not valid UTF-8 (byte {bad[0]}: {bad[1]})"
            ) from None
        raise BadRequestError(f"malformed JSON body: {exc}") from None
