"""The command line as a user runs it: every subcommand's flags and environment variables (one
per field of its options' model, flags over environment over defaults), their ``--help``, bad
values refused with exit 2, the commands' exit codes, and ``serve`` and ``demo`` stop cleanly
on Ctrl-C."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.__main__ import TOOLS, AssetsOptions, DemoOptions, main, parse, serve_settings
from app.config import ENV_PREFIX, Settings
from app.tools import assets as app_assets
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
    "--strip-billing-line": (None, "strip_billing_line", "on"),
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
    "--gpu-cold-start": ("4000000", "gpu_cold_start", 4_000_000),
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
    assert (Settings().port, Settings().reasoning, Settings().tool_format) == (8000, True, "auto")
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


# --- the other subcommands ------------------------------------------------------------

# Every flag of ``toksplice demo / assets / explain / encode`` so far (README and docs name
# them), with a value where it takes one; ``FILE`` stands for an existing file.
TOOL_FLAGS: dict[str, dict[str, tuple[str | None, str, object]]] = {
    "demo": {
        "--port": ("7001", "port", 7001),
        "--threads": ("3", "threads", 3),
        "--context": ("4096", "context", 4096),
        "--once": (None, "once", True),
    },
    "assets": {"--dir": ("d", "dir", Path("d"))},
    "explain": {"--tokenizer": ("FILE", "tokenizer", Path("FILE"))},
    "encode": {
        "--tokenizer": ("FILE", "tokenizer", Path("FILE")),
        "--session": ("acme/s1", "session", "acme/s1"),
    },
}
TOOL_DEFAULTS: dict[str, dict[str, object]] = {
    "demo": {"port": 8000, "threads": 2, "context": 8192, "once": False},
    "assets": {"dir": Path(".assets")},
    "explain": {},
    "encode": {"session": "cli/session"},
}
REQUIRED = {"explain": {"--tokenizer": "FILE"}, "encode": {"--tokenizer": "FILE", "": "FILE"}}
"""What a command cannot run without (a flag and its value; "": a positional argument)."""


def _required(command: str, but: str | None = None) -> list[str]:
    given = {flag: value for flag, value in REQUIRED.get(command, {}).items() if flag != but}
    return [arg for flag, value in given.items() for arg in (flag, value) if arg]


@pytest.fixture(autouse=True)
def _no_tool_options_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, (model, _) in TOOLS.items():
        for field in model.model_fields:
            monkeypatch.delenv(f"{ENV_PREFIX}{name.upper()}_{field.upper()}", raising=False)


@pytest.fixture
def file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An existing file named FILE in the current folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("hello")
    return Path("FILE")


def _flag_cases() -> list[tuple[str, str]]:
    return [(name, flag) for name, flags in TOOL_FLAGS.items() for flag in flags]


@pytest.mark.parametrize(("command", "flag"), _flag_cases())
def test_every_tool_flag_keeps_its_name_and_meaning(command: str, flag: str, file: Path) -> None:
    value, field, want = TOOL_FLAGS[command][flag]
    given = [flag] if value is None else [flag, value]
    options = parse([command, *given, *_required(command, but=flag)])
    assert getattr(options, field) == want
    assert want != TOOL_DEFAULTS[command].get(field)


@pytest.mark.parametrize("command", TOOLS)
def test_tool_defaults(command: str, file: Path) -> None:
    options = parse([command, *_required(command)])
    assert {f: getattr(options, f) for f in TOOL_DEFAULTS[command]} == TOOL_DEFAULTS[command]
    assert set(TOOL_FLAGS[command]) | {"FILES"} >= {
        "--" + f.replace("_", "-") if f != "files" else "FILES" for f in type(options).model_fields
    }


@pytest.mark.parametrize(("command", "flag"), _flag_cases())
def test_every_tool_flag_has_an_environment_variable(
    command: str, flag: str, file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value, field, want = TOOL_FLAGS[command][flag]
    variable = f"{ENV_PREFIX}{command.upper()}_{field.upper()}"
    monkeypatch.setenv(variable, "true" if value is None else value)
    assert getattr(parse([command, *_required(command, but=flag)]), field) == want


def test_the_asset_folder_is_the_variable_the_tests_and_the_module_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert f"{ENV_PREFIX}ASSETS_DIR" == app_assets.ENV_VAR
    monkeypatch.setenv(app_assets.ENV_VAR, "from-env")
    for argv, want in ((["assets"], "from-env"), (["assets", "--dir", "from-flag"], "from-flag")):
        options = parse(argv)
        assert isinstance(options, AssetsOptions) and options.dir == Path(want)


def test_demo_port_is_the_serve_port_declaration() -> None:
    assert DemoOptions.model_fields["port"].metadata == Settings.model_fields["port"].metadata
    assert DemoOptions.model_fields["port"].default == Settings.model_fields["port"].default


@pytest.mark.parametrize("command", TOOLS)
def test_tool_help_lists_every_option_with_its_default_and_variable(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: toksplice {command} ")
    options = out.split("\noptions:\n", 1)[1]
    entries = {e.split()[0].rstrip(","): " ".join(e.split())
               for e in re.split(r"\n  (?=--)", options)}  # fmt: skip
    fields = [f for f in TOOLS[command][0].model_fields if f != "files"]
    assert set(entries) - {"-h"} == {"--" + f.replace("_", "-") for f in fields}
    for field in fields:
        entry = entries["--" + field.replace("_", "-")]
        assert "(default: " in entry or "(required)" in entry, entry
        assert f"[env: {ENV_PREFIX}{command.upper()}_{field.upper()}]" in entry, entry
    if command == "encode":
        assert "FILES" in out.split("\noptions:\n", 1)[0]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["demo", "--port", "70000"], ["port: ", "less than or equal to 65535"]),
        (["demo", "--threads", "0", "--context", "many"], ["threads: ", "context: "]),
        (["demo", "--threads", "two"], ["threads: ", "valid integer"]),
        (["explain"], ["tokenizer: Field required"]),
        (["explain", "--tokenizer", "missing.json"], ["tokenizer: ", "not point to a file"]),
        (["encode", "--tokenizer", "FILE", "FILE", "missing.txt"], ["files.1: ", "file"]),
        (["encode", "--tokenizer", "FILE"], ["required: FILES"]),
    ],
)
def test_bad_tool_values_are_refused_with_exit_2(
    argv: list[str], words: list[str], file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"toksplice {argv[0]}: error: " in err and all(w in err for w in words), err


def test_an_unknown_flag_is_refused_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["assets", "--directory", "d"])
    assert stop.value.code == 2
    assert "toksplice: error: unrecognized arguments: --directory d" in capsys.readouterr().err


def test_explain_prints_the_proof_and_exits_0(
    smollm2_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "--tokenizer", str(smollm2_dir / "tokenizer.json")]) == 0
    assert json.loads(capsys.readouterr().out)["proven"] is True


def test_encode_checks_every_file_against_the_reference_and_exits_0(
    smollm2_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "1.txt", tmp_path / "2.txt"
    first.write_text("Hello there, tokenizer.")
    second.write_text("Hello there, tokenizer. And a second turn.")
    argv = ["encode", "--tokenizer", str(smollm2_dir / "tokenizer.json"), str(first), str(second)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [str(first), str(second)]
    assert all(line.endswith(", exact") for line in lines)
    assert "reused=0" in lines[0] and "reused=0" not in lines[1]  # one growing session


def test_assets_reads_its_folder_from_the_variable_and_exits_0(
    assets_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    app_assets.fetch(assets_dir)  # already there: nothing below downloads
    monkeypatch.setattr(shutil, "which", lambda name: None)  # nor installs the agent CLIs
    monkeypatch.setenv(app_assets.ENV_VAR, str(assets_dir))
    assert main(["assets"]) == 0
    lines = dict(line.split(" ", 1) for line in capsys.readouterr().out.splitlines())
    assert Path(lines["smollm2"]).is_relative_to(assets_dir.resolve())


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


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["--strip-billing-line", "--dialect", "sglang"], "on"),
        (["--strip-billing-line", "off"], "off"),
        (["--strip-billing-line", "auto"], "auto"),
        ([], "auto"),
    ],
)
def test_a_former_switch_still_works_bare(argv: list[str], want: str) -> None:
    assert serve_settings(argv).strip_billing_line == want
