"""Other fast BPE encoders to measure ours against (``bench_cold_start.py --engines``).

Each peer is a pair of callables, ``one(text) -> ids`` (one thread; the ids in the form the
engine gives them) and ``many(texts) -> [ids]`` (its own parallel batch, or None when it has
none), or None when it is not installed or does not cover the tokenizer.  tiktoken (``pip
install tiktoken``) covers cl100k and o200k, read from the assets' ``tiktoken`` cache folder;
bpe-qwen (``pip install bpe-qwen==0.1.5``) covers Qwen3, loaded from its compiled module alone
(its package imports transformers) with the vocabulary and merges written out of the same
tokenizer.json.  fastokens (``pip install fastokens==0.3.5``, the backend vLLM and SGLang ship)
and gigatoken (``pip install gigatoken==0.10.0``) load the tokenizer.json itself (fastokens
refuses our cl100k and o200k files: "unsupported model type").  ``pip install -e '.[bench]'``
installs them all.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

Ids = Sequence[int] | npt.NDArray[np.int32]
"""A list, or (ours) an int32 array: each engine's ids in the form it gives them."""


class Peer(NamedTuple):
    one: Callable[[str], Ids]
    many: Callable[[list[str]], list[Ids]] | None


def tiktoken_peer(name: str, assets_dir: Path) -> Peer | None:
    if name not in ("cl100k", "o200k"):
        return None
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(assets_dir / "tiktoken"))
    try:
        import tiktoken
    except ImportError:
        return None
    encoding = tiktoken.get_encoding(f"{name}_base")
    cores = len(os.sched_getaffinity(0))
    return Peer(
        lambda text: encoding.encode(text, allowed_special="all"),
        lambda texts: encoding.encode_batch(texts, num_threads=cores, allowed_special="all"),
    )


def bpe_qwen_peer(name: str, tokenizer_json: Path) -> Peer | None:
    if name != "qwen3":
        return None
    spec = importlib.util.find_spec("bpe_qwen")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    compiled = next(folder.glob("bpe_qwen.cpython-*.so"), None)
    if compiled is None:
        return None
    loader = importlib.util.spec_from_file_location("bpe_qwen", compiled)
    assert loader is not None and loader.loader is not None
    module: Any = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    model = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "vocab.json").write_text(json.dumps(model["vocab"]), encoding="utf-8")
        merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
        Path(tmp, "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
        config = tokenizer_json.parent / "tokenizer_config.json"
        if config.exists():
            Path(tmp, config.name).write_bytes(config.read_bytes())
        tokenizer = module.QwenTokenizer(tmp)
    return Peer(tokenizer.encode, tokenizer.encode_batch_parallel)


def fastokens_peer(tokenizer_json: Path) -> Peer | None:
    try:
        import fastokens
    except ImportError:
        return None
    try:
        tokenizer = fastokens.Tokenizer.from_file(str(tokenizer_json))
    except ValueError:  # a model it does not cover
        return None

    def many(texts: list[str]) -> list[Ids]:
        flat, at = tokenizer.encode_batch_flat(texts, add_special_tokens=False)
        ids, offsets = np.frombuffer(flat, np.uint32), np.frombuffer(at, np.uint64)
        return [ids[a:b] for a, b in itertools.pairwise(offsets)]

    return Peer(lambda text: tokenizer.encode(text, add_special_tokens=False).ids, many)


def gigatoken_peer(tokenizer_json: Path) -> Peer | None:
    try:
        import gigatoken
    except ImportError:
        return None
    try:
        tokenizer = gigatoken.Tokenizer(tokenizer_json)
    except (RuntimeError, ValueError):  # a vocabulary it cannot map
        return None
    return Peer(tokenizer.encode, lambda texts: tokenizer.encode_batch_list(texts, parallel=True))
