"""The proxy's RSS stays within its budget plus the fixed overhead F after the requests that
once left it near their peak for good: a 20 MB body, a 4M-character word, many sessions, 40
clients at once (each on a worker thread of its own: the native encoder's piece caches were
once 12.8 MB a thread, and glibc gave each thread a heap arena that kept what it freed), and
300 calls of a 1M-character session edited at its start (each call's ids a copy: the trace ring
once kept every one of them, ~330 MiB past the bound).

A bound on memory through ``/metrics`` (``toksplice_process_resident_bytes``) of a proxy in a
process of its own, never a timing: the process is the one ``loadtest/rss_budget.py`` measures.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from app.process_memory import FIXED_OVERHEAD_BYTES  # noqa: E402
from loadtest.rss_budget import measure  # noqa: E402

BUDGET = 64 << 20


def test_rss_stays_within_budget_plus_overhead_after_large_requests(
    assets: dict[str, Path],
) -> None:
    phases = list(
        measure(
            assets["qwen3"].parent,
            BUDGET,
            big_chars=20_000_000,
            word_chars=4_000_000,
            sessions=100,
        )
    )
    assert len(phases) == 6
    for phase, rss, store in phases:
        assert store <= BUDGET, phase
        assert rss <= BUDGET + FIXED_OVERHEAD_BYTES, (phase, rss / 2**20)
