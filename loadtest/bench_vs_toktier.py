"""Per-call session encode: ours against toktier 0.3.0's, interleaved in one run.

    python loadtest/bench_vs_toktier.py [--sizes 100000,1000000] [--calls 40]
                                        [--toktier-venv .toktier-venv]

toktier runs in a virtual environment of its own, made with

    python3 -m venv .toktier-venv
    .toktier-venv/bin/pip install toktier==0.3.0 tokenizers==0.22.2 transformers==4.57.6

and this script starts that environment's python on itself (``--worker``): a child process
that answers one JSON object per line on stdin/stdout and times its own calls.  Without the
environment the script says so and exits 0.

For each size, one generated Qwen3 agent session (``loadtest/agent_sessions``, plain appends,
median append ~1.4K characters) is fed to both: ours, ``SessionTokenizer.encode`` of each
call's whole text under one session; toktier, ``Session.append_patch`` of what the call
appends (its session API takes the appended text).  Both start from a cold encode of the
first text of the size, a few calls warm them up, then ``--calls`` calls are timed, the two
taking turns going first, one at a time, each on one thread.  Every timed call's ids are
checked equal between the two (a digest of each side's int32 ids), and against the
reference on the last call of each size.
Both processes run pinned to one core (``--spread``: any core): a core left idle while the
other side's call runs wakes slowly, and the next call on it pays for that (printed first:
how much longer the same work takes after 3 ms of idle than back to back); on one shared core
neither side's core idles between its calls.
Printed per size: p50 and p99 of wall time and p50 of thread CPU time for both, toktier's
p50 over ours, and the p50 of toktier's engine call alone (``Tokenizer._encode_ids`` of the
whole text, what ``append_patch`` spends beside its own bookkeeping).

Offline staging: ``toktier.load("qwen3_8b")`` verifies three files against the digests its
shipped manifest pins: tokenizer.json (ours is that very file), config.json (written here
from the model's published configuration; it hashes to the pinned digest) and
tokenizer_config.json, whose pinned revision is not among our assets.  The worker gives
``load`` the shipped manifest's entry with that one file pinned to the digest of our
tokenizer_config.json instead (it declares the same added tokens as tokenizer.json), and
installs the three files with toktier's own artifact store (``ArtifactStore`` over a
``LocalDirectorySource``) under ``<venv>/toktier-home``; the hub is never reached.
"""

from __future__ import annotations

import argparse
import array
import hashlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

FAMILY = "qwen3_8b"
# Qwen/Qwen3-8B's config.json at the revision toktier pins, byte for byte (728 bytes).
QWEN3_8B_CONFIG = """{
  "architectures": [
    "Qwen3ForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 12288,
  "max_position_embeddings": 40960,
  "max_window_layers": 36,
  "model_type": "qwen3",
  "num_attention_heads": 32,
  "num_hidden_layers": 36,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}"""
# The generator's append sizes are heavy-tailed: a mean of 2300 gives a ~1.4K median.
_MEAN_APPEND = 2300
_WARM_CALLS = 5


# --- the toktier side (runs in toktier's own environment) -----------------------------------


def _toktier(home: Path, assets: Path) -> Any:
    """``toktier.load(FAMILY)`` on files staged offline from ``assets`` (module docstring)."""
    import hashlib

    os.environ["TOKTIER_HOME"] = str(home)
    os.environ["HF_HUB_OFFLINE"] = "1"
    import toktier
    from toktier.artifacts.manifest import ArtifactManifest
    from toktier.artifacts.sources import LocalDirectorySource
    from toktier.artifacts.store import ArtifactStore
    from toktier.artifacts.tables import ARTIFACT_MANIFEST

    staged = home / "staged" / FAMILY
    staged.mkdir(parents=True, exist_ok=True)
    (staged / "config.json").write_text(QWEN3_8B_CONFIG, encoding="utf-8")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (staged / name).write_bytes((assets / name).read_bytes())
    entry = json.loads(Path(ARTIFACT_MANIFEST).read_text(encoding="utf-8"))[FAMILY]
    sidecar = (staged / "tokenizer_config.json").read_bytes()
    files = {
        **entry["files"],
        "tokenizer_config.json": {
            "sha256": hashlib.sha256(sidecar).hexdigest(), "size": len(sidecar),
        },
    }  # fmt: skip
    manifest = ArtifactManifest.from_mapping(
        {FAMILY: {**entry, "files": files, "local_dir": str(staged)}}
    )
    ArtifactStore(manifest, source=LocalDirectorySource()).ensure(FAMILY)
    return toktier.load(FAMILY, manifest=manifest, device="cpu")


