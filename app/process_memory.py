"""The process's resident memory, and handing freed memory back to the OS after a request
that grew it.

A large request (a 50 MB body, ``'a' * 10_000_000``) allocates hundreds of MB for a moment:
the parsed body, the rendered prompt, the encoder's temporaries, the upstream request.  When
it ends, glibc keeps most of that in its arenas' free lists (each worker thread has an arena
of its own, and only that arena's later allocations reuse its free memory), so without help
RSS stays near the peak of the largest request ever served.  ``ReturnFreedMemory`` reads RSS
when each HTTP request begins and after it ends; when the request left it more than
``growth_bytes`` above where it began, and above ``trim_floor`` (under which the bound holds
without it), a full garbage collection (a request's objects can sit
in a reference cycle until the next one) and then ``malloc_trim(0)`` (~10-30 ms, in a worker
thread, one at a time) hand the free pages back.  Steady traffic does not grow RSS within a
request, so it does not trim: measured from the last trim instead, the slow climb of a long
session's memos and the heap's working set (~40-60 MB at 1M characters) set off a trim every
few calls, and the calls after each one fault the same pages back in (2.4x the page faults
of the same calls at 1M characters, ``loadtest/replay.py``).  Where the C library is not glibc there
is no ``malloc_trim`` and nothing is done.

What is alive once the service is built (the modules, the vocabulary's tables, the template)
lives as long as the process: ``freeze_startup_heap`` takes it out of every later collection,
so that a full one (Python's own, or the trim's) scans only what requests left behind
(~95K objects, 30-300 ms per full collection on a shared 2-core machine, otherwise).
"""

from __future__ import annotations

import ctypes
import functools
import gc
import os
from collections.abc import Callable

import anyio
import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

_CORES = len(os.sched_getaffinity(0))
"""Cores the process may run on: the native encoder's work sets and the heap arenas, one each."""

FIXED_OVERHEAD_BYTES = (384 << 20) + (16 << 20) * max(0, _CORES - 2)
"""F in the bound RSS <= ``--store-bytes`` + F that holds after any request (README, "Limits
and hostile clients"): the idle process with a ~150K-token vocabulary loaded (~230-330 MiB),
``GROWTH_BYTES`` and glibc's fragmentation, measured on 2 cores by ``loadtest/rss_budget.py``;
and for each core past two, one more of the native encoder's work sets (12.8 MB of piece
caches and up to 2.7 MB of buffers) and one more heap arena's slack (``limit_malloc_arenas``)."""

GROWTH_BYTES = 64 << 20
"""RSS growth within one request that triggers a trim after it (a quarter of it since the last
trim does too)."""


def trim_floor(store_bytes: int) -> int:
    """The RSS under which a request that grew the process is not followed by a trim: the
    bound (``store_bytes`` + ``FIXED_OVERHEAD_BYTES``) less one request's growth.  Below it
    the bound holds without one, and a trim costs the calls after it: it hands back the free
    pages inside the heap, and later buffers carved from them fault in again (after a 1M
    session's cold call, ~300 pages per call for its id JSON alone)."""
    return store_bytes + FIXED_OVERHEAD_BYTES - GROWTH_BYTES


def freeze_startup_heap() -> None:
    """Collects once, then moves every object still alive to the permanent generation
    (``gc.freeze``): it is never scanned again, and freed as usual when its last reference
    goes.  Then hands back to the OS what building the service freed (``malloc_trim``): the
    tokenizer.json parses and the vocabulary tables' temporaries, ~70 MiB for Qwen3's, which
    glibc would otherwise keep for good (no later request grows the process enough to trim)."""
    gc.collect()
    gc.freeze()
    trim = malloc_trim()
    if trim is not None:
        trim()


