"""The shipped nginx keeps ``/metrics`` and ``/debug/*`` off its public listener, even for a
caller holding the admin key, and a replica on loopback behind it serves them to no relayed
call (nginx's X-Forwarded-For), while the replica's own loopback still gets them."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.api.servers import StubUpstream
from tests.scale.cluster import Cluster

ADMIN = ("/metrics", "/debug/traces", "/debug/traces.json")


def test_admin_pages_are_not_public_behind_nginx(smollm2_dir: Path, tmp_path: Path) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream:
        cluster = Cluster(tmp_path, upstream=upstream, tokenizer=smollm2_dir / "tokenizer.json",
                          store="memory", replicas=1)  # fmt: skip
        try:
            with httpx.Client(base_url=cluster.url, timeout=30) as public:
                for path in ADMIN:
                    assert public.get(path).status_code == 404, path
                    spoofed = {"x-admin-key": "guess", "x-forwarded-for": "127.0.0.1"}
                    assert public.get(path, headers=spoofed).status_code == 404, path
                assert public.get("/health").status_code == 200
            replica = f"http://127.0.0.1:{cluster.ports[0]}"
            with httpx.Client(base_url=replica, timeout=30) as direct:
                assert direct.get("/metrics").status_code == 200
                relayed_header = {"x-forwarded-for": "203.0.113.9"}
                assert direct.get("/metrics", headers=relayed_header).status_code == 404
        finally:
            cluster.stop()
