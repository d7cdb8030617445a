"""Fixtures of the tokenization tests."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest

from app.tokenization.incremental_bpe import IncrementalBPE


@pytest.fixture(scope="session")
def incremental_bpe(
    assets: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], IncrementalBPE]:
    """``name -> IncrementalBPE`` for the assets, tables built once per test session."""
    cache = tmp_path_factory.mktemp("ibpe-cache")
    return functools.cache(lambda name: IncrementalBPE.from_file(assets[name], cache_dir=cache))
