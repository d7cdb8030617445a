"""Child processes for load tests: a free port, and a server process that is up (its health
URL answers 200) for the duration of a ``with`` block; and the proxy's ``Server-Timing``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def process(
    args: list[str],
    health: str,
    env: dict[str, str] | None = None,
    root: Path = ROOT,
    cores: set[int] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``args`` from the repository ``root`` (its code first on the path) until ``health``
    answers 200, on ``cores`` when given (every thread it starts included); stop it on exit."""
    proc = subprocess.Popen(
        args,
        env={**os.environ, "PYTHONPATH": str(root), **(env or {})},
        cwd=root,
        preexec_fn=None if cores is None else lambda: os.sched_setaffinity(0, cores),
    )
    try:
        wait_healthy(health, [proc], " ".join(args[:4]))
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@contextmanager
def checkout(rev: str) -> Iterator[Path]:
    """A temporary worktree of this repository at ``rev`` (its extensions built there, the
    tokenizer assets linked), removed on exit: to run an earlier version beside this one."""
    with tempfile.TemporaryDirectory(prefix="toksplice-baseline-") as parent:
        tree = Path(parent) / "tree"
        git = ["git", "-C", str(ROOT)]
        subprocess.run([*git, "worktree", "add", "--detach", str(tree), rev], check=True)
        try:
            # its own extensions, built from its own sources (ours may take other arguments)
            build = [sys.executable, "setup.py", "build_ext", "--inplace", "-q"]
            subprocess.run(build, cwd=tree, check=True, stdout=subprocess.DEVNULL)
            assets = ROOT / ".assets"
            if assets.exists() and not (tree / ".assets").exists():
                (tree / ".assets").symlink_to(assets)
            yield tree
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=False)


def wait_healthy(url: str, procs: list[subprocess.Popen[bytes]], what: str) -> None:
    """Poll ``url`` until it answers 200; fail when one of ``procs`` exits or after 300 s."""
    deadline = time.monotonic() + 300
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if any(p.poll() is not None for p in procs):
            raise RuntimeError(f"{what} exited while starting")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start at {url}")
        time.sleep(0.1)


def serve_args(upstream: str, tokenizer: Path, model: str, port: int, *extra: str) -> list[str]:
    """The command line of ``toksplice serve`` (this interpreter) on 127.0.0.1:``port``."""
    return [
        sys.executable,
        "-m",
        "app",
        "serve",
        "--upstream",
        upstream,
        "--tokenizer",
        str(tokenizer),
        "--model",
        model,
        "--port",
        str(port),
        "--log-level",
        "warning",
        *extra,
    ]


def standin_args(tokenizer_folder: Path, port: int, *extra: str) -> list[str]:
    """The command line of ``loadtest/standin_upstream.py`` on 127.0.0.1:``port``."""
    return [
        sys.executable,
        "loadtest/standin_upstream.py",
        "--tokenizer",
        str(tokenizer_folder),
        "--port",
        str(port),
        *extra,
    ]


def server_timing(headers: Mapping[str, str]) -> dict[str, float]:
    """The proxy's ``Server-Timing`` (``read``, ``parse``, ``render``, ``tokenize``, ``proxy``),
    in milliseconds; empty when the reply has none."""
    parts = (part.strip().split(";dur=") for part in headers.get("server-timing", "").split(","))
    return {part[0]: float(part[1]) for part in parts if len(part) == 2}
