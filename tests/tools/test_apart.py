"""The serving path never imports ``app.tools``: a process that builds the proxy app and runs
its startup (tokenizer, template, session store, upstream client) holds no tooling module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.api.servers import closed_port_url

_SERVE = """
import json, sys
from fastapi.testclient import TestClient
import app.__main__, app.serve
from app.config import Settings
from app.main import create_app
settings = Settings(upstream=sys.argv[1], tokenizer=sys.argv[2], model="m", alignment_check=False)
with TestClient(create_app(settings)) as client:
    assert client.get("/health/live").status_code == 200
print(json.dumps(sorted(m for m in sys.modules if m == "app.tools" or m.startswith("app.tools."))))
"""


def test_serving_imports_no_tool(smollm2_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SERVE, closed_port_url(), str(smollm2_dir)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout.splitlines()[-1]) == []
