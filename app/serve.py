"""Running the proxy: ``serve(settings)`` in front of the upstream the settings name (the demo,
with its own local upstream, is ``app.tools.demo``)."""

from __future__ import annotations

import contextlib
import logging

import uvicorn

from app.config import Settings
from app.http_guard import guarded_protocol
from app.main import create_app
from app.process_memory import limit_malloc_arenas


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per upstream request


def server_config(settings: Settings) -> uvicorn.Config:
    """uvicorn's configuration of the proxy, with its connection limits (README, "Limits and
    hostile clients"); glibc's heap arenas are limited first, before the service's threads
    start (``serve``, ``toksplice demo``)."""
    limit_malloc_arenas()
    return uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        http=guarded_protocol(settings.header_timeout),
        timeout_keep_alive=max(1, round(settings.keep_alive_timeout)),
    )


def serve(settings: Settings) -> None:
    configure_logging(settings.log_level)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C, re-raised by uvicorn after shutdown
        uvicorn.Server(server_config(settings)).run()
