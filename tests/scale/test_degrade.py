"""Faults of what the proxy depends on, over real HTTP: Redis stopped and restarted under two
replicas, the upstream restarted.  No client ever sees an error caused by Redis, and every
prompt is the reference encode."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from app.config import Settings
from app.main import create_app
from tests.api.servers import StubUpstream, serving
from tests.api.test_faults import HELLO, MODEL, expected_ids
from tests.scale.test_replicas import session
from tests.services import RedisServer, free_port


@contextmanager
def replicas(
    upstream: str, folder: Path, n: int, **options: Any
) -> Iterator[list[tuple[FastAPI, httpx.Client]]]:
    with ExitStack() as stack:
        out = []
        for _ in range(n):
            settings = Settings(
                upstream=upstream, tokenizer=folder, model=MODEL, alignment_check=False, **options
            )
            app = create_app(settings)
            url = stack.enter_context(serving(app))
            out.append((app, stack.enter_context(httpx.Client(base_url=url, timeout=60))))
        yield out


def test_redis_stopped_and_restarted_under_two_replicas(assets: dict[str, Path]) -> None:
    folder = assets["qwen3"].parent
    server = RedisServer()
    server.start()
    stub = StubUpstream(pieces=["ok"])
    bodies = session(21)
    try:
        with (
            stub.serve() as upstream,
            replicas(upstream, folder, 2, store=server.url, redis_timeout=0.05) as pair,
        ):
            routes = []
            for k, body in enumerate(bodies):
                if k == len(bodies) // 3:
                    server.stop()
                if k == 2 * len(bodies) // 3:
                    server.start()
                    time.sleep(1.1)  # the breaker opened by the outage closes after 1 s
                _, http = pair[k % 2]
                reply = http.post("/v1/chat/completions", json=body, headers={"x-session-id": "s"})
                assert reply.status_code == 200, reply.text[:300]
                assert stub.requests[-1]["prompt"] == expected_ids(folder, body)
                routes.append(reply.headers["x-toksplice-route"])
            stats = [app.state.chat.tokenizer.store.stats() for app, _ in pair]
    finally:
        server.stop()
    assert routes[0] == "full" and "full" not in routes[1:], routes
    assert sum(s.get("redis_errors", 0) for s in stats) >= 1  # the outage was seen ...
    assert sum(s.get("redis_writes", 0) for s in stats) > len(bodies) // 3  # ... and got over


def test_upstream_restart(smollm2_dir: Path) -> None:
    """While the upstream is down calls get 502; once it is back (same port) they succeed
    again, pooled connections to the old process notwithstanding."""
    port = free_port()
    stub = StubUpstream()
    with replicas(f"http://127.0.0.1:{port}", smollm2_dir, 1) as [(_, http)]:
        with stub.serve(port):
            assert http.post("/v1/chat/completions", json=HELLO).status_code == 200
        assert http.post("/v1/chat/completions", json=HELLO).status_code == 502
        with stub.serve(port):
            assert http.post("/v1/chat/completions", json=HELLO).status_code == 200
    assert len(stub.requests) == 2
    assert stub.requests[-1]["prompt"] == expected_ids(smollm2_dir, HELLO)