def thaw_startup_heap() -> None:
    """Undoes ``freeze_startup_heap`` when the service stops: what it froze goes back to the
    collector, so a stopped app's reference cycles (its tokenizer's tables among them) are
    freed, not kept for the process's lifetime (an embedder or a test suite starts many)."""
    gc.unfreeze()


@functools.cache
def _statm(pid: int) -> tuple[int, int] | None:
    """Process ``pid``'s /proc statm, opened once (read with ``pread``: 3 us, not 15 us, after
    every request; by pid, so a forked child opens its own), and the page size; None where
    there is no /proc."""
    try:
        fd = os.open(f"/proc/{pid}/statm", os.O_RDONLY | os.O_CLOEXEC)
        return fd, os.sysconf("SC_PAGE_SIZE")
    except (OSError, AttributeError, ValueError):
        return None


def resident_bytes() -> int | None:
    """This process's RSS from /proc (Linux); None elsewhere."""
    statm = _statm(os.getpid())
    if statm is None:
        return None
    fd, page = statm
    try:
        pages = int(os.pread(fd, 256, 0).split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * page


def _glibc() -> ctypes.CDLL | None:
    """The C library where it is glibc (musl has no ``malloc_trim`` or ``mallopt`` arenas)."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (glibc's own symbol)
    except (OSError, AttributeError):
        return None
    return libc


def malloc_trim() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)`` (returns 1 when it released memory); None without glibc."""
    libc = _glibc()
    if libc is None:
        return None
    trim = libc.malloc_trim
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


_M_ARENA_MAX = -8


def limit_malloc_arenas() -> None:
    """At most one glibc arena per core the process may run on, not glibc's eight: each new
    thread gets an arena of its own while there are fewer, and every arena keeps what its
    requests freed (up to tens of MB each, as its trim threshold grows with the blocks it
    frees).  On 2 cores at a 64 MiB budget (``loadtest/rss_budget.py``'s phases), RSS after
    the 4M-character word was 331 MiB with this and 386 without, after 40 clients at once 369
    and 382.  The threads seldom allocate at once (the GIL), so fewer arenas cost no waiting.
    glibc fixes the limit once 8 arenas exist: called before the service starts its threads
    (``serve.server_config``)."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(ctypes.c_int(_M_ARENA_MAX), ctypes.c_int(_CORES))


class ReturnFreedMemory:
    """ASGI middleware: a full collection and ``malloc_trim(0)`` (in a worker thread) after an
    HTTP request that left RSS above ``trim_above`` and either more than ``growth_bytes`` above
    where it stood when the request began, or more than a quarter of that above where the last
    trim left it: requests at once each grow the process by little and together by much (40
    clients at once, then 300 edited calls of a 1M-character session, ended 20 MiB over the
    bound without the second rule).  A request that starts while a trim runs waits for it, so
    what it reads of RSS (``/metrics``) is after the trim."""

    def __init__(self, app: ASGIApp, growth_bytes: int = GROWTH_BYTES, trim_above: int = 0) -> None:
        """``trim_above``: the RSS under which no trim follows (``trim_floor``)."""
        self.app = app
        self.growth_bytes = growth_bytes
        self.trim_above = trim_above
        self.trims = 0
        self._trim = malloc_trim() if resident_bytes() is not None else None
        self._lock = anyio.Lock()
        self._settled = 0
        """RSS after the last trim."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        trim = self._trim
        if trim is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._lock.locked():
            async with self._lock:
                pass
        began = resident_bytes() or 0
        try:
            await self.app(scope, receive, send)
        finally:
            after = resident_bytes() or 0
            grown = max(after - began, 4 * (after - self._settled)) > self.growth_bytes
            if grown and after > self.trim_above and not self._lock.locked():
                with anyio.CancelScope(shield=True):  # a cancelled request still trims
                    async with self._lock:
                        gc.collect()  # a request's objects can sit in a reference cycle
                        await anyio.to_thread.run_sync(trim)
                        self.trims += 1
                        self._settled = resident_bytes() or 0
