"""The command line as a user runs it: ``serve``'s flags and environment variables (one per
``Settings`` field, flags over environment over defaults), and ``serve`` and ``demo`` stop
cleanly on Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.__main__ import main, serve_settings
from app.config import ENV_PREFIX, Settings
from tests.api.servers import StubUpstream, closed_port_url

# Every ``toksplice serve`` flag of the releases so far, with a value where it takes one: each
# keeps its name and meaning.
FLAGS: dict[str, tuple[str | None, str, object]] = {
    "--upstream": ("http://u:1", "upstream", "http://u:1"),
    "--tokenizer": ("t.json", "tokenizer", Path("t.json")),
    "--chat-template": ("c.jinja", "chat_template", Path("c.jinja")),
    "--dialect": ("sglang", "dialect", "sglang"),
    "--model": ("m", "model", "m"),
    "--upstream-model": ("um", "upstream_model", "um"),
    "--upstream-api-key": ("uk", "upstream_api_key", "uk"),
    "--host": ("0.0.0.0", "host", "0.0.0.0"),
    "--port": ("7001", "port", 7001),
    "--max-body-bytes": ("2048", "max_body_bytes", 2048),
    "--read-timeout": ("3.5", "read_timeout", 3.5),
    "--store-bytes": ("4096", "store_bytes", 4096),
    "--tool-format": ("none", "tool_format", None),
    "--no-reasoning": (None, "reasoning", False),
    "--strip-billing-line": (None, "strip_billing_line", True),
    "--no-alignment-check": (None, "alignment_check", False),
    "--store": ("redis://r:6379/0", "store", "redis://r:6379/0"),
    "--store-ttl": ("9", "store_ttl", 9.0),
    "--redis-timeout": ("0.5", "redis_timeout", 0.5),
    "--api-keys-file": ("k.json", "api_keys_file", Path("k.json")),
    "--client-timeout": ("7", "client_timeout", 7.0),
    "--header-timeout": ("2", "header_timeout", 2.0),
    "--keep-alive-timeout": ("3", "keep_alive_timeout", 3.0),
    "--no-tracing": (None, "tracing", False),
    "--trace-console": (None, "trace_console", True),
    "--trace-ring": ("5", "trace_ring", 5),
    "--shadow-rate": ("0.5", "shadow_rate", 0.5),
    "--shadow-cpu": ("0.5", "shadow_cpu", 0.5),
    "--shadow-queue": ("2", "shadow_queue", 2),
    "--shadow-repro-dir": ("r", "shadow_repro_dir", Path("r")),
    "--shadow-disable-on-divergence": (None, "shadow_disable_on_divergence", True),
    "--admin-key": ("ak", "admin_key", "ak"),
    "--gpu-cold-start": ("0", "gpu_cold_start", 0),
    "--parallel-chunk": ("0", "parallel_chunk", 0),
    "--cpu-encoder": ("reference", "cpu_encoder", "reference"),
    "--log-level": ("debug", "log_level", "debug"),
}


@pytest.mark.parametrize("flag", FLAGS)
def test_every_flag_keeps_its_name_and_meaning(flag: str) -> None:
    value, field, want = FLAGS[flag]
    settings = serve_settings([flag] if value is None else [flag, value])
    assert getattr(settings, field) == want != getattr(Settings(), field)


def test_flags_win_over_the_environment_which_wins_over_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (Settings().port, Settings().reasoning, Settings().tool_format) == (8000, True, "hermes")
    monkeypatch.setenv("TOKSPLICE_PORT", "9001")
    monkeypatch.setenv("TOKSPLICE_REASONING", "false")
    monkeypatch.setenv("TOKSPLICE_TOOL_FORMAT", "none")
    monkeypatch.setenv("TOKSPLICE_READ_TIMEOUT", "30")
    from_env = serve_settings([])
    assert (from_env.port, from_env.reasoning, from_env.tool_format) == (9001, False, None)
    assert from_env.timeouts.read == 30
    flags = serve_settings(["--port", "9002", "--reasoning", "--tool-format", "qwen3_coder"])
    assert (flags.port, flags.reasoning, flags.tool_format) == (9002, True, "qwen3_coder")
    assert flags.read_timeout == 30  # no flag: the environment's


def test_every_setting_has_an_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, field, want in FLAGS.values():
        if value is None:  # a boolean flag: the environment spells the value
            value = str(want).lower()
        monkeypatch.setenv(ENV_PREFIX + field.upper(), value)
    settings = Settings()
    assert {field: getattr(settings, field) for _, field, _ in FLAGS.values()} == {
        field: want for _, field, want in FLAGS.values()
    }


def test_help_lists_every_setting_with_its_default_and_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["serve", "--help"])
    assert stop.value.code == 0
    options = capsys.readouterr().out.split("\noptions:\n", 1)[1]
    split = re.split(r"\n  (?=--)", options)
    entries = {e.split()[0].rstrip(","): " ".join(e.split()) for e in split}
    assert set(entries) - {"-h"} == {"--" + f.replace("_", "-") for f in Settings.model_fields}
    for field in Settings.model_fields:
        entry = entries["--" + field.replace("_", "-")]
        assert "(default: " in entry and f"[env: {ENV_PREFIX}{field.upper()}]" in entry, entry


def test_keys_stay_out_of_the_settings_repr() -> None:
    settings = serve_settings(["--admin-key", "a-secret", "--upstream-api-key", "u-secret"])
    assert (settings.admin_key, settings.upstream_api_key) == ("a-secret", "u-secret")
    assert "secret" not in repr(settings)


def test_a_bad_value_is_refused_with_the_settings_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["serve", "--shadow-rate", "2", "--dialect", "ollama"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "toksplice serve: error: " in err and "shadow_rate" in err and "dialect" in err


@pytest.mark.parametrize("command", ["serve", "demo"])
def test_ctrl_c_stops_without_a_traceback(command: str, smollm2_dir: Path) -> None:
    port = closed_port_url().rsplit(":", 1)[1]
    with StubUpstream().serve() as upstream:
        args = [sys.executable, "-m", "app", command, "--port", port]
        if command == "serve":
            args += ["--upstream", upstream, "--tokenizer", str(smollm2_dir), "--model", "m"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health/live").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, "did not start"
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0
    assert b"Traceback" not in err and b"Shutting down" in err