def _digest(int32s: bytes) -> str:
    """Of ids as int32 bytes: compared each call instead of the ids, which would fill both
    processes' caches and heaps with a Python list of every id between the timed calls."""
    return hashlib.sha256(int32s).hexdigest()


def worker(home: Path, assets: Path) -> None:
    """Answer JSON lines: open (a session, cold), append (timed), ids, explain."""
    import contextlib

    tok = _toktier(home, assets)
    engine = tok._encode_ids  # what Session.append_patch calls on the whole text
    inner = [0.0]

    def timed_engine(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return engine(*args, **kwargs)
        finally:
            inner[0] = time.perf_counter() - started

    tok._encode_ids = timed_engine
    sessions = contextlib.ExitStack()
    session: Any = None
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "open":
            session = sessions.enter_context(
                tok.session(session_id=request["session"], text=request["text"])
            )
            reply: dict[str, Any] = {"tokens": len(session.ids)}
        elif op == "append":
            cpu, wall = time.thread_time(), time.perf_counter()
            session.append_patch(request["text"])
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            reply = {"wall_ms": wall * 1e3, "cpu_ms": cpu * 1e3, "engine_ms": inner[0] * 1e3}
        elif op == "ids":  # a digest, not the list: ~250K Python ints per call at 1M
            reply = {"digest": _digest(array.array("i", session.ids).tobytes())}
        elif op == "explain":
            reply = {"explain": tok.explain(summary=True)}
        else:
            break
        print(json.dumps(reply, default=str), flush=True)
    sessions.close()


# --- our side --------------------------------------------------------------------------------


class Toktier:
    """The worker process, one request at a time."""

    def __init__(self, python: Path, home: Path, assets: Path) -> None:
        command = [str(python), str(Path(__file__).resolve()), "--worker", str(home), str(assets)]
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/"
        )
        if not self._read().get("ready"):
            raise SystemExit("toktier worker did not start")

    def ask(self, **request: Any) -> dict[str, Any]:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        return self._read()

    def _read(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise SystemExit(f"toktier worker exited ({self._process.wait()})")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({"op": "quit"}) + "\n")
        self._process.stdin.close()
        self._process.wait(timeout=60)


def _calls(size: int, count: int) -> list[str]:
    """``count`` + 1 successive call texts whose sizes straddle ``size`` characters."""
    from loadtest.agent_sessions import MARKUPS, session_calls

    stream = session_calls(
        size, MARKUPS["qwen3"], target_chars=size * 2 + 10**6, append_chars=_MEAN_APPEND
    )
    start = size - count * _MEAN_APPEND // 2
    texts: list[str] = []
    for text in stream:
        if texts or len(text) >= start:
            texts.append(text)
        if len(texts) > count:
            return texts
    raise SystemExit(f"the generated session ended before {count} calls past {size} chars")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_size(ours: Any, theirs: Toktier, size: int, calls: int) -> dict[str, Any]:
    import numpy as np

    texts = _calls(size, _WARM_CALLS + calls)
    sid = f"bench/vs-toktier-{size}"
    ours.encode(texts[0], session=sid)
    theirs.ask(op="open", session=sid, text=texts[0])
    timed: dict[str, dict[str, list[float]]] = {
        "ours": {"wall": [], "cpu": []},
        "toktier": {"wall": [], "cpu": [], "engine": []},
    }
    routes: dict[str, int] = {}
    for i, (previous, text) in enumerate(itertools.pairwise(texts)):
        if not text.startswith(previous):
            raise SystemExit("the generated session did not only append")
        for side in ("ours", "toktier") if i % 2 else ("toktier", "ours"):
            if side == "ours":
                cpu, wall = time.thread_time(), time.perf_counter()
                enc = ours.encode(text, session=sid)
                wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
                figures = {"wall": wall * 1e3, "cpu": cpu * 1e3}
            else:
                reply = theirs.ask(op="append", text=text[len(previous) :])
                figures = {k: reply[f"{k}_ms"] for k in ("wall", "cpu", "engine")}
            if i >= _WARM_CALLS:
                for kind, value in figures.items():
                    timed[side][kind].append(value)
        if _digest(np.asarray(enc.ids, dtype=np.int32).tobytes()) != theirs.ask(op="ids")["digest"]:
            raise SystemExit(f"ids differ at {len(text)} chars (call {i})")
        if i >= _WARM_CALLS:
            routes[enc.route] = routes.get(enc.route, 0) + 1
    reference = ours.reference.tokenizer.encode(texts[-1], add_special_tokens=False).ids
    if list(enc.ids) != reference:
        raise SystemExit(f"ids differ from the reference at {len(texts[-1])} chars")
    ours.forget(sid)
    row: dict[str, Any] = {"chars": statistics.median(map(len, texts[1:])), "routes": routes}
    for side, kinds in timed.items():
        for kind, values in kinds.items():
            row[f"{side}_{kind}_p50"] = statistics.median(values)
            row[f"{side}_{kind}_p99"] = _p(values, 0.99)
    return row


