"""The alignment check runs again: after the upstream's connection broke, before the next
request, and every ``alignment_recheck_s``.

The end-to-end case is a rolling upgrade: a real llama.cpp upstream serves (ids flow), goes
away (calls get 502), and another server with another tokenizer comes back on the same port
(a stand-in whose ``/tokenize`` disagrees with ours): the next call goes as text, and
``/health`` says so.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.errors import UpstreamRetokenizedError
from app.main import create_app
from app.tools.local_upstream import LocalLlamaServer
from app.upstream.learned import Alignment, Learned
from app.upstream.readiness import Readiness
from tests.api.servers import StubUpstream, dropping_front, serving

MODEL = "smollm2"
HELLO = {"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "Say hi."}]}
ALIGNED = Learned(Alignment(verified=True), 2048)
MISMATCHED = Learned(Alignment(verified=True, mismatches=["probe"]), 2048)


def test_an_upstream_back_with_another_tokenizer_gets_text(
    assets: dict[str, Path], smollm2_dir: Path
) -> None:
    pytest.importorskip("xllamacpp", reason="xllamacpp is not installed: no local llama.cpp")
    other = StubUpstream(tokenize=lambda text: [ord(c) for c in text])
    llama = LocalLlamaServer(assets["smollm2_gguf"], n_ctx=2048, n_parallel=1)
    upstream = llama.start()  # on a port it took itself: no gap in which another could
    port = int(upstream.rsplit(":", 1)[1])
    settings = Settings(
        upstream=upstream,
        tokenizer=smollm2_dir,
        model=MODEL,
        alignment_check=True,
        alignment_recheck_s=0,
    )
    try:
        with serving(create_app(settings)) as url, httpx.Client(base_url=url, timeout=60) as http:
            assert http.post("/v1/chat/completions", json=HELLO).status_code == 200
            health = http.get("/health").json()
            assert health["sending"] == "token ids" and health["alignment"] == "ok"
            llama.stop()  # the upgrade: the server goes away ...
            assert http.post("/v1/chat/completions", json=HELLO).status_code == 502
            with other.serve(port):  # ... and another comes back on the same port
                reply = http.post("/v1/chat/completions", json=HELLO)
                assert reply.status_code == 200, reply.text
                assert other.tokenized, "the check never ran against the new server"
                assert isinstance(other.requests[-1]["prompt"], str)  # text, not our ids
                health = http.get("/health").json()
                assert health["sending"] == "text" and "mismatch" in health["alignment"]
    finally:
        llama.stop()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_request_whose_ids_meet_another_tokenizer_goes_as_text(
    assets: dict[str, Path], smollm2_dir: Path, stream: bool
) -> None:
    """The server is replaced behind the proxy's connection with no call in between: the
    next call's ids are made for the old tokenizer, its connection closes before the reply,
    and the check before it is sent again finds the other tokenizer: it goes as text."""
    pytest.importorskip("xllamacpp", reason="xllamacpp is not installed: no local llama.cpp")
    other = StubUpstream(tokenize=lambda text: [ord(c) for c in text])
    swapped = threading.Event()
    llama = LocalLlamaServer(assets["smollm2_gguf"], n_ctx=2048, n_parallel=1)
    upstream = llama.start()
    port = int(upstream.rsplit(":", 1)[1])
    try:
        with dropping_front(upstream, 1, armed=swapped) as front:
            settings = Settings(
                upstream=front,
                tokenizer=smollm2_dir,
                model=MODEL,
                alignment_check=True,
                alignment_recheck_s=0,
            )
            with (
                serving(create_app(settings)) as url,
                httpx.Client(base_url=url, timeout=60) as http,
            ):
                assert http.post("/v1/chat/completions", json=HELLO).status_code == 200
                llama.stop()
                with other.serve(port):
                    swapped.set()  # the next call's connection closes before its reply
                    reply = http.post("/v1/chat/completions", json={**HELLO, "stream": stream})
                    assert reply.status_code == 200, reply.text
                    assert other.tokenized, "the check never ran against the new server"
                    assert [type(sent["prompt"]) for sent in other.requests] == [str]
                    assert ("data: [DONE]" in reply.text) if stream else reply.json()["choices"]
                    assert http.get("/health").json()["sending"] == "text"
    finally:
        llama.stop()


class _Upstream:
    """What a scripted upstream's check finds, call after call; ``breaks`` as the client's."""

    def __init__(self, *found: Learned) -> None:
        self.found = list(found)
        self.checks = 0
        self.breaks = 0

    async def attempt(self) -> Learned:
        self.checks += 1
        return self.found[min(self.checks, len(self.found)) - 1]


def test_a_break_makes_the_next_request_wait_for_a_check() -> None:
    async def run() -> None:
        upstream = _Upstream(ALIGNED, MISMATCHED)
        heard: list[Learned] = []
        ready = Readiness(upstream.attempt, gated=True, breaks=lambda: upstream.breaks)
        ready.subscribe(heard.append)
        await ready.start()
        await ready.ensure()
        assert upstream.checks == 1 and ready.state() == "ok"
        upstream.breaks += 1  # the connection broke: the next request waits for a check
        assert not ready.current and "checked again" in ready.state()
        await ready.ensure()
        assert upstream.checks == 2 and heard == [ALIGNED, MISMATCHED]
        assert ready.learned is MISMATCHED and ready.state().startswith("mismatch")
        await ready.ensure()
        assert upstream.checks == 2  # current again: no check

    asyncio.run(run())


def test_a_request_made_for_the_old_tokenizer_is_not_resent() -> None:
    async def run() -> None:
        upstream = _Upstream(ALIGNED, ALIGNED, MISMATCHED)
        ready = Readiness(upstream.attempt, gated=True, breaks=lambda: upstream.breaks)
        await ready.start()
        upstream.breaks += 1  # an idle connection closed, the same server: resent
        await ready.before_resend(as_text=False)
        upstream.breaks += 1  # closed, and the server behind it is another
        with pytest.raises(UpstreamRetokenizedError, match="differently"):
            await ready.before_resend(as_text=False)
        assert upstream.checks == 3 and ready.learned is MISMATCHED
        upstream.breaks += 1  # another request's ids, made before the switch: not sent either
        with pytest.raises(UpstreamRetokenizedError):
            await ready.before_resend(as_text=False)
        upstream.breaks += 1  # one made as text after it is resent
        await ready.before_resend(as_text=True)

    asyncio.run(run())


def test_the_check_runs_again_at_its_interval() -> None:
    async def run() -> None:
        upstream = _Upstream(ALIGNED, ALIGNED, MISMATCHED)
        changed = asyncio.Event()
        ready = Readiness(upstream.attempt, gated=True, recheck_s=0.01)
        ready.subscribe(lambda learned: learned is MISMATCHED and changed.set())
        await ready.start()
        await asyncio.wait_for(changed.wait(), 60)  # a bound on a hang, not a timing
        await ready.aclose()
        assert upstream.checks >= 3 and ready.learned is MISMATCHED

    asyncio.run(run())
