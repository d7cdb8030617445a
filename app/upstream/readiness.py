"""Learning the upstream's facts until it answers: never skipped for good.

The first attempt runs at startup.  While the upstream does not answer, a background task
tries again with a growing pause.  When ``gated`` (the alignment check is on), a request that
finds nothing learned also tries once more itself (sharing an attempt already under way) and
is refused with ``UpstreamNotReadyError`` (503) if that fails: no id goes upstream before the
check passed, or failed and chose the text path.  Ungated, requests go on meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from app.errors import UpstreamNotReadyError
from app.upstream.learned import Learned

log = logging.getLogger("toksplice")

FIRST_PAUSE_S = 0.25
MAX_PAUSE_S = 15.0


class Readiness:
    """Runs ``attempt`` until it returns; ``subscribe``'s callbacks get its result."""

    def __init__(self, attempt: Callable[[], Awaitable[Learned]], *, gated: bool) -> None:
        self._attempt = attempt
        self.gated = gated
        self.learned: Learned | None = None
        self.waiting_for = "the first check"
        """Why nothing is learned yet (the last attempt's error)."""
        self._lock = asyncio.Lock()
        self._attempts = 0
        self._listeners: list[Callable[[Learned], None]] = []
        self._retry: asyncio.Task[None] | None = None

    def subscribe(self, listener: Callable[[Learned], None]) -> None:
        self._listeners.append(listener)
        if self.learned is not None:
            listener(self.learned)

    async def start(self) -> None:
        """The first attempt; on failure the retries start in the background."""
        await self._try()
        if self.learned is None:
            self._retry = asyncio.create_task(self._retry_loop())

    async def aclose(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retry

    async def ensure(self) -> None:
        """Return once learned; when gated, try now and raise ``UpstreamNotReadyError`` if the
        upstream still does not answer."""
        if self.learned is not None or not self.gated:
            return
        await self._try()
        if self.learned is None:
            raise UpstreamNotReadyError(
                f"the upstream is not ready: {self.waiting_for}; no request is sent before it "
                "answers the alignment check"
            )

    async def _try(self) -> None:
        seen = self._attempts
        async with self._lock:
            if self.learned is not None or self._attempts != seen:
                return  # another caller's attempt just ran: share its outcome
            try:
                learned = await self._attempt()
            except UpstreamNotReadyError as exc:
                self.waiting_for = str(exc)
                log.warning("%s; checking again until it does", exc)
                return
            finally:
                self._attempts += 1  # finished ones: a caller that came during one shares it
            self.learned = learned
            for listener in self._listeners:
                listener(learned)

    async def _retry_loop(self) -> None:
        pause = FIRST_PAUSE_S
        while self.learned is None:
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE_S)
            await self._try()