def idle_penalty(rounds: int = 200, idle_s: float = 0.003) -> float:
    """How much longer a fixed ~0.2 ms of Python work takes right after ``idle_s`` of sleep
    than back to back (median of ``rounds`` each): the cost of a core waking up."""

    def work() -> float:
        started = time.perf_counter()
        sum(i * i for i in range(20_000))
        return time.perf_counter() - started

    hot = statistics.median(work() for _ in range(rounds))
    woken = []
    for _ in range(rounds):
        time.sleep(idle_s)
        woken.append(work())
    return statistics.median(woken) / hot


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument(
        "--toktier-venv",
        type=Path,
        default=Path(os.environ.get("TOKTIER_VENV", ROOT / ".toktier-venv")),
    )
    parser.add_argument(
        "--spread",
        action="store_true",
        help="let the two processes run on any core (default: both pinned to one core)",
    )
    parser.add_argument("--worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    if not args.spread:  # (the worker, started later, inherits it)
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    python = args.toktier_venv / "bin" / "python"
    if not python.exists():
        print(f"skipped: no toktier environment at {args.toktier_venv} (see --help to make one)")
        return
    sys.path.insert(0, str(ROOT))
    from app.sessions import SessionTokenizer
    from app.tools import assets

    path = assets.fetch()["qwen3"]
    ours = SessionTokenizer.from_file(path)
    theirs = Toktier(python, args.toktier_venv / "toktier-home", path.parent)
    print(f"tokenizer: qwen3 ({path}); load average {os.getloadavg()[0]:.2f}", flush=True)
    print(f"this machine: work after 3 ms idle takes {idle_penalty():.2f}x as long as back to back")
    print(
        "| transcript chars (median) | ours p50 / p99 ms | toktier p50 / p99 ms "
        "| toktier p50 / ours p50 | CPU ms p50: ours, toktier | toktier engine p50 ms "
        "| our routes |"
    )
    print("|" + "---|" * 7)
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            r = run_size(ours, theirs, size, args.calls)
            print(
                f"| {r['chars']:,.0f} | {r['ours_wall_p50']:.2f} / {r['ours_wall_p99']:.2f} "
                f"| {r['toktier_wall_p50']:.2f} / {r['toktier_wall_p99']:.2f} "
                f"| {r['toktier_wall_p50'] / r['ours_wall_p50']:.2f}x "
                f"| {r['ours_cpu_p50']:.2f}, {r['toktier_cpu_p50']:.2f} "
                f"| {r['toktier_engine_p50']:.2f} | {r['routes']} |",
                flush=True,
            )
        path_taken = theirs.ask(op="explain")["explain"].get("last_execution_path")
    finally:
        theirs.close()
    print(f"toktier's last execution path: {path_taken}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
