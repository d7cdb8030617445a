"""The trace page in a real browser: Debian's headless Chromium loads /debug/traces from the
running proxy after real requests, runs the page's script, and the DOM it prints is checked."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import httpx

from app.config import Settings
from app.main import create_app
from tests.api.servers import StubUpstream, serving
from tests.telemetry.test_http import conversation

MODEL = "m"


class _Rows(HTMLParser):
    """Each ``tr.request`` of the table: its data attributes, cell texts and waterfall bars;
    and each ``tr.refusal``'s data attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, object]] = []
        self.refusals: list[dict[str, str | None]] = []
        self.summary = ""
        self._in_summary = False
        self._cells: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr" and "request" in (found.get("class") or "").split():
            self.rows.append({**found, "cells": [], "bars": []})
        elif tag == "tr" and "refusal" in (found.get("class") or "").split():
            self.refusals.append(found)
        elif tag == "td" and self.rows:
            self.rows[-1]["cells"].append("")  # type: ignore[attr-defined]
        elif tag == "div" and found.get("data-span") and self.rows:
            self.rows[-1]["bars"].append(found["data-span"])  # type: ignore[attr-defined]
        self._in_summary = found.get("id") == "summary"

    def handle_data(self, data: str) -> None:
        if self._in_summary:
            self.summary += data
        elif self.rows and self.rows[-1]["cells"]:
            self.rows[-1]["cells"][-1] += data  # type: ignore[index]


def rendered(url: str, profile: Path) -> _Rows:
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is needed: apt-get install -y chromium"
    command = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", "--dump-dom", url,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    parser = _Rows()
    parser.feed(done.stdout)
    return parser


def test_the_page_shows_recent_requests_and_filters_by_session(
    smollm2_dir: Path, tmp_path: Path
) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream:
        settings = Settings(upstream=upstream, tokenizer=smollm2_dir, model=MODEL,
                            alignment_check=False)  # fmt: skip
        app = create_app(settings)
        with serving(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            for turns in (1, 2):
                body = {"model": MODEL, "messages": conversation(turns), "stream": turns == 2}
                client.post("/v1/chat/completions", json=body, headers={"x-session-id": "one"})
            client.post(
                "/v1/messages",
                json={"model": MODEL, "max_tokens": 8,
                      "messages": [{"role": "user", "content": "a different conversation"}]},
            )  # fmt: skip
            client.post("/v1/messages", json={"model": MODEL, "max_tokens": 8, "messages": []})
            app.state.telemetry.drain()
            recorded = client.get("/debug/traces.json").json()["requests"]
            everything = rendered(f"{url}/debug/traces", tmp_path / "profile")
            session = recorded[-1]["session"]  # the first request's
            one = rendered(f"{url}/debug/traces?session={session}", tmp_path / "profile")
            mine = rendered(f"{url}/debug/traces?session=one", tmp_path / "profile")  # the client's

    rows = everything.rows
    assert [r["data-route"] for r in rows] == ["full", "edit", "full"]  # newest first
    assert [r["data-api"] for r in rows] == ["messages", "chat", "chat"]
    assert everything.summary.startswith("3 of 3")
    edit = rows[1]
    cells = edit["cells"]
    assert isinstance(cells, list)
    reused = recorded[1]["reused_tokens"]
    assert reused > 0 and cells[5].startswith(f"{reused} (")  # the reuse figures
    assert cells[4] == str(recorded[1]["prompt_tokens"])
    # the first request opened the upstream connection, the second reused it
    lookup = "session lookup/diff"
    assert rows[2]["bars"] == ["parse", "render", "tokenize", lookup, "connect", "upstream"]
    assert edit["bars"] == ["parse", "render", "tokenize", lookup, "upstream", "stream back"]
    assert rows[0]["bars"][-1] == "upstream"  # a whole answer: no streaming back

    assert [r["data-session"] for r in one.rows] == [session, session]
    assert [r["data-route"] for r in one.rows] == ["edit", "full"]
    assert one.summary.startswith(f"2 of 3 recent requests in session {session}")
    assert [r["data-session"] for r in mine.rows] == [session, session]
    assert mine.summary.startswith("2 of 3 recent requests in session one")
    # the request refused before it reached the upstream is on the page too
    assert [(r["data-api"], r["data-status"]) for r in everything.refusals] == [
        ("messages", "400")]

