"""The load tests' reading of the proxy's ``Server-Timing`` header."""

from __future__ import annotations

from loadtest.processes import server_timing


def test_server_timing_reads_every_part_in_ms() -> None:
    header = "read;dur=0.099, parse;dur=1.650, render;dur=0.396, tokenize;dur=0.899, proxy;dur=6.1"
    assert server_timing({"server-timing": header}) == {
        "read": 0.099, "parse": 1.65, "render": 0.396, "tokenize": 0.899, "proxy": 6.1,
    }
    assert server_timing({}) == {}
    assert server_timing({"server-timing": "cache, proxy;dur=2"}) == {"proxy": 2.0}
