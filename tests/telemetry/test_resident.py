"""``/metrics`` reports the proxy process's own resident memory beside the store's figures."""

from __future__ import annotations

from pathlib import Path

from tests.telemetry.test_http import metric, proxy


def _vm_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_metrics_report_the_process_rss(smollm2_dir: Path) -> None:
    with proxy(smollm2_dir) as (_, client, _stub):
        before = _vm_rss()
        reported = metric(client, "toksplice_process_resident_bytes")
        after = _vm_rss()
        # the proxy runs in this process: its RSS is this process's, give or take the scrape
        assert 0.8 * min(before, after) <= reported <= 1.2 * max(before, after)
