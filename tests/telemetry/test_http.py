"""Telemetry over real HTTP: client -> proxy (uvicorn on 127.0.0.1) -> a stand-in upstream.

A fault injected into the real repair path is caught by the shadow verifier and the session's
next call encodes in full; /metrics counts by client API and route; spans reach an OTLP
receiver without keys or content; the admin endpoints are closed off a loopback bind.
"""

from __future__ import annotations

import gc
import http.server
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from fastapi import FastAPI
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from app.config import Settings
from app.main import create_app
from app.sessions.ids_json import IdsJson
from app.sessions.pieces import PieceEncoder, PieceIds
from app.telemetry import shadow as shadow_module
from app.tokenization.growable import Growable
from app.tokenization.reference import IdArray
from app.tokenization.repair import Plan, Repairer
from app.tokenization.state import SessionState
from tests.api.servers import StubUpstream, serving
from tests.api.test_faults import expected_ids

MODEL = "m"
SECRET_KEY = "sk-telemetry-secret-0123456789"
CONTENT = "the-private-words-of-a-user"


@contextmanager
def proxy(folder: Path, **options: Any) -> Iterator[tuple[FastAPI, httpx.Client, StubUpstream]]:
    stub = StubUpstream()
    with stub.serve() as upstream:
        config = {"alignment_check": False, **options}
        app = create_app(Settings(upstream=upstream, tokenizer=folder, model=MODEL, **config))
        with serving(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            yield app, client, stub


def metric(client: httpx.Client, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


def wait_for(check: Callable[[], bool], seconds: float = 300) -> None:
    """Polls ``check`` until true.  The shadow verifier's child runs at idle priority: while
    other test files keep both cores of a CI machine busy (the RSS budget test alone runs
    three busy processes for over a minute), its checks wait for a free core, once more than
    60 s."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def conversation(turns: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You answer briefly. " * 30}]
    for k in range(turns):
        messages += [
            {"role": "user", "content": f"question {k}: how do the parts {k} fit together?"},
            {"role": "assistant", "content": f"They fit like this, step {k}."},
        ]
    return [*messages, {"role": "user", "content": "and then?"}]


def corrupt_one_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault in repair: the assembled ids get one wrong id in the middle."""
    assemble = Repairer.assemble

    def faulty(self: Repairer, old: SessionState, new: bytes, plan: Plan) -> tuple[Any, None]:
        state, _ = assemble(self, old, new, plan)
        ids = state.ids.copy()
        ids[len(ids) // 2] = 100 if ids[len(ids) // 2] != 100 else 101
        # Nothing claimed copied: the id JSON is made from these ids.
        return SessionState.grown(new, Growable.of((ids, state.ends))), None

    monkeypatch.setattr(Repairer, "assemble", faulty)


@pytest.mark.parametrize("stream", [False, True])
def test_a_repair_fault_is_caught_and_the_next_call_full_encodes(
    smollm2_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    corrupt_one_id(monkeypatch)
    repro = tmp_path / "repro"
    with proxy(smollm2_dir, shadow_rate=1.0, shadow_repro_dir=repro) as (_, client, stub):
        routes = []
        for turns in (1, 2, 3):
            body = {"model": MODEL, "messages": conversation(turns), "stream": stream}
            reply = client.post("/v1/chat/completions", json=body, headers={"x-session-id": "c"})
            assert reply.status_code == 200
            routes.append(reply.headers["x-toksplice-route"])
            if turns == 2:  # the corrupted repair went upstream; the verifier must catch it
                assert stub.requests[-1]["prompt"] != expected_ids(smollm2_dir, body)
                wait_for(lambda: metric(client, "toksplice_shadow_divergences_total") == 1)
        assert routes == ["full", "edit", "full"]
        assert stub.requests[-1]["prompt"] == expected_ids(smollm2_dir, body)
        [repro_file] = (tmp_path / "repro").iterdir()
        repro = orjson.loads(repro_file.read_bytes())
        first = repro["first_index"]
        assert repro["expected"][:first] == repro["actual"][:first]
        assert repro["expected"][first] != repro["actual"][first]
        assert first == len(repro["actual"]) // 2
        wait_for(lambda: metric(client, "toksplice_shadow_checks_total") == 3)


def test_the_id_json_sent_upstream_is_what_is_checked(
    smollm2_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ids go upstream as JSON spliced from earlier calls' JSON: a fault there (one id's
    digits changed) is caught though the ids themselves are right."""
    spliced = IdsJson.spliced

    def faulty(self: IdsJson, ids: IdArray, copied: Any = None) -> IdsJson:
        out = spliced(self, ids, copied)
        cut = int(out.ends[len(ids) // 2])
        digit = b"1" if out.text[cut - 1 : cut] != b"1" else b"2"
        text = out.text[: cut - 1].tobytes() + digit + out.text[cut:].tobytes()
        return IdsJson(
            out.ids, Growable.of((np.frombuffer(text, np.uint8),)), Growable.of((out.ends,))
        )

    monkeypatch.setattr(IdsJson, "spliced", faulty)
    repro = tmp_path / "repro"
    with proxy(smollm2_dir, shadow_rate=1.0, shadow_repro_dir=repro) as (_, client, stub):
        for turns in (1, 2):
            body = {"model": MODEL, "messages": conversation(turns)}
            reply = client.post("/v1/chat/completions", json=body, headers={"x-session-id": "j"})
            assert reply.headers["x-toksplice-route"] == ("full" if turns == 1 else "edit")
        assert stub.requests[-1]["prompt"] != expected_ids(smollm2_dir, body)
        wait_for(lambda: metric(client, "toksplice_shadow_divergences_total") == 1)
        [repro_file] = (tmp_path / "repro").iterdir()
        assert orjson.loads(repro_file.read_bytes())["actual"] == stub.requests[-1]["prompt"]


def test_divergence_can_switch_repair_off_until_restart(
    smollm2_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corrupt_one_id(monkeypatch)
    options = {"shadow_rate": 1.0, "shadow_repro_dir": tmp_path / "repro"}
    with proxy(smollm2_dir, shadow_disable_on_divergence=True, **options) as (app, client, _):
        for turns in (1, 2):
            body = {"model": MODEL, "messages": conversation(turns)}
            client.post("/v1/chat/completions", json=body, headers={"x-session-id": "a"})
        wait_for(lambda: metric(client, "toksplice_shadow_divergences_total") == 1)
        routes = []
        for turns in (1, 2):  # another session: no repair any more
            body = {"model": MODEL, "messages": conversation(turns)}
            reply = client.post("/v1/chat/completions", json=body, headers={"x-session-id": "b"})
            routes.append(reply.headers["x-toksplice-route"])
        assert routes == ["full", "full"]
        app.state.telemetry.drain()
        assert metric(client, "toksplice_fallbacks_total", reason="shadow verifier divergence") == 1
        [latest, *_] = client.get("/debug/traces.json").json()["requests"]
        [tokenize] = [s for s in latest["spans"] if s["name"] == "tokenize"]
        assert tokenize["attributes"]["toksplice.fallback"] == "shadow verifier divergence"
        assert tokenize["attributes"]["toksplice.window"] == 0  # no cut was searched for


@pytest.mark.parametrize("stream", [False, True])
def test_a_sampled_prompt_is_copied_only_once_its_request_is_upstream(
    smollm2_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """The verifier's copy of a sampled prompt (~2.7 ms at 1M characters) never delays the
    request: the copy holds the proxy until the upstream has the request, which it would never
    get were the copy made before the request was written."""
    write = shadow_module.write_utf8
    upstream_had: list[int] = []
    options = {"shadow_rate": 1.0, "shadow_repro_dir": tmp_path / "repro"}
    with proxy(smollm2_dir, **options) as (_, client, stub):

        def copy_after_the_upstream_has_it(text: Any, out: bytearray) -> None:
            deadline = time.monotonic() + 10
            while len(stub.requests) <= len(upstream_had) and time.monotonic() < deadline:
                time.sleep(0.01)
            upstream_had.append(len(stub.requests))
            write(text, out)

        monkeypatch.setattr(shadow_module, "write_utf8", copy_after_the_upstream_has_it)
        for turns in (1, 2):
            body = {"model": MODEL, "messages": conversation(turns), "stream": stream}
            reply = client.post("/v1/chat/completions", json=body, headers={"x-session-id": "s"})
            assert reply.status_code == 200
        assert upstream_had == [1, 2]
        wait_for(lambda: metric(client, "toksplice_shadow_checks_total") == 2)
        assert metric(client, "toksplice_shadow_divergences_total") == 0


def test_a_counted_prompt_is_verified_though_nothing_goes_upstream(
    smollm2_dir: Path, tmp_path: Path
) -> None:
    options = {"shadow_rate": 1.0, "shadow_repro_dir": tmp_path / "repro"}
    with proxy(smollm2_dir, **options) as (_, client, stub):
        body = {"model": MODEL, "messages": [{"role": "user", "content": CONTENT}]}
        reply = client.post("/v1/messages/count_tokens", json=body)
        assert reply.status_code == 200
        wait_for(lambda: metric(client, "toksplice_shadow_checks_total") == 1)
        assert stub.requests == []


def test_typed_special_token_prompts_are_verified_too(
    smollm2_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Route "pieces" is checked against its own contract: exact prompts pass, and a fault in
    the piece encoder is caught."""
    typed = [{"role": "user", "content": f"what does <|im_end|> mean? {CONTENT}"}]
    options = {"shadow_rate": 1.0, "shadow_repro_dir": tmp_path / "repro"}
    with proxy(smollm2_dir, **options) as (app, client, _stub):
        for turn in range(3):
            messages = [*typed, {"role": "user", "content": f"turn {turn} <|endoftext|>"}]
            reply = client.post("/v1/chat/completions", json={"model": MODEL, "messages": messages})
            assert reply.headers["x-toksplice-route"] == "pieces"
            typed = messages
        wait_for(lambda: metric(client, "toksplice_shadow_checks_total") == 3)
        assert metric(client, "toksplice_shadow_divergences_total") == 0

        encode = PieceEncoder.encode

        def faulty(self: PieceEncoder, *args: Any, **kwargs: Any) -> PieceIds:
            found = encode(self, *args, **kwargs)
            ids = np.concatenate([found.ids[:-1], found.ids[-1:] + 1])
            return found._replace(ids=ids, copied=None)

        monkeypatch.setattr(PieceEncoder, "encode", faulty)
        client.post("/v1/chat/completions", json={"model": MODEL, "messages": typed})
        wait_for(lambda: metric(client, "toksplice_shadow_divergences_total") == 1)
        [repro_file] = (tmp_path / "repro").iterdir()
        repro = orjson.loads(repro_file.read_bytes())
        assert repro["route"] == "pieces"
        # the route records its engines: runs that cover every id, in order
        edges = [(run["first"], run["last"]) for run in repro["engines"]]
        assert [first for first, _ in edges] == [0, *(last for _, last in edges[:-1])]
        assert edges[-1][1] == len(repro["actual"])
        assert repro["engine"] in ("reused", "reference")
        # the session's piece state (its cached pieces with it) was dropped (the metric
        # counts last)
        assert app.state.sessions.holding("pieces") == 0
        monkeypatch.undo()
        client.post("/v1/chat/completions", json={"model": MODEL, "messages": typed})
        wait_for(lambda: metric(client, "toksplice_shadow_checks_total") == 5)
        assert metric(client, "toksplice_shadow_divergences_total") == 1


def test_metrics_count_requests_by_api_and_route(smollm2_dir: Path) -> None:
    with proxy(smollm2_dir, shadow_rate=0.0) as (app, client, _):
        for turns in (1, 2):
            body = {"model": MODEL, "messages": conversation(turns), "stream": turns == 2}
            client.post("/v1/chat/completions", json=body, headers={"x-session-id": "m"})
        anthropic = {"model": MODEL, "max_tokens": 8, "stream": True,
                     "messages": [{"role": "user", "content": "hello from claude"}]}  # fmt: skip
        assert client.post("/v1/messages", json=anthropic).status_code == 200
        assert client.post("/v1/responses", json={"model": MODEL, "input": "hi"}).status_code == 200
        app.state.telemetry.drain()
        count = lambda api, route: metric(  # noqa: E731
            client, "toksplice_requests_total", api=api, route=route, outcome="ok"
        )
        assert count("chat", "full") == 1 and count("chat", "edit") == 1
        assert count("messages", "full") == 1 and count("responses", "full") == 1
        assert metric(client, "toksplice_tokenize_seconds_count", route="full") == 3
        assert metric(client, "toksplice_ttft_seconds_count", api="chat") == 2
        assert metric(client, "toksplice_proxy_added_seconds_count", api="messages") == 1
        assert metric(client, "toksplice_reused_tokens_total", route="edit") > 0
        assert metric(client, "toksplice_fallbacks_total", reason="no stored transcript") == 3
        assert metric(client, "toksplice_session_store_sessions") == 3
        assert metric(client, "toksplice_session_store_bytes") > 0
        text = client.get("/metrics").text
        names = ("shadow_checks", "shadow_drops", "shadow_divergences", "session_store_evictions")
        for name in names:
            assert f"toksplice_{name}_total " in text


def _reachable_arrays(root: object) -> int:
    """How many numpy arrays can be reached from ``root`` through references."""
    seen, stack, arrays = {id(root)}, [root], 0
    while stack:
        for child in gc.get_referents(stack.pop()):
            if id(child) not in seen and not isinstance(child, type):
                seen.add(id(child))
                arrays += isinstance(child, np.ndarray)
                stack.append(child)
    return arrays


def test_the_trace_ring_keeps_no_ids_of_the_requests_it_shows(smollm2_dir: Path) -> None:
    """Each traced request stays in the ring (512 by default) after its call: were its ids
    kept, every one would pin its session's id buffer of that time outside the store's
    budget."""
    with proxy(smollm2_dir, shadow_rate=0.0) as (app, client, _):
        for turns in (1, 2, 3, 4):
            body = {"model": MODEL, "messages": conversation(turns)}
            reply = client.post("/v1/chat/completions", json=body, headers={"x-session-id": "r"})
            assert reply.status_code == 200
        app.state.telemetry.drain()
        ring = app.state.telemetry.ring
        assert len(ring.requests()) == 4
        assert _reachable_arrays(ring) == 0


class _Receiver(http.server.BaseHTTPRequestHandler):
    posts: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.posts.append((self.path, body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    posts: list[tuple[str, bytes]] = []
    handler = type("Receiver", (_Receiver,), {"posts": posts})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", posts
    finally:
        server.shutdown()


def test_spans_reach_otlp_and_the_console_without_keys_or_content(
    smollm2_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": CONTENT}]}
    headers = {"authorization": f"Bearer {SECRET_KEY}", "x-session-id": "conversation-7"}
    with otlp_receiver() as (endpoint, posts):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        with proxy(smollm2_dir, trace_console=True) as (app, client, _):
            for _ in range(2):
                assert client.post("/v1/chat/completions", json=body, headers=headers).is_success
            app.state.telemetry.drain()
            page = client.get("/debug/traces").text + client.get("/debug/traces.json").text
            scraped = client.get("/metrics").text
        # the app has stopped: its exporters flushed
    assert posts and {path for path, _ in posts} == {"/v1/traces"}
    spans = []
    for _, raw in posts:
        request = ExportTraceServiceRequest.FromString(raw)
        spans += [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
    names = sorted(s.name for s in spans)
    assert names.count("chat m") == 2
    for name in ("parse", "render", "tokenize", "session lookup/diff", "upstream", "stream back"):
        assert names.count(name) == 2, names
    [root, *_] = [s for s in spans if s.name == "chat m"]
    attributes = {a.key: a.value for a in root.attributes}
    assert attributes["gen_ai.operation.name"].string_value == "chat"
    assert attributes["gen_ai.request.model"].string_value == MODEL
    assert attributes["gen_ai.usage.input_tokens"].int_value > 0
    assert attributes["toksplice.route"].string_value in ("full", "hit")
    console = capsys.readouterr().out
    assert '"name": "chat m"' in console
    logs = "\n".join(r.getMessage() for r in caplog.records)
    for secret in (SECRET_KEY, CONTENT, "conversation-7"):
        for where in (b"".join(raw for _, raw in posts).decode("latin-1"), page, console, logs,
                      scraped):  # fmt: skip
            assert secret not in where


PROXIED = {"x-forwarded-for": "203.0.113.9"}


@pytest.mark.parametrize(
    ("admin_key", "headers", "status"),
    [
        (None, {}, 200),  # a loopback peer, through no proxy
        (None, PROXIED, 404),
        (None, {"forwarded": "for=127.0.0.1"}, 404),
        (None, {"x-real-ip": "127.0.0.1"}, 404),
        ("k-admin", {}, 200),
        ("k-admin", PROXIED, 403),
        ("k-admin", PROXIED | {"authorization": "Bearer wrong"}, 403),
        ("k-admin", PROXIED | {"authorization": "Bearer k-admin"}, 200),
        ("k-admin", PROXIED | {"x-admin-key": "k-admin"}, 200),
    ],
)
def test_admin_endpoints_need_a_direct_loopback_peer_or_the_admin_key(
    smollm2_dir: Path, admin_key: str | None, headers: dict[str, str], status: int
) -> None:
    """The bind address does not matter (behind nginx on the same host a loopback bind sees
    only loopback peers): the peer does, when no proxy header says it relays someone."""
    with proxy(smollm2_dir, host="127.0.0.1", admin_key=admin_key) as (_, client, _stub):
        for path in ("/metrics", "/debug/traces", "/debug/traces.json", "/debug/static/traces.js"):
            reply = client.get(path, headers=headers)
            assert reply.status_code == status, path
            if status != 200:
                error = reply.json()["error"]
                assert error["type"] and "admin key" in error["message"]


@pytest.mark.parametrize(
    ("mode", "outcome"),
    [("error500", "upstream_error"), ("die", "upstream_error"), ("slow", "cancelled")],
)
def test_failed_requests_are_counted_and_traced_with_their_outcome(
    smollm2_dir: Path, mode: str, outcome: str
) -> None:
    with proxy(smollm2_dir, shadow_rate=0.0) as (_, client, stub):
        stub.mode = mode
        body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        with client.stream("POST", "/v1/chat/completions", json=body) as reply:
            for line in reply.iter_lines():
                if mode == "slow" and '"x"' in line:
                    break  # a client that goes away mid-answer
        labels = {"api": "chat", "route": "full", "outcome": outcome}
        wait_for(lambda: metric(client, "toksplice_requests_total", **labels) == 1)
        [request] = client.get("/debug/traces.json").json()["requests"]
        assert request["outcome"] == outcome
        names = [s["name"] for s in request["spans"]]
        assert ("stream back" in names) == (mode != "error500")  # ended after the first token
