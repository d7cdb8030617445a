"""The shadow verifier on real session repair: silent when ids are exact, and on any corrupted
id a divergence with its index, a reproduction, the session forgotten (and optionally repair
switched off), without ever blocking the caller."""

from __future__ import annotations

import dataclasses
import logging
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.config import Settings
from app.sessions import SessionTokenizer
from app.telemetry.metrics import Metrics
from app.telemetry.shadow import ShadowJob, ShadowVerifier
from app.tokenization import Encoding
from app.tokenization.engines import engine_at
from tests.adversarial import grown_texts

FAMILIES = ["qwen3", "llama3", "o200k", "smollm2"]


def verifier(tmp_path: Path, **options: object) -> tuple[ShadowVerifier, Metrics]:
    metrics = Metrics()
    defaults = {"shadow_rate": 1.0, "shadow_cpu": 1.0, "shadow_repro_dir": tmp_path / "repro"}
    config = Settings(**{**defaults, **options})
    return ShadowVerifier(config, metrics), metrics


def offer(shadow: ShadowVerifier, *check: Any) -> None:
    """One request through the verifier: drawn, and when drawn queued at once (as the service
    does once the ids are on their way upstream)."""
    queue_check = shadow.draw(*check)
    if queue_check is not None:
        queue_check()


def count(metrics: Metrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name)
    assert value is not None
    return value


@pytest.mark.parametrize("name", FAMILIES)
def test_exact_repairs_never_diverge(name: str, assets: dict[str, Path], tmp_path: Path) -> None:
    tok = SessionTokenizer.from_file(assets[name], window=64)
    shadow, metrics = verifier(tmp_path, shadow_queue=4096)  # checks every offer
    offered = 0

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(grown_texts())
    def run(versions: list[str]) -> None:
        nonlocal offered
        session = f"t/s{offered}"
        for text in versions:
            offer(shadow, tok, session, text, tok.encode(text, session=session), None)
            offered += 1

    run()
    shadow.close()
    routes = tok.explain()["counters"]
    assert routes.get("route:append", 0) + routes.get("route:edit", 0) > 0  # repair was used
    assert count(metrics, "toksplice_shadow_checks_total") == offered
    assert count(metrics, "toksplice_shadow_divergences_total") == 0
    assert not (tmp_path / "repro").exists()


@pytest.fixture(scope="module")
def qwen(assets: dict[str, Path]) -> SessionTokenizer:
    return SessionTokenizer.from_file(assets["qwen3"], window=64)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(grown_texts(), st.data())
def test_a_corrupted_id_is_caught_reproduced_and_forgotten(
    qwen: SessionTokenizer,
    tmp_path_factory: pytest.TempPathFactory,
    caplog: pytest.LogCaptureFixture,
    versions: list[str],
    data: st.DataObject,
) -> None:
    tok = qwen
    folder = tmp_path_factory.mktemp("shadow")
    shadow, metrics = verifier(folder)
    session = f"{folder.name}/conversation"  # a tenant of its own: nothing to repair from
    for text in versions[:-1]:
        tok.encode(text, session=session)
    text = versions[-1]
    exact = tok.encode(text, session=session)
    if not len(exact.ids):
        return
    k = data.draw(st.integers(0, len(exact.ids) - 1))
    ids = exact.ids.copy()
    ids[k] = (ids[k] + 1) % tok.reference.tokenizer.get_vocab_size()
    caplog.clear()  # one fixture for every example
    with caplog.at_level(logging.ERROR, logger="toksplice.shadow"):
        offer(shadow, tok, session, text, dataclasses.replace(exact, ids=ids), None)
        shadow.close()
    assert count(metrics, "toksplice_shadow_divergences_total") == 1
    [repro_file] = (folder / "repro").iterdir()
    repro = orjson.loads(repro_file.read_bytes())
    assert repro["first_index"] == k
    assert repro["text"] == text
    assert repro["expected"] == exact.ids.tolist() and repro["actual"] == ids.tolist()
    assert repro["tokenizer"]["family"] == tok.spec.family
    assert len(repro["tokenizer"]["sha256"]) == 64
    [line] = [r.getMessage() for r in caplog.records if "divergence" in r.getMessage()]
    event = orjson.loads(line.split(" ", 3)[3])
    assert event["first_index"] == k and event["session_forgotten"]
    engine = engine_at(exact.engines, k)  # the divergence names the engine of the wrong id
    assert engine is not None and event["engine"] == repro["engine"] == engine
    assert [tuple(run.values()) for run in repro["engines"]] == list(exact.engines)
    assert len(text) < 8 or text not in line  # the log carries no content
    assert tok.encode(text, session=session).route == "full"  # the session was forgotten


def test_divergence_can_switch_the_family_to_full_encodes(
    assets: dict[str, Path], tmp_path: Path
) -> None:
    tok = SessionTokenizer.from_file(assets["smollm2"])
    shadow, metrics = verifier(tmp_path, shadow_disable_on_divergence=True)
    text = "a conversation that will grow " * 20
    exact = tok.encode(text, session="t/a")
    assert tok.encode(text + " and grows", session="t/a").route == "append"
    offer(shadow, tok, "t/a", text, dataclasses.replace(exact, ids=exact.ids[:-1]), None)
    shadow.close()
    assert count(metrics, "toksplice_shadow_divergences_total") == 1
    tok.encode("another session " * 20, session="t/b")
    other = tok.encode("another session " * 20 + "grown", session="t/b")
    assert (other.route, other.fallback) == ("full", "shadow verifier divergence")


