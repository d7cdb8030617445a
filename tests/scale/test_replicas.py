"""Replicas behind a real nginx, sharing sessions through a real Redis.

Agent sessions (tools, tool calls, reasoning; Qwen3 template and tokenizer) run through nginx
in front of three ``toksplice serve`` processes.  The upstream records every prompt and which
replica sent it; every prompt is compared with the reference encode of the rendered request.

* consistent hashing on the session header (the documented topology): a session stays on its
  replica; killing that replica mid-session moves it, and the first call after the move is a
  repair from Redis (``x-toksplice-route`` append/edit), not a full encode;
* round-robin (no affinity): every call may land elsewhere; all exact, all repairs after the
  session's first call; then sessions run concurrently with no pause between calls, all exact.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from tokenizers import Tokenizer

from app.rendering import ChatTemplate
from loadtest.agent_sessions import chat_requests
from tests.api.servers import StubUpstream
from tests.scale.cluster import AFFINITY, ROUND_ROBIN, Cluster
from tests.services import RedisServer

CHARS = 40_000


@pytest.fixture(scope="module")
def qwen3_dir(assets: dict[str, Path]) -> Path:
    return assets["qwen3"].parent


@functools.cache
def reference(folder: Path) -> tuple[ChatTemplate, Tokenizer]:
    return (
        ChatTemplate.from_tokenizer_config(folder / "tokenizer_config.json"),
        Tokenizer.from_file(str(folder / "tokenizer.json")),
    )


def expected(folder: Path, body: dict[str, Any]) -> list[int]:
    template, tokenizer = reference(folder)
    text = template.render(body["messages"], tools=body.get("tools"))
    return list(tokenizer.encode(text, add_special_tokens=False).ids)


def session(seed: int) -> list[dict[str, Any]]:
    """A session's calls as chat bodies (special-token lookalikes in tool output defused, so
    the calls take the plain repair path whose route the tests check)."""
    bodies = chat_requests(seed, target_chars=CHARS, model="m", billing_line=seed % 2 == 1)
    return [orjson.loads(orjson.dumps(b).replace(b"<|", b"< |")) for b in bodies]


class Calls:
    """Sends calls through nginx; checks each prompt the upstream got against the reference."""

    def __init__(self, url: str, stub: StubUpstream, folder: Path) -> None:
        self.http = httpx.Client(base_url=url, timeout=120)
        self.stub, self.folder = stub, folder

    def send(self, seed: int, body: dict[str, Any]) -> tuple[str, str]:
        """(route, replica that served it)."""
        reply = self.http.post(
            "/v1/chat/completions", json=body, headers={"x-session-id": f"agent-{seed}"}
        )
        assert reply.status_code == 200, reply.text[:500]
        ids = expected(self.folder, body)
        assert int(reply.headers["x-toksplice-prompt-tokens"]) == len(ids)
        sent = [k for k, r in enumerate(self.stub.requests) if r["prompt"] == ids]
        assert sent, "no prompt sent upstream equals the reference encode"
        return reply.headers["x-toksplice-route"], self.stub.callers[sent[-1]]


@pytest.fixture
def cluster_of(tmp_path: Path, qwen3_dir: Path, redis_server: RedisServer) -> Iterator[Any]:
    made: list[Cluster] = []
    stub = StubUpstream(pieces=["ok"])

    with stub.serve() as upstream:

        def make(balance: str) -> tuple[Cluster, Calls]:
            redis_server.client().flushall()
            cluster = Cluster(
                tmp_path,
                upstream=upstream,
                tokenizer=qwen3_dir,
                store=redis_server.url,
                balance=balance,
            )
            made.append(cluster)
            return cluster, Calls(cluster.url, stub, qwen3_dir)

        try:
            yield make
        finally:
            for cluster in made:
                cluster.stop()


def replicated(redis_server: RedisServer, seed: int, before: dict[bytes, bytes]) -> None:
    """Wait until the session's entry in Redis changed (writes are behind the response)."""
    client = redis_server.client()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        keys = list(client.scan_iter(match=f"*s:agent-{seed}".encode()))
        versions = {k: client.hget(k, "v") for k in keys}
        if keys and versions != before:
            before.clear()
            before.update(versions)  # type: ignore[arg-type]
            return
        time.sleep(0.01)
    raise AssertionError(f"session agent-{seed} was not written to Redis")


def test_killed_replica_moves_its_sessions_which_repair_from_redis(
    cluster_of: Any, redis_server: RedisServer
) -> None:
    cluster, calls = cluster_of(AFFINITY)
    sessions = {seed: session(seed) for seed in range(4)}
    homes: dict[int, str] = {}
    versions: dict[int, dict[bytes, bytes]] = {seed: {} for seed in sessions}
    for seed, bodies in sessions.items():
        for k, body in enumerate(bodies[:3]):
            route, replica = calls.send(seed, body)
            assert k == 0 or route in ("append", "edit")
            assert homes.setdefault(seed, replica) == replica  # affinity
            replicated(redis_server, seed, versions[seed])
    victim = homes[0]
    cluster.kill(int(victim.rsplit("-", 1)[1]))
    moved = 0
    for seed, bodies in sessions.items():
        for body in bodies[3:6]:
            route, replica = calls.send(seed, body)
            assert route in ("append", "edit"), (seed, route)
            assert replica != victim
            moved += homes[seed] == victim and homes[seed] != replica
            homes[seed] = replica
    assert moved >= 1


def test_round_robin_repairs_from_redis_and_stays_exact_under_concurrency(
    cluster_of: Any, redis_server: RedisServer
) -> None:
    _, calls = cluster_of(ROUND_ROBIN)
    sessions = {seed: session(seed) for seed in range(10, 13)}
    served_by: set[str] = set()
    for seed, bodies in sessions.items():
        versions: dict[bytes, bytes] = {}
        for k, body in enumerate(bodies[:4]):
            route, replica = calls.send(seed, body)
            assert k == 0 or route in ("append", "edit"), (seed, k, route)
            served_by.add(replica)
            replicated(redis_server, seed, versions)
    assert len(served_by) == 3

    def run(seed: int) -> list[str]:
        return [calls.send(seed, body)[0] for body in sessions[seed][4:]]

    with ThreadPoolExecutor(len(sessions)) as pool:
        routes = [r for rs in pool.map(run, sessions) for r in rs]
    assert len(routes) >= 6
