"""Learning the upstream's facts until it answers, and again whenever it may have changed.

The first attempt runs at startup.  While the upstream does not answer, a background task
tries again with a growing pause.  When ``gated`` (the alignment check is on), a request that
finds nothing learned also tries once more itself (sharing an attempt already under way) and
is refused with ``UpstreamNotReadyError`` (503) if that fails: no id goes upstream before the
check passed, or failed and chose the text path.  Ungated, requests go on meanwhile.

What was learned holds only while the upstream stays the same server: a rolling upgrade
brings back another model on the same address.  So, when gated, the check runs again

* before the next request whenever the connection to the upstream broke since the last
  check (``breaks``: it was unreachable, or closed a connection before replying); that
  request waits for the check, and is refused as unreachable (502) if the upstream does not
  answer it;
* before a request is sent again on a fresh connection after such a close (``before_resend``):
  if the check now finds the other tokenizer, that request's ids (made for the old one) are
  not sent: it is refused with ``UpstreamRetokenizedError``, which the API pipeline answers by
  preparing it again, as text, as the calls after it go;
* every ``recheck_s`` seconds, in the background (requests go on meanwhile).

Listeners hear of each change of what was learned (a mismatch found, or gone), not of
every check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from app.errors import UpstreamNotReadyError, UpstreamRetokenizedError, UpstreamUnreachableError
from app.upstream.learned import Learned

log = logging.getLogger("toksplice")

FIRST_PAUSE_S = 0.25
MAX_PAUSE_S = 15.0


class Readiness:
    """Runs ``attempt`` until it returns, and again as the module says; ``subscribe``'s
    callbacks get each new result.  ``breaks`` counts the upstream connection's failures so
    far (``UpstreamClient.breaks``)."""

    def __init__(
        self,
        attempt: Callable[[], Awaitable[Learned]],
        *,
        gated: bool,
        breaks: Callable[[], int] = lambda: 0,
        recheck_s: float = 0.0,
    ) -> None:
        self._attempt = attempt
        self.gated = gated
        self.learned: Learned | None = None
        self.waiting_for = "the first check"
        """Why nothing is learned yet (the last attempt's error)."""
        self._breaks = breaks
        self._recheck_s = recheck_s
        self._checked_breaks = -1
        """``breaks()`` when the last successful check started; -1: stale."""
        self._lock = asyncio.Lock()
        self._attempts = 0
        self._checking: asyncio.Task[Any] | None = None
        self._listeners: list[Callable[[Learned], None]] = []
        self._retry: asyncio.Task[None] | None = None
        self._periodic: asyncio.Task[None] | None = None

    @property
    def current(self) -> bool:
        """Learned, and nothing broke since the check."""
        return self.learned is not None and self._breaks() == self._checked_breaks

    def state(self) -> str:
        """What the alignment check says now, for ``/health``."""
        learned = self.learned
        alignment = None if learned is None else learned.alignment
        if not self.gated:
            return "off"
        if alignment is None:
            return f"not checked yet: {self.waiting_for}"
        if not alignment.ok:
            return f"mismatch on {len(alignment.mismatches)} probe(s): sending text"
        verdict = "ok" if alignment.verified else "unverified (no usable /tokenize)"
        return verdict if self.current else f"{verdict}; checked again before the next call"

    def subscribe(self, listener: Callable[[Learned], None]) -> None:
        self._listeners.append(listener)
        if self.learned is not None:
            listener(self.learned)

    async def start(self) -> None:
        """The first attempt; on failure the retries start in the background, and the
        periodic check when gated."""
        await self._try()
        if self.learned is None:
            self._retry = asyncio.create_task(self._retry_loop())
        if self.gated and self._recheck_s > 0:
            self._periodic = asyncio.create_task(self._periodic_loop())

    async def aclose(self) -> None:
        for task in (self._retry, self._periodic):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def ensure(self) -> None:
        """Return once learned and current; when gated, check now if not.  Raises
        ``UpstreamNotReadyError`` while nothing was ever learned, ``UpstreamUnreachableError``
        when the upstream broke since and does not answer the check."""
        if not self.gated or self.current:
            return
        await self._try()
        if self.learned is None:
            raise UpstreamNotReadyError(
                f"the upstream is not ready: {self.waiting_for}; no request is sent before it "
                "answers the alignment check"
            )
        if not self.current:
            raise UpstreamUnreachableError(
                f"the upstream broke off and has not answered the alignment check since: "
                f"{self.waiting_for}"
            )

    async def before_resend(self, as_text: bool) -> None:
        """Before a request goes again on a fresh connection (the last one closed before the
        reply): check the upstream again; refuse the request if its prompt (text when
        ``as_text``, else ids) is not what the check now says to send."""
        if not self.gated or asyncio.current_task() is self._checking:
            return  # the check's own requests
        await self.ensure()
        learned = self.learned
        if learned is None or learned.send_text == as_text:
            return
        if learned.send_text:
            raise UpstreamRetokenizedError(
                "the upstream came back tokenizing differently: calls now go as text; this "
                "request's ids were made for the other and are not sent"
            )
        raise UpstreamUnreachableError(
            "the upstream came back tokenizing as we do; this request was made as text for "
            "the other and is not sent"
        )

    async def _try(self, *, force: bool = False) -> None:
        seen = self._attempts
        async with self._lock:
            if (self.current and not force) or self._attempts != seen:
                return  # fresh, or another caller's attempt just ran: share its outcome
            breaks = self._breaks()
            self._checking = asyncio.current_task()
            try:
                learned = await self._attempt()
            except UpstreamNotReadyError as exc:
                self.waiting_for = str(exc)
                self._checked_breaks = -1
                log.warning("%s; checking again until it does", exc)
                return
            finally:
                self._checking = None
                self._attempts += 1  # finished ones: a caller that came during one shares it
            self._checked_breaks = breaks
            changed, self.learned = learned != self.learned, learned
            if changed:
                for listener in self._listeners:
                    listener(learned)

    async def _retry_loop(self) -> None:
        pause = FIRST_PAUSE_S
        while self.learned is None:
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE_S)
            await self._try()

    async def _periodic_loop(self) -> None:
        while True:
            await asyncio.sleep(self._recheck_s)
            await self._try(force=True)