def test_a_full_queue_drops_and_counts_never_blocks(
    assets: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tok = SessionTokenizer.from_file(assets["smollm2"])
    release = threading.Event()
    checked = ShadowVerifier._check

    def slow_check(self: ShadowVerifier, job: ShadowJob) -> None:
        release.wait(10)
        checked(self, job)

    monkeypatch.setattr(ShadowVerifier, "_check", slow_check)
    shadow, metrics = verifier(tmp_path, shadow_queue=1)
    encoding: Encoding = tok.encode("hello world", session="t/q")
    for _ in range(10):
        offer(shadow, tok, "t/q", "hello world", encoding, None)
    release.set()
    shadow.close()
    drops = count(metrics, "toksplice_shadow_drops_total")
    assert drops >= 8  # one check in the worker, one queued, the rest dropped
    assert drops + count(metrics, "toksplice_shadow_checks_total") == 10


def test_sampling_follows_the_rate(assets: dict[str, Path], tmp_path: Path) -> None:
    tok = SessionTokenizer.from_file(assets["smollm2"])
    shadow, metrics = verifier(tmp_path, shadow_rate=0.05, shadow_queue=4096)
    encoding = tok.encode("hi", session="t/r")
    for _ in range(4000):
        offer(shadow, tok, "t/r", "hi", encoding, None)
    shadow.close()
    assert 120 <= count(metrics, "toksplice_shadow_checks_total") <= 280  # 200 expected


def test_the_worker_rests_in_proportion_to_its_checks(
    assets: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``shadow_cpu`` 0.25 a check of t seconds is followed by a rest of 3t."""
    tok = SessionTokenizer.from_file(assets["smollm2"])
    clock = iter([10.0, 12.0, 20.0, 20.5])  # two checks: 2 s and 0.5 s
    metrics = Metrics()
    settings = Settings(shadow_rate=1.0, shadow_cpu=0.25, shadow_repro_dir=tmp_path / "repro")
    shadow = ShadowVerifier(settings, metrics, clock=lambda: next(clock))
    rests: list[float] = []
    monkeypatch.setattr(shadow, "_closing", SimpleNamespace(wait=rests.append, set=lambda: None))
    encoding = tok.encode("hello world", session="t/c")
    offer(shadow, tok, "t/c", "hello world", encoding, None)
    offer(shadow, tok, "t/c", "hello world", encoding, None)
    shadow.close()
    assert count(metrics, "toksplice_shadow_checks_total") == 2
    assert rests == [6.0, 1.5]


def test_close_finishes_the_queue_without_resting(assets: dict[str, Path], tmp_path: Path) -> None:
    """A verifier that would rest a thousand times each check's length still finishes what
    is queued as soon as it is closed."""
    tok = SessionTokenizer.from_file(assets["smollm2"])
    shadow, metrics = verifier(tmp_path, shadow_cpu=0.001, shadow_queue=64)
    encoding = tok.encode("hello world " * 200, session="t/d")
    for _ in range(5):
        offer(shadow, tok, "t/d", "hello world " * 200, encoding, None)
    shadow.close()
    assert count(metrics, "toksplice_shadow_checks_total") == 5


def test_a_bounded_close_drops_what_it_cannot_finish(
    assets: dict[str, Path], tmp_path: Path
) -> None:
    """A shutdown does not wait for a full queue of long checks: after ``timeout_s`` the rest
    is dropped and counted, the running check cut short, the child stopped."""
    tok = SessionTokenizer.from_file(assets["qwen3"])
    shadow, metrics = verifier(tmp_path, shadow_queue=8)
    text = "a long prompt to check, again and again " * 8000
    encoding = tok.encode(text, session="t/e")
    for _ in range(8):
        offer(shadow, tok, "t/e", text, encoding, None)
    shadow.close(timeout_s=0.2)
    checks = count(metrics, "toksplice_shadow_checks_total")
    drops = count(metrics, "toksplice_shadow_drops_total")
    assert checks + drops == 8 and drops >= 1
    assert shadow._oracle.pid is None  # no child left behind


@pytest.mark.parametrize("mode", [0o777, 0o700])
def test_an_existing_repro_folder_is_never_written_into(
    assets: dict[str, Path], tmp_path: Path, mode: int
) -> None:
    """Reproductions hold prompt text: a folder someone made before (world-readable, or
    private but not this process's) gets none; a fresh 0700 folder beside it does."""
    existing = tmp_path / "repro"
    existing.mkdir()
    existing.chmod(mode)
    tok = SessionTokenizer.from_file(assets["smollm2"])
    shadow, metrics = verifier(tmp_path)
    exact = tok.encode("some prompt text " * 8, session="t/r")
    for _ in range(2):  # both land in the same fresh folder
        offer(shadow, tok, "t/r", "some prompt text " * 8, dataclasses.replace(
            exact, ids=exact.ids[:-1]), None)  # fmt: skip
    shadow.close()
    assert count(metrics, "toksplice_shadow_divergences_total") == 2
    assert list(existing.iterdir()) == []
    [fresh] = [p for p in tmp_path.iterdir() if p != existing]
    assert fresh.name.startswith("repro-") and fresh.stat().st_mode & 0o777 == 0o700
    assert len(list(fresh.iterdir())) >= 1
