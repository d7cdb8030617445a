"""A Python child process spoken to over its stdin and stdout (the shadow verifier's checks,
the reference engine's long encodes): started running a module's ``child_main``, stopped by
closing its input."""

from __future__ import annotations

import contextlib
import subprocess
import sys

CLOSE_S = 10.0
"""How long ``stop`` waits for the child to finish its work in flight and exit before killing
it."""


def start(module: str) -> subprocess.Popen[bytes]:
    """``module.child_main()`` in a new interpreter, its stdin and stdout piped to us."""
    return subprocess.Popen(
        [sys.executable, "-c", f"from {module} import child_main; child_main()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )


def stop(child: subprocess.Popen[bytes], *, kill: bool = False) -> None:
    """Closes the child's input (its signal to exit, at once when ``kill``) and reaps it."""
    assert child.stdin is not None and child.stdout is not None
    if kill:
        child.kill()
    with contextlib.suppress(OSError):  # it may be gone already
        child.stdin.close()
    try:
        child.wait(CLOSE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    child.stdout.close()
