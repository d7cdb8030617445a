"""The real agent CLIs through the proxy for a session of N turns: the calls they make, the
routes those take, and the proxy-added time of their continuation calls.

    python loadtest/agent_clis.py [--turns 10] [--clients claude,codex]

Each client runs non-interactively (``claude -p`` then ``claude -p --continue``; ``codex exec``
then ``codex exec resume --last``) against ``toksplice serve`` in front of the scripted Qwen3
stand-in of the agent tests, configured as the README says; every third turn asks for a shell
command, which the stand-in answers with a tool call (so that turn makes two model calls).  It
prints, per client, the HTTP calls by method and path, the routes of the model calls, and the
p50 / max of the ``proxy`` part of ``Server-Timing`` (request in -> upstream request out) over
the continuation calls (every model call but the first), and the p50 of each part; then the
same figures for the session's model calls sent again byte for byte, one after another, with
no CLI running beside the proxy (the first of them rewinds the session, the rest append).  The
CLIs come from the asset cache (``toksplice assets``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.tools import assets
from loadtest.processes import server_timing
from tests.agents.harness import (
    Call,
    Stack,
    claude_env,
    codex_env,
    replay,
    scripted,
    stack,
    tool_call,
)

_MODEL_PATHS = ("/v1/messages", "/v1/responses")


def _command(client: str, cli: Path, turn: int) -> list[str]:
    prompt = f"Turn {turn}: " + ("run the check" if turn % 3 == 0 else "say something")
    if client == "claude":
        return [str(cli), "-p", *(["--continue"] if turn > 1 else []), prompt,
                "--allowedTools", "Bash"]  # fmt: skip
    resume = ["resume", "--last"] if turn > 1 else []
    return [str(cli), "exec", "--skip-git-repo-check", *resume, prompt]


def _script(client: str) -> list[tuple[str, str]]:
    call = (tool_call("Bash", {"command": "echo checked", "description": "Check"})
            if client == "claude" else tool_call("exec_command", {"cmd": "echo checked"}))
    return [("<tool_response>", "The check passed."), ("run the check", call)]


def session(client: str, cli: Path, served: Stack, turns: int, home: Path) -> list[Call]:
    """``turns`` runs of the CLI in one session; every call each made."""
    env = (claude_env if client == "claude" else codex_env)(home, served.url)
    work = home / "work"
    work.mkdir()
    served.script.append(scripted(_script(client), default="Noted."))
    calls: list[Call] = []
    for turn in range(1, turns + 1):
        done = subprocess.run(_command(client, cli, turn), env=env, cwd=work, text=True,
                              capture_output=True, timeout=300, stdin=subprocess.DEVNULL,
                              check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{client} turn {turn} failed: {done.stderr[-2000:]}")
        calls += served.take()[0]
    return calls


def report(client: str, calls: list[Call]) -> str:
    paths = Counter(f"{c.method} {c.path} {c.status}" for c in calls)
    model = [c for c in calls if c.path.split("?")[0] in _MODEL_PATHS]
    routes = Counter(c.route for c in model)
    timings = [server_timing(c.reply_headers) for c in model[1:]]
    proxy_ms = [t.get("proxy", 0.0) for t in timings]
    lines = [f"{client}: {len(calls)} HTTP calls, {len(model)} model calls"]
    lines += [f"  {n:3d} x {path}" for path, n in sorted(paths.items())]
    lines.append("  routes: " + ", ".join(f"{r} {n}" for r, n in routes.most_common()))
    if proxy_ms:
        lines.append(f"  continuation calls: proxy-added p50 {statistics.median(proxy_ms):.2f} ms, "
                     f"max {max(proxy_ms):.2f} ms (n={len(proxy_ms)}); last prompt "
                     f"{model[-1].reply_headers.get('x-toksplice-prompt-tokens')} tokens")
        parts = {name: statistics.median(t.get(name, 0.0) for t in timings) for name in timings[0]}
        lines.append("  p50 by part: " + ", ".join(f"{k} {v:.2f} ms" for k, v in parts.items()))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--clients", default="claude,codex")
    parser.add_argument("--assets", type=Path, default=None, help="asset cache (.assets)")
    args = parser.parse_args()
    folder = assets.fetch(args.assets)["qwen3"].parent
    clis = assets.agents(args.assets)
    for client in args.clients.split(","):
        with stack(folder) as served, tempfile.TemporaryDirectory() as home:
            calls = session(client, clis[client], served, args.turns, Path(home))
            print(report(client, calls), flush=True)
            model = [c for c in calls if c.path.split("?")[0] in _MODEL_PATHS]
            print(report(f"{client}, replayed", replay(served.front.target, model)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
