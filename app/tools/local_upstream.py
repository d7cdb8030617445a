"""A real llama.cpp server on 127.0.0.1, run from a GGUF file in a child process.

``xllamacpp`` (a prebuilt llama.cpp server) has no command line of its own, so this module is
one: ``python -m app.tools.local_upstream --model PATH [--port N] ...`` serves until SIGTERM or
SIGINT, or until its parent dies, and prints ``listening URL`` on stdout once the model is
loaded (``--port 0`` lets llama.cpp pick a free port). ``LocalLlamaServer`` starts that child,
waits for ``/health``, and stops it (terminate, then kill). The server keeps llama.cpp's
defaults that matter here: Jinja chat templates (``/apply-template``), prompt caching, and
token-id prompts on ``/v1/completions``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import httpx

__all__ = ["LocalLlamaServer", "LocalUpstreamError", "main"]

_READY_LINE = "listening "
_TAIL_CHARS = 4000
_POLL_S = 0.05
_PARENT_CHECK_S = 1.0


class LocalUpstreamError(RuntimeError):
    """The local llama.cpp server could not start, or died."""


class LocalLlamaServer:
    """``python -m app.tools.local_upstream`` as a child process; a context manager.

    ``port=0`` lets llama.cpp pick a free port; ``url`` is known once ``start()`` returns.
    """

    def __init__(
        self,
        gguf: str | Path,
        *,
        port: int = 0,
        n_ctx: int = 8192,
        n_parallel: int = 2,
        threads: int = 1,
        start_timeout: float = 60.0,
    ) -> None:
        self.gguf = Path(gguf)
        self.port, self.n_ctx, self.n_parallel, self.threads = port, n_ctx, n_parallel, threads
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._files = ExitStack()  # the child's stdout and stderr files
        self._stdout: IO[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:38183`` (no trailing slash)."""
        if self._url is None:
            raise LocalUpstreamError("the local llama.cpp server is not started")
        return self._url

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> str:
        """Start the child and wait until ``/health`` is ok; return ``url``."""
        if self._proc is not None:
            raise LocalUpstreamError("the local llama.cpp server is already started")
        cmd = [sys.executable, "-m", __name__, "--model", str(self.gguf), "--port",
               str(self.port), "--n-ctx", str(self.n_ctx), "--n-parallel", str(self.n_parallel),
               "--threads", str(self.threads)]  # fmt: skip
        path = [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
        # Files, not pipes: nobody has to drain them, and stderr's tail explains a failed start.
        self._stdout = self._files.enter_context(tempfile.TemporaryFile())  # noqa: SIM115
        self._stderr = self._files.enter_context(tempfile.TemporaryFile())  # noqa: SIM115
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._stdout, stderr=self._stderr, env=env
        )
        try:
            self._url = self._wait_ready(self._proc, time.monotonic() + self.start_timeout)
        except BaseException:
            self.stop()
            raise
        return self._url

    def _wait_ready(self, proc: subprocess.Popen[bytes], deadline: float) -> str:
        url: str | None = None
        probe = "no address announced on stdout"  # what the last look found
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if (code := proc.poll()) is not None:
                    raise LocalUpstreamError(
                        f"llama.cpp server exited with code {code} while starting "
                        f"(model {self.gguf}); stderr tail:\n{self.stderr_tail()}"
                    )
                url = url or self._announced_url()
                if url is not None:
                    if (unready := _unready(client, url)) is None:
                        return url
                    probe = unready
                time.sleep(_POLL_S)
        raise LocalUpstreamError(
            f"llama.cpp server not ready after {self.start_timeout:.0f} s (model {self.gguf}; "
            f"last /health: {probe}); stderr tail:\n{self.stderr_tail()}"
        )

    def _announced_url(self) -> str | None:
        assert self._stdout is not None
        self._stdout.seek(0)
        for line in self._stdout.read().decode("utf-8", "replace").splitlines():
            if line.startswith(_READY_LINE):
                return line[len(_READY_LINE) :].strip().rstrip("/")
        return None

    def stderr_tail(self, chars: int = _TAIL_CHARS) -> str:
        """The last ``chars`` characters the child wrote to stderr."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(0, self._stderr.tell() - chars))
        return self._stderr.read().decode("utf-8", "replace")

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the child, kill it if it lingers past ``timeout``; idempotent."""
        proc, self._proc, self._url = self._proc, None, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._files.close()
        self._stdout = self._stderr = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _unready(client: httpx.Client, url: str) -> str | None:
    """None where ``/health`` answers 200, else what it answered or the error instead."""
    try:
        status = client.get(url + "/health").status_code
    except httpx.HTTPError as exc:
        return f"{url}: {type(exc).__name__}: {exc}"
    return None if status == 200 else f"status {status}"


def main(argv: list[str] | None = None) -> int:
    """Serve the GGUF with llama.cpp until SIGTERM / SIGINT or the parent's exit."""
    parser = argparse.ArgumentParser(prog="python -m app.tools.local_upstream", description=__doc__)
    parser.add_argument("--model", type=Path, required=True, help="GGUF file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--n-ctx", type=int, default=8192, help="context, shared by the slots")
    parser.add_argument("--n-parallel", type=int, default=2, help="parallel slots")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (also for batches)")
    args = parser.parse_args(argv)
    if not args.model.is_file():
        print(f"error: model file {args.model} does not exist", file=sys.stderr)
        return 2
    import xllamacpp  # optional dependency (dev / demo extras): imported by the child only

    params = xllamacpp.CommonParams()
    params.model.path = str(args.model)
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.n_ctx
    params.n_parallel = args.n_parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.use_jinja = True  # /apply-template and chat use the GGUF's Jinja template
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    # Block before llama.cpp starts its threads, so that they inherit the mask and the
    # signals reach sigtimedwait below.
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    parent = os.getppid()
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:  # llama.cpp logged the reason just before
        print(f"error: llama.cpp could not serve {args.model}: {exc}", file=sys.stderr)
        return 1
    print(_READY_LINE + str(server.listening_address), flush=True)
    while signal.sigtimedwait(stop_signals, _PARENT_CHECK_S) is None:
        if os.getppid() != parent:
            break
    del server  # joins llama.cpp's loop and HTTP threads
    return 0


if __name__ == "__main__":
    sys.exit(main())
