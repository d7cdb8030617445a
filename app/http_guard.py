"""A deadline for a request's headers, over whichever HTTP protocol uvicorn runs.

uvicorn bounds neither how long a new connection may stay silent nor how long its request
head may take: a client sending a header line every second holds a socket for as long as it
likes, and its keep-alive timer restarts with every byte.  ``guarded_protocol`` is uvicorn's
protocol with one deadline more: from the moment a connection opens, or its last answer was
sent, the next request's headers must be complete within ``header_timeout`` seconds, or the
connection is closed.  A request whose headers arrived is left alone (its body has
``client_timeout``; its answer may take as long as the model does).
"""

from __future__ import annotations

import asyncio
from typing import Any

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:  # uvicorn's own choice ("auto") without httptools
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]


def guarded_protocol(header_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class, with the header deadline (pass as ``Config(http=)``)."""

    class HeaderDeadline(_Base):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm(None)

        def on_response_complete(self) -> None:
            answered = self.cycle  # a pipelined request may start a new cycle in super()
            super().on_response_complete()
            self._arm(answered)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _arm(self, cycle: object) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(header_timeout, self._expire, cycle)

        def _expire(self, cycle: object) -> None:
            """No request head arrived since the deadline was set: close."""
            if self.cycle is cycle and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadline
