"""Telemetry settings from TOKSPLICE_* variables and ``toksplice serve`` flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.__main__ import serve_settings
from app.config import Settings


def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "TOKSPLICE_SHADOW_RATE": "0.25",
        "TOKSPLICE_SHADOW_QUEUE": "7",
        "TOKSPLICE_SHADOW_REPRO_DIR": "/tmp/r",
        "TOKSPLICE_SHADOW_DISABLE_ON_DIVERGENCE": "true",
        "TOKSPLICE_TRACING": "off",
        "TOKSPLICE_TRACE_CONSOLE": "1",
        "TOKSPLICE_TRACE_RING": "9",
        "TOKSPLICE_ADMIN_KEY": "k",
    }.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert (settings.shadow_rate, settings.shadow_queue) == (0.25, 7)
    assert settings.shadow_repro_dir == Path("/tmp/r") and settings.shadow_disable_on_divergence
    assert (settings.tracing, settings.trace_console, settings.trace_ring) == (False, True, 9)
    assert settings.admin_key == "k"


def test_defaults_and_flags() -> None:
    defaults = Settings()
    assert defaults.shadow_rate == 0.05 and defaults.tracing and not defaults.trace_console
    assert not defaults.shadow_disable_on_divergence and defaults.admin_key is None
    settings = serve_settings(
        ["--shadow-rate", "1", "--no-tracing", "--trace-console", "--trace-ring", "3",
         "--shadow-queue", "2", "--shadow-repro-dir", "r", "--shadow-disable-on-divergence",
         "--admin-key", "secret"]
    )  # fmt: skip
    assert (settings.shadow_rate, settings.tracing, settings.trace_console) == (1.0, False, True)
    assert (settings.trace_ring, settings.shadow_queue, settings.shadow_repro_dir) == (
        3, 2, Path("r"),
    )  # fmt: skip
    assert settings.shadow_disable_on_divergence and settings.admin_key == "secret"


@pytest.mark.parametrize("bad", [{"shadow_rate": 1.5}, {"shadow_queue": 0}, {"trace_ring": 0}])
def test_out_of_range_values_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Settings(**bad)
