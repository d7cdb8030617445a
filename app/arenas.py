"""At most two glibc malloc arenas in the proxy process (before any thread starts).

glibc gives threads arenas of their own (up to eight per core), and memory a thread frees
stays in its arena for that arena's next allocations.  The proxy's large blocks come from the
arenas rather than fresh mappings (``RenderCache.make_room`` raises the mmap threshold so that
prompts do not fault in new pages), so every worker thread that once rendered or encoded a
long transcript keeps that much free memory in an arena of its own.  In a Redis soak (16
sessions of 100K characters, 100 calls/s) RSS rose 76 MB in four minutes, then stayed flat:
the growth was the 15 thread arenas' heaps, 109 MB of whose 122 MB were free.  With two
arenas it rose 52 MB in three minutes to a plateau 70 MB lower, at the same latency.
``MALLOC_ARENA_MAX`` in the environment, if set, is left to glibc.
"""

from __future__ import annotations

import ctypes
import os

_M_ARENA_MAX = -8
ARENAS = 2


def limit_arenas() -> bool:
    """Cap the arenas at ``ARENAS``; False where the C library is not glibc, or where the
    environment already chose (``MALLOC_ARENA_MAX``)."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, ARENAS))
