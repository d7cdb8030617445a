"""Work for a client that is still there: the wait for the upstream's first byte is cancelled
the moment the client disconnects.

Once a streamed answer has begun, Starlette's ``StreamingResponse`` watches for the client's
``http.disconnect`` and cancels the stream (and with it the upstream request).  Before that
(a non-streamed call, a stream whose upstream is still in prefill) the route is awaiting the
upstream and nothing reads the connection: without this guard the upstream request stays
open, a GPU busy, until the upstream answers or the read timeout fires.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

from app.errors import ClientDisconnectedError

T = TypeVar("T")


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """``work``'s result; when the client disconnects first, ``work`` is cancelled and
    ``ClientDisconnectedError`` raised (its answer reaches no one).  The request body must
    have been read: the next ASGI message is then the disconnect."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    raise ClientDisconnectedError("the client disconnected before the answer began")


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
