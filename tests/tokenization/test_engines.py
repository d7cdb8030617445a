"""Which engine encoded what: every encoding's runs cover its ids in order and name the engine
that ran (native, reference, reused; the frame's ids the reference's), and ``explain`` counts
them."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from app.sessions import SessionTokenizer
from app.tokenization import Encoding
from app.tokenization.engines import EngineRun, engine_at, runs_of
from app.tokenization.native_route import CpuEncoder
from tests.adversarial import grown_texts


def assert_covered(encoding: Encoding) -> None:
    """The runs tile ``ids`` from 0, neighbours of one engine joined; the route's engines."""
    runs = encoding.engines
    assert [run.first for run in runs] == [0, *(run.last for run in runs)][: len(runs)]
    assert (runs[-1].last if runs else 0) == len(encoding.ids)
    assert all(a.engine != b.engine for a, b in itertools.pairwise(runs))
    engines = {run.engine for run in runs}
    if encoding.route == "hit":
        assert engines <= {"reused"}
    elif encoding.route == "full":
        assert "reused" not in engines
    else:  # repaired, or appended to by the SentencePiece appender
        assert engines & {"reused", "incremental"} or not len(encoding.ids)
    assert ("native" in engines) <= (encoding.native_bytes > 0)


@pytest.mark.parametrize(
    ("name", "engine", "seen"),
    [
        ("qwen3", "native", {"native", "reused"}),
        ("smollm2", "native", {"native", "reused"}),
        ("llama3", "reference", {"reference", "reused"}),
        ("mistral_v3", "native", {"reference", "incremental"}),
    ],
)
def test_every_call_names_its_engines(
    name: str, engine: CpuEncoder, seen: set[str], assets: dict[str, Path]
) -> None:
    """Repairs, hits and full encodes, chunked (parallel_chunk 256) or whole; Mistral's
    SentencePiece appender ("incremental") included."""
    tok = SessionTokenizer.from_file(assets[name], cpu_encoder=engine, parallel_chunk=256)
    total: Counter[str] = Counter()
    calls = 0

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(grown_texts())
    def run(versions: list[str]) -> None:
        nonlocal calls
        calls += 1
        for text in versions:
            encoding = tok.encode(text, session=f"t/{calls}")
            assert_covered(encoding)
            for found in encoding.engines:
                total[found.engine] += found.last - found.first

    run()
    assert tok.explain()["engines"] == dict(total)
    assert seen <= set(total) <= seen | {"reference"}  # the native encoder declines some


def test_a_declined_text_is_the_references(assets: dict[str, Path]) -> None:
    """A token ends inside a character NFC changed: the native encoder declines, the run says
    so."""
    tok = SessionTokenizer.from_file(assets["qwen3"])
    text = "e\u0301\u0301"
    encoding = tok.encode(text)
    assert encoding.native_bytes == 0
    assert encoding.engines == (EngineRun(0, len(encoding.ids), "reference"),)


def test_the_frame_is_the_references(assets: dict[str, Path]) -> None:
    """Mistral's BOS before the ids, then a grown call: the frame, the appender's ids."""
    tok = SessionTokenizer.from_file(assets["mistral_v3"])
    first = tok.encode("hello world", session="t/f", add_special_tokens=True)
    assert first.engines == (EngineRun(0, len(first.ids), "reference"),)  # BOS joined
    grown = tok.encode("hello world, again", session="t/f", add_special_tokens=True)
    assert grown.route == "append"
    assert grown.engines == (
        EngineRun(0, 1, "reference"), EngineRun(1, len(grown.ids), "incremental"),
    )  # fmt: skip


def test_runs_join_neighbours_and_find_an_index() -> None:
    runs = runs_of([(3, "reused"), (0, "native"), (2, "reused"), (4, "native")], offset=1)
    assert runs == (EngineRun(1, 6, "reused"), EngineRun(6, 10, "native"))
    assert [engine_at(runs, i) for i in (0, 1, 5, 6, 9, 10)] == [
        None, "reused", "reused", "native", "native", None,
    ]  # fmt: skip
