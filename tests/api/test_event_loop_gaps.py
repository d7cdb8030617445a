"""No request stalls the others: while each hostile request of ``loadtest/event_loop_gaps.py``
runs (a continuation appending 10M characters, with either CPU encoder; a 53 MB body of
escaped quotes; a 60 MB body malformed near its end and one nesting 600 levels, both
refused; ``vllm-generate`` with 10,000 stop strings, streamed and whole), ``/health/live`` is
polled at 20 Hz and every poll must be answered within ``BOUND_S``.

The bound is behavioural, not a benchmark: the first three requests held the event loop for
3 to 8 s before their work moved off it (parsing, encoding, stop matching), while on the
2-core machine the tests share with other jobs a poll of an idle proxy has been seen waiting
a few hundred milliseconds for the CPU alone.  One second tells the two apart with room on
both sides; the figures themselves come from the script (``docs/benchmarks.md``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from tests.api.servers import serving

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from loadtest.event_loop_gaps import (  # noqa: E402
    MODEL,
    SCENARIOS,
    LoopWatch,
    answer_ids,
    upstream_app,
)

BOUND_S = 1.0


@pytest.fixture(scope="module")
def upstream(smollm2_dir: Path) -> Iterator[str]:
    with serving(upstream_app(answer_ids(smollm2_dir))) as url:
        yield url


@pytest.mark.parametrize("name", [name for name in SCENARIOS if name != "idle"])
def test_no_request_stalls_the_event_loop(upstream: str, smollm2_dir: Path, name: str) -> None:
    options, run = SCENARIOS[name]
    settings = Settings(upstream=upstream, tokenizer=smollm2_dir, model=MODEL,
                        alignment_check=False, shadow_rate=0.0, **options)  # fmt: skip
    with (
        serving(create_app(settings)) as url,
        httpx.Client(base_url=url, timeout=600) as http,
        LoopWatch(url) as watch,
    ):
        run(http)  # checks its own answer
    assert watch.worst_s < BOUND_S, f"{name}: a poll waited {watch.worst_s:.2f} s"
