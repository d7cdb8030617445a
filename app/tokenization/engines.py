"""Which engine gave which ids: the stretches of an encoding, each named by what produced it.

Every id is the reference's, whoever computed it; what differs is the code that ran.  An
encoding's ids are covered, in order, by runs of one engine each: "native" (the C encoder,
``native``), "reference" (HF ``tokenizers``), "gpu" (a cold start on the device), "reused"
(ids copied from the session's stored ones by repair, or a hit) and "incremental" (the
SentencePiece appender's incremental BPE).  The shadow verifier names the engine of the run
holding a divergence, and ``SessionTokenizer.explain`` counts the ids of each.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, NamedTuple

Engine = Literal["native", "reference", "gpu", "reused", "incremental"]


class EngineRun(NamedTuple):
    """Ids ``[first, last)`` came from ``engine``."""

    first: int
    last: int
    engine: Engine


EngineParts = tuple[tuple[int, Engine], ...]
"""(id count, engine) of consecutive stretches, as the encoders report them."""


def runs_of(parts: Iterable[tuple[int, Engine]], offset: int = 0) -> tuple[EngineRun, ...]:
    """The runs of consecutive ``parts`` (empty ones left out, neighbours of one engine
    joined), the first starting at id ``offset``."""
    runs: list[EngineRun] = []
    at = offset
    for count, engine in parts:
        if not count:
            continue
        if runs and runs[-1].engine == engine:
            runs[-1] = runs[-1]._replace(last=at + count)
        else:
            runs.append(EngineRun(at, at + count, engine))
        at += count
    return tuple(runs)


def engine_at(runs: Iterable[EngineRun], index: int) -> Engine | None:
    """The engine of the run holding id ``index``; None when no run does (the ids past the
    end, or an encoding that did not record its engines)."""
    return next((run.engine for run in runs if run.first <= index < run.last), None)
