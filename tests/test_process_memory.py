"""``app.process_memory``: RSS from /proc, glibc's ``malloc_trim``, and the middleware that
trims after a request that grew the process (the bound itself:
``tests/loadtest/test_rss_budget.py``)."""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import weakref
from collections.abc import Callable
from multiprocessing.queues import SimpleQueue
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from app.config import Settings
from app.main import create_app
from app.process_memory import (
    ReturnFreedMemory,
    freeze_startup_heap,
    malloc_trim,
    resident_bytes,
)
from tests.api.servers import StubUpstream, serving

KEPT: list[bytes] = []


async def _grow(request: Request) -> PlainTextResponse:
    """Allocates ``mib`` MiB in 64 KiB blocks (the heap's, not mapped) and frees all but every
    64th: the freed memory lies in holes between kept blocks, which glibc does not give back
    by itself."""
    blocks = [bytes(64 << 10) for _ in range(16 * int(request.query_params.get("mib", "0")))]
    KEPT.extend(blocks[::64])
    del blocks
    return PlainTextResponse("ok")


async def _keep(request: Request) -> PlainTextResponse:
    """Keeps ``mib`` MiB, touched (no trim gives it back)."""
    KEPT.append(b"x" * (int(request.query_params.get("mib", "0")) << 20))
    return PlainTextResponse("ok")


async def _calls(app: ReturnFreedMemory, mibs: list[int]) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for mib in mibs:
            assert (await client.get(f"/?mib={mib}")).text == "ok"


def test_glibc_trim_and_rss_are_there() -> None:
    trim = malloc_trim()
    assert trim is not None  # the machines this runs on are glibc Linux
    assert trim() in (0, 1)
    rss = resident_bytes()
    assert rss is not None and rss > 10 << 20


Readings = SimpleQueue[tuple[int | None, int | None]]


def _in_a_child(target: Callable[[Readings], None]) -> tuple[int | None, int | None]:
    """The two RSS readings ``target`` reports from a forked child."""
    context = multiprocessing.get_context("fork")
    out: Readings = context.SimpleQueue()
    child = context.Process(target=target, args=(out,))
    child.start()
    readings = out.get()
    child.join()
    return readings


def _grown_child(out: Readings) -> None:
    before = resident_bytes()
    KEPT.append(b"x" * (128 << 20))
    out.put((before, resident_bytes()))


def test_a_forked_child_reads_its_own_rss() -> None:
    """The statm descriptor is opened per process: a child forked after the parent read its
    RSS sees its own 128 MiB grow, not the parent's figure."""
    parent = resident_bytes()
    assert parent is not None
    before, after = _in_a_child(_grown_child)
    assert before is not None and after is not None and after - before >= 120 << 20


def test_a_trim_follows_only_requests_that_grew_the_process() -> None:
    inner = Starlette(routes=[Route("/", _grow)])
    trimming = ReturnFreedMemory(inner, growth_bytes=-1)  # every request "grew" it
    asyncio.run(_calls(trimming, [0, 0, 0]))
    assert trimming.trims == 3
    steady = ReturnFreedMemory(inner, growth_bytes=1 << 40)  # none did
    asyncio.run(_calls(steady, [64, 0]))
    assert steady.trims == 0
    small = ReturnFreedMemory(inner, growth_bytes=-1, trim_above=1 << 40)  # under the floor
    asyncio.run(_calls(small, [0, 0]))
    assert small.trims == 0


def test_a_trim_follows_requests_that_together_grew_the_process() -> None:
    """Requests each growing RSS by 8 MiB, under ``growth_bytes`` (as many at once do): the
    second past the first trim leaves it 16 MiB above where that trim did, more than a
    quarter of ``growth_bytes``, and a trim follows."""
    keeping = ReturnFreedMemory(Starlette(routes=[Route("/", _keep)]), growth_bytes=48 << 20)
    asyncio.run(_calls(keeping, [0]))  # the first trim: RSS from nothing
    assert keeping.trims == 1
    asyncio.run(_calls(keeping, [8]))
    assert keeping.trims == 1
    asyncio.run(_calls(keeping, [8]))
    assert keeping.trims == 2


def test_freed_heap_goes_back_after_a_large_request() -> None:
    """256 MiB allocated and 252 MiB of it freed, in holes, inside one request: the trim after
    it returns those pages (with ``growth_bytes`` past 256 MiB this fails)."""
    app = ReturnFreedMemory(Starlette(routes=[Route("/", _grow)]))
    before = resident_bytes()
    assert before is not None
    asyncio.run(_calls(app, [0, 256]))
    after = resident_bytes()
    assert after is not None and after - before < 64 << 20, (before >> 20, after >> 20)


def _built_then_frozen(out: Readings) -> None:
    """A forked child "builds a service": 256 MiB in 64 KiB blocks, all but every 64th freed
    (holes glibc keeps), then freezes its startup heap; it reports RSS before and after."""
    blocks = [bytes(64 << 10) for _ in range(16 * 256)]
    KEPT.extend(blocks[::64])
    del blocks
    before = resident_bytes()
    freeze_startup_heap()
    out.put((before, resident_bytes()))


def test_what_building_the_service_freed_goes_back_at_the_freeze() -> None:
    """No request follows start-up to trim after it: before the freeze trimmed, the idle
    proxy kept ~70 MiB its start-up had freed (Qwen3: 350 MiB idle, 278 after)."""
    before, after = _in_a_child(_built_then_frozen)
    assert before is not None and after is not None
    assert before - after > 192 << 20, (before >> 20, after >> 20)


class _Node:
    """A weakly referenceable object that can sit in a reference cycle."""

    other: object = None


def _cycle() -> weakref.ref[_Node]:
    node = _Node()
    node.other = node
    return weakref.ref(node)


def test_the_startup_heap_is_frozen_and_later_cycles_still_collected() -> None:
    """Garbage before the freeze is collected, not frozen; what lives on is left out of
    every later collection; a cycle made after it still goes at the next one."""
    kept = _Node()
    tracked = gc.is_tracked(kept)
    before = _cycle()
    try:
        freeze_startup_heap()
        assert before() is None
        assert gc.get_freeze_count() > 0 and tracked
        assert not any(o is kept for o in gc.get_objects())  # frozen: no generation holds it
        after = _cycle()
        assert after() is not None
        gc.collect()
        assert after() is None
    finally:
        gc.unfreeze()


def test_a_stopped_app_is_freed(smollm2_dir: Path) -> None:
    """Its lifespan froze the heap with the app in it; stopping thaws it, so the app's
    cycles (tokenizer tables, service, routes) go at the next collection: before, every
    app a process had served stayed for good (170 MiB each with Qwen3's vocabulary)."""
    stub = StubUpstream()
    with stub.serve() as upstream:
        settings = Settings(upstream=upstream, tokenizer=smollm2_dir, model="m",
                            alignment_check=False, dialect="vllm-completions")
        app = create_app(settings)
        with serving(app) as url:
            assert httpx.get(f"{url}/health").status_code == 200
            assert gc.get_freeze_count() > 0
        freed = weakref.ref(app)
        del app
        gc.collect()
        assert freed() is None
        assert gc.get_freeze_count() == 0
