"""``loadtest/replay.py --baseline``: the ratios of the same calls through two proxies, per
Server-Timing part."""

from __future__ import annotations

import pytest

from loadtest.replay import Samples, _paired, _stretch


def test_every_part_gets_its_p50_ratio_and_per_call_median() -> None:
    ours = Samples(parts={"read": [2.0, 4.0, 6.0], "proxy": [10.0, 12.0, 30.0], "rest": [1.0]})
    theirs = Samples(parts={"read": [1.0, 4.0, 3.0], "proxy": [10.0, 10.0, 10.0]})
    paired = _paired("abc123", ours, theirs)
    ratios = paired["part_ratios"]
    assert set(ratios) == {"read", "proxy"}  # a part the baseline lacks has no ratio
    assert ratios["read"] == {"p50": 4 / 3, "per_call": 2.0}  # p50s 4 / 3; calls 2, 1, 2
    assert ratios["proxy"]["p50"] == pytest.approx(1.2)
    assert ratios["proxy"]["per_call"] == pytest.approx(1.2)  # calls 1, 1.2, 3
    assert (paired["ratio_p50"], paired["ratio_per_call"]) == (
        ratios["proxy"]["p50"],
        ratios["proxy"]["per_call"],
    )
    assert paired["baseline_read_p50"] == 3.0 and "baseline_proxy_p50" not in paired


def test_the_fresh_stretch_calls_are_summed_up_apart() -> None:
    calls = Samples(parts={"proxy": [1.0, 40.0, 2.0, 50.0, 3.0]})
    calls.stretch = [False, True, False, True, False]
    assert _stretch("x_", calls) == {
        "x_stretch_calls": 2,
        "x_stretch_added_p50": 50.0,
        "x_stretch_added_p99": 50.0,
    }
    paired = _paired("abc123", calls, calls)
    assert paired["baseline_stretch_calls"] == 2
