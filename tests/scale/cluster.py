"""Replicas for tests: N ``toksplice serve`` processes sharing one Redis behind a real nginx
running ``deploy/nginx.conf`` (with its includes written for the test's ports)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from loadtest.processes import serve_args, wait_healthy
from tests.services import binary, free_port

REPO = Path(__file__).resolve().parents[2]
AFFINITY = (REPO / "deploy" / "toksplice-balance.conf").read_text()
ROUND_ROBIN = ""


class Cluster:
    """``replicas`` proxies (replica k sends ``Authorization: Bearer replica-k`` upstream, so the
    upstream can tell who called) and nginx in front with ``balance`` as its balance include."""

    def __init__(
        self,
        workdir: Path,
        *,
        upstream: str,
        tokenizer: Path,
        store: str,
        replicas: int = 3,
        balance: str = AFFINITY,
    ) -> None:
        self.workdir = workdir
        self.ports = [free_port() for _ in range(replicas)]
        self.url = f"http://127.0.0.1:{free_port()}"
        self._procs: list[subprocess.Popen[bytes] | None] = []
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        for k, port in enumerate(self.ports):
            args = serve_args(
                upstream,
                tokenizer,
                "m",
                port,
                "--store",
                store,
                "--upstream-api-key",
                f"replica-{k}",
                "--no-alignment-check",
            )
            self._procs.append(subprocess.Popen(args, env=env, cwd=REPO))
        try:
            for port in self.ports:
                wait_healthy(f"http://127.0.0.1:{port}/health", self._running(), "a replica")
            self._nginx = self._start_nginx(balance)
        except BaseException:
            self.stop()
            raise

    def kill(self, replica: int) -> None:
        """SIGKILL: no shutdown, no flush of queued writes."""
        proc = self._procs[replica]
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        self._procs[replica] = None

    def _running(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self._procs if p is not None]

    def stop(self) -> None:
        nginx = getattr(self, "_nginx", None)
        for proc in [*self._procs, nginx]:
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def _start_nginx(self, balance: str) -> subprocess.Popen[bytes]:
        conf = self.workdir / "nginx"
        (conf / "logs").mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "deploy" / "nginx.conf", conf / "nginx.conf")
        (conf / "toksplice-balance.conf").write_text(balance)
        (conf / "toksplice-replicas.conf").write_text(
            "".join(f"server 127.0.0.1:{p} max_fails=1 fail_timeout=30s;\n" for p in self.ports)
        )
        port = self.url.rsplit(":", 1)[1]
        (conf / "toksplice-listen.conf").write_text(f"listen 127.0.0.1:{port};\n")
        user = "user root;" if os.geteuid() == 0 else ""  # temp files for large bodies
        proc = subprocess.Popen(
            [
                binary("nginx"),
                "-p",
                str(conf),
                "-c",
                str(conf / "nginx.conf"),
                "-g",
                f"daemon off; pid {conf / 'nginx.pid'}; error_log stderr error; {user}",
            ]
        )
        wait_healthy(self.url + "/health/live", [proc, *self._running()], "nginx")
        return proc
