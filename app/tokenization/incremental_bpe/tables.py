"""All preprocessing in one place: tokenizer.json -> the flat int32 tables the C loop reads,
cached on disk under the SHA-256 of the tokenizer file."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.tokenization.incremental_bpe.automaton import build_automaton
from app.tokenization.incremental_bpe.forest import intervals, successor_children
from app.tokenization.incremental_bpe.search_trees import build_search_trees
from app.tokenization.incremental_bpe.vocabulary import ATOMS, normalize, read_model

FORMAT = "ibpe-1"
CACHE_ENV = "TOKSPLICE_IBPE_CACHE"
# The order the C engine expects (enum in _core.c).
NAMES = (
    "token_len", "successor_len", "low", "high", "order",
    "ac_first", "ac_label", "ac_target", "ac_fail", "ac_entry", "ac_depth", "root_next",
    "st_root", "st_token", "st_up", "st_first", "st_low", "st_high", "st_node",
    "out_first", "out_ids",
)  # fmt: skip

# ``dropped``: bytes without any id (the reference drops them; the engine's caller deletes them).
Tables = dict[str, npt.NDArray[np.int32] | npt.NDArray[np.uint8]]


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def default_cache_dir() -> Path:
    root = os.environ.get(CACHE_ENV)
    return Path(root) if root else Path.home() / ".cache" / "toksplice" / "incremental_bpe"


def build_tables(path: Path) -> Tables:
    vocabulary = normalize(read_model(path))
    children = successor_children(vocabulary)
    spans = intervals(vocabulary, children)
    automaton = build_automaton(vocabulary)
    trees = build_search_trees(vocabulary, automaton, spans)
    size = len(vocabulary.pieces)
    token_len = np.zeros(size + 1, dtype=np.int32)  # the last entry: the empty-prefix sentinel
    token_len[:size] = [len(piece) for piece in vocabulary.pieces]
    successor_len = np.zeros(size, dtype=np.int32)
    successor_len[ATOMS:] = token_len[np.asarray(vocabulary.suc[ATOMS:], dtype=np.int64)]
    order = np.append(spans.order, np.int32(-1))
    out_first = np.zeros(size + 1, dtype=np.int32)
    out_first[1:] = np.cumsum([len(ids) for ids in vocabulary.outputs])
    root = automaton.target[: automaton.first[1]]
    return {
        "token_len": token_len,
        "successor_len": successor_len,
        "low": spans.low,
        "high": spans.high,
        "order": order.astype(np.int32),
        "ac_first": automaton.first,
        "ac_label": automaton.label,
        "ac_target": automaton.target,
        "ac_fail": automaton.fail,
        "ac_entry": automaton.entry,
        "ac_depth": automaton.depth,
        "root_next": np.ascontiguousarray(root, dtype=np.int32),
        "st_root": trees.root,
        "st_token": trees.token,
        "st_up": trees.up,
        "st_first": trees.first,
        "st_low": trees.child_low,
        "st_high": trees.child_high,
        "st_node": trees.child_node,
        "out_first": out_first,
        "dropped": np.asarray(
            [b for b in range(ATOMS) if not vocabulary.outputs[b]], dtype=np.uint8
        ),
        "out_ids": np.fromiter(
            (i for ids in vocabulary.outputs for i in ids), dtype=np.int32, count=int(out_first[-1])
        ),
    }


def load_tables(path: Path, cache_dir: Path | None) -> tuple[str, Tables]:
    """The tables of a tokenizer file and its digest; read from / written to ``cache_dir``."""
    digest = file_digest(path)
    cached = cache_dir / f"{FORMAT}-{digest}.npz" if cache_dir is not None else None
    if cached is not None and cached.exists():
        with np.load(cached) as stored:
            return digest, {name: stored[name] for name in (*NAMES, "dropped")}
    tables = build_tables(path)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cached.parent, suffix=".npz", delete=False) as tmp:
            np.savez(tmp, **tables)  # type: ignore[arg-type]
        os.replace(tmp.name, cached)
    return digest, tables
