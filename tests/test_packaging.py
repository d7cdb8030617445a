"""The package as users install it: the sdist and the wheel built from it, installed into a
fresh virtual environment away from the source tree, serve a chat call through the real
llama.cpp.  (An image that copied only some folders died at startup: ``gpu_kernels``.)

The package comes from the wheel alone; its dependencies from this environment's
site-packages (a ``.pth`` line, which adds the folder without running its ``.pth`` files, so
an editable install of the source tree stays out), which keeps the test off the network
apart from ``build``'s own isolated setuptools.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import time
import venv
import zipfile
from pathlib import Path

import httpx
import pytest

from app.tools.local_upstream import LocalLlamaServer
from tests.api.servers import closed_port_url
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.packaging


def _run(*args: str | Path, cwd: Path) -> str:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          check=False, timeout=300)
    assert proc.returncode == 0, f"{args}: {proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def installed(tmp: Path) -> Path:
    """Build the sdist and its wheel; install the wheel into a fresh venv; its python."""
    pytest.importorskip("build", reason="the build package is a dev dependency")
    dist = tmp / "dist"
    _run(sys.executable, "-m", "build", "--outdir", dist, REPO_ROOT, cwd=tmp)
    (wheel,) = dist.glob("toksplice-*.whl")
    assert list(dist.glob("toksplice-*.tar.gz")), "no sdist"
    assert "app/py.typed" in zipfile.ZipFile(wheel).namelist(), "the wheel lacks py.typed"
    env = tmp / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    _run(python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", wheel, cwd=tmp)
    own = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                    cwd=tmp).strip())
    (own / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def test_the_wheel_serves_a_chat_call(tmp_path: Path, llama_server: LocalLlamaServer,
                                      smollm2_dir: Path) -> None:
    python = installed(tmp_path)
    where = _run(python, "-c", "import app, gpu_kernels; print(app.__file__, gpu_kernels.__file__)",
                 cwd=tmp_path)
    assert all(p.startswith(str(tmp_path / "venv")) for p in where.split()), where
    port = closed_port_url().rsplit(":", 1)[1]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    serve = [python.parent / "toksplice", "serve", "--upstream", llama_server.url,
             "--tokenizer", smollm2_dir, "--model", "smollm2", "--port", port]
    proc = subprocess.Popen([str(a) for a in serve], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]
            assert time.monotonic() < deadline, "the installed proxy did not become ready"
            try:
                if httpx.get(url + "/health/ready").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        reply = httpx.post(url + "/v1/chat/completions", timeout=60, json={
            "model": "smollm2", "max_tokens": 8,
            "messages": [{"role": "user", "content": "Say hello."}]})
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"]
        assert int(reply.headers["x-toksplice-prompt-tokens"]) > 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
