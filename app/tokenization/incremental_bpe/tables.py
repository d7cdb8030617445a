"""All preprocessing in one place: tokenizer.json -> the flat int32 tables the C loop reads,
cached on disk under the SHA-256 of the tokenizer file."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.tokenization.incremental_bpe.automaton import build_automaton, transition_blocks
from app.tokenization.incremental_bpe.forest import intervals, successor_children
from app.tokenization.incremental_bpe.search_trees import build_search_trees
from app.tokenization.incremental_bpe.vocabulary import ATOMS, normalize, read_model

FORMAT = "ibpe-4"  # bump when the tables or their meaning change
CACHE_ENV = "TOKSPLICE_IBPE_CACHE"
# The arrays the C engine takes, in its order; records are rows (struct layouts in _core.c).
NAMES = (
    "tokens", "order", "ac_states", "ac_block_of", "ac_blocks", "st_nodes", "st_children",
    "out_first", "out_ids",
)  # fmt: skip

# ``dropped``: bytes without any id (the reference drops them; the engine's caller deletes them).
Tables = dict[str, npt.NDArray[np.int32] | npt.NDArray[np.uint8]]


def _rows(*columns: npt.NDArray[np.int32], width: int) -> npt.NDArray[np.int32]:
    """Records of ``width`` int32 fields from equal-length columns (missing fields are zero)."""
    table = np.zeros((len(columns[0]), width), dtype=np.int32)
    for i, column in enumerate(columns):
        table[:, i] = column
    return table


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
    # one more row: the empty-prefix sentinel (length 0, order -1, no interval)
    length = np.zeros(size + 1, dtype=np.int32)
    length[:size] = [len(piece) for piece in vocabulary.pieces]
    successor_length = np.zeros(size + 1, dtype=np.int32)
    successor_length[ATOMS:size] = length[np.asarray(vocabulary.suc[ATOMS:], dtype=np.int64)]
    low = np.append(spans.low, np.int32(-1))
    high = np.append(spans.high, np.int32(-1))
    order = np.append(spans.order, np.int32(-1)).astype(np.int32)
    search_root = trees.root[automaton.entry[1:]]
    ac_states = _rows(np.append(0, search_root), automaton.depth, width=2)
    block_of, blocks = transition_blocks(automaton)
    node_token = trees.token
    st_nodes = _rows(
        node_token,
        trees.up,
        trees.first[:-1],
        trees.first[1:],
        length[node_token],
        successor_length[node_token],
        low[node_token],
        high[node_token],
        width=8,
    )
    st_children = _rows(trees.child_low, trees.child_high, trees.child_node, width=4)
    out_first = np.zeros(size + 1, dtype=np.int32)
    out_first[1:] = np.cumsum([len(ids) for ids in vocabulary.outputs])
    return {
        "tokens": _rows(length, successor_length, low, high, width=4),
        "order": order,
        "ac_states": ac_states,
        "ac_block_of": block_of,
        "ac_blocks": blocks,
        "st_nodes": st_nodes,
        "st_children": st_children,
        "out_first": out_first,
        "out_ids": np.fromiter(
            (i for ids in vocabulary.outputs for i in ids), dtype=np.int32, count=int(out_first[-1])
        ),
        "dropped": np.asarray(
            [b for b in range(ATOMS) if not vocabulary.outputs[b]], dtype=np.uint8
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
        try:  # the cache only saves time: an unwritable directory is not an error
            cached.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=cached.parent, suffix=".npz", delete=False) as tmp:
                np.savez(tmp, **tables)  # type: ignore[arg-type]
            os.replace(tmp.name, cached)
            for stale in cached.parent.glob(f"ibpe-*-{digest}.npz"):  # older formats
                if stale != cached:
                    stale.unlink(missing_ok=True)
        except OSError:
            pass
    return digest, tables
