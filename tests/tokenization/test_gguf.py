"""The GGUF reader, and SmolLM2's rebuilt tokenizer.json against llama.cpp's own ``/tokenize``.

SmolLM2 has no token for 21 bytes (among them the controls 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D and
the UTF-8 lead bytes 0xF1, 0xF2 of planes 4-11); ``MISSING_BYTE_TEXTS`` pin where llama.cpp
and a plain HF BPE part ways on them.

llama.cpp's ``parse_special`` decides whether the text of a control token (``<|im_start|>``)
becomes that token; HF's counterpart is ``encode_special_tokens`` (True = typed text stays
text). Both modes are compared on adversarial fragments, hypothesis text and agent transcripts.
"""

from __future__ import annotations

import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from random import Random

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.gguf_file import GGUFError, read_metadata, tokenizer_config_from_gguf
from app.tokenization.gguf import tokenizer_json_from_gguf
from app.tokenizer_spec import load_spec
from app.tools.local_upstream import LocalLlamaServer
from tests.adversarial import TRAPS, fragments

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from loadtest.agent_sessions import corpus  # noqa: E402

SMOLLM2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<file_sep>",
                    "<filename>", "<gh_stars>", "<jupyter_code>", "<empty_output>"]  # fmt: skip
MISSING_BYTE_TEXTS = ['"\x16:', "a\x04b", " \x16 ", "::\x06::", "x\x13\x14y", '"\x1d"',
                      "\U00050000", "a\U0004abcd\U000b0000b", "\x16\x16",
                      "<|im_end|>\x16:"]  # fmt: skip


# --- the reader, on small files written here -------------------------------------------------


def _string(text: str, order: str = "<") -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(order + "Q", len(raw)) + raw


def _gguf(pairs: list[tuple[str, int, bytes]], *, version: int = 3, order: str = "<") -> bytes:
    """A GGUF file with no tensors and ``(key, value type, encoded value)`` pairs."""
    head = b"GGUF" + struct.pack(order + "IQQ", version, 0, len(pairs))
    body = b"".join(_string(k, order) + struct.pack(order + "I", t) + v for k, t, v in pairs)
    return head + body


def _scalars(order: str) -> list[tuple[str, int, bytes]]:
    return [
        ("u8", 0, struct.pack(order + "B", 200)),
        ("i8", 1, struct.pack(order + "b", -5)),
        ("u16", 2, struct.pack(order + "H", 60000)),
        ("i16", 3, struct.pack(order + "h", -300)),
        ("u32", 4, struct.pack(order + "I", 4_000_000_000)),
        ("i32", 5, struct.pack(order + "i", -7)),
        ("f32", 6, struct.pack(order + "f", 0.5)),
        ("bool", 7, b"\x01"),
        ("str", 8, _string("héllo", order)),
        ("u64", 10, struct.pack(order + "Q", 2**63)),
        ("i64", 11, struct.pack(order + "q", -(2**40))),
        ("f64", 12, struct.pack(order + "d", 1e-5)),
        ("ints", 9, struct.pack(order + "IQ", 5, 3) + struct.pack(order + "3i", 1, -2, 3)),
        ("bools", 9, struct.pack(order + "IQ", 7, 2) + b"\x00\x01"),
        ("strs", 9, struct.pack(order + "IQ", 8, 2) + _string("a b", order) + _string("", order)),
        ("nested", 9, struct.pack(order + "IQIQ", 9, 1, 4, 1) + struct.pack(order + "I", 9)),
    ]


_EXPECTED = {"u8": 200, "i8": -5, "u16": 60000, "i16": -300, "u32": 4_000_000_000, "i32": -7,
             "f32": 0.5, "bool": True, "str": "héllo", "u64": 2**63, "i64": -(2**40),
             "f64": 1e-5, "ints": [1, -2, 3], "bools": [False, True], "strs": ["a b", ""],
             "nested": [[9]]}  # fmt: skip


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("version", [2, 3])
def test_reads_every_value_type(tmp_path: Path, order: str, version: int) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(_gguf(_scalars(order), version=version, order=order) + b"\0" * 64)
    assert read_metadata(path) == _EXPECTED


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"GGML" + bytes(20), "not a GGUF file"),
        (_gguf([], version=1), "version 1"),
        (_gguf([("k", 13, b"")]), "unknown GGUF value type 13"),
        (_gguf([("k", 8, struct.pack("<Q", 99) + b"short")]), "truncated"),
        (_gguf([("k", 8, _string("x"))])[:-3], "truncated"),
        (_gguf([("k", 8, struct.pack("<Q", 1) + b"\xff")]), "not UTF-8"),
    ],
)
def test_malformed_files_raise(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(GGUFError, match=message):
        read_metadata(path)


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="cannot read"):
        read_metadata(tmp_path / "none.gguf")


def test_rebuild_refuses_other_tokenizers(tmp_path: Path) -> None:
    path = tmp_path / "spm.gguf"
    path.write_bytes(_gguf([("tokenizer.ggml.model", 8, _string("llama"))]))
    with pytest.raises(GGUFError, match="not byte-level BPE"):
        tokenizer_json_from_gguf(path)


# --- SmolLM2's real GGUF ---------------------------------------------------------------------


def test_smollm2_metadata_without_tensor_data(assets: dict[str, Path], tmp_path: Path) -> None:
    gguf = assets["smollm2_gguf"]
    started = time.perf_counter()
    meta = read_metadata(gguf)
    assert time.perf_counter() - started < 2.0
    assert meta["general.architecture"] == "llama"
    assert meta["tokenizer.ggml.pre"] == "smollm"
    assert len(meta["tokenizer.ggml.tokens"]) == 49152
    assert len(meta["tokenizer.ggml.merges"]) == 48900
    assert meta["tokenizer.ggml.token_type"][:17] == [3] * 17
    head = tmp_path / "head.gguf"  # the first 4 MB: the metadata, none of the 93 MB of tensors
    with gguf.open("rb") as f:
        head.write_bytes(f.read(4 << 20))
    assert read_metadata(head) == meta


def test_smollm2_files_in_assets(smollm2_dir: Path) -> None:
    tokenizer = smollm2_dir / "tokenizer.json"
    assert tokenizer.read_text(encoding="utf-8") == tokenizer_json_from_gguf(
        smollm2_dir / "SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    config = tokenizer_config_from_gguf(smollm2_dir / "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert config["eos_token"] == "<|im_end|>"
    assert config["add_bos_token"] is False
    assert config["model_max_length"] == 8192
    assert "<|im_start|>" in config["chat_template"]


def test_spec_is_proven(smollm2_dir: Path) -> None:
    spec = load_spec(smollm2_dir / "tokenizer.json")
    assert spec.family == "gpt2_digits", spec.unproven_reason
    assert {t.content for t in spec.added_tokens} >= set(SMOLLM2_SPECIALS)


def test_chat_template_matches_the_server(
    llama_server: LocalLlamaServer, smollm2_dir: Path
) -> None:
    config = tokenizer_config_from_gguf(smollm2_dir / "SmolLM2-135M-Instruct.Q4_1.gguf")
    props = httpx.get(llama_server.url + "/props", timeout=10).json()
    assert props["chat_template"] == config["chat_template"]


@pytest.fixture(scope="module")
def tokenizers_by_mode(smollm2_dir: Path) -> dict[bool, Tokenizer]:
    """``parse_special -> Tokenizer``: False encodes the text of special tokens as text."""
    parsed = Tokenizer.from_file(str(smollm2_dir / "tokenizer.json"))
    literal = Tokenizer.from_file(str(smollm2_dir / "tokenizer.json"))
    literal.encode_special_tokens = True
    return {True: parsed, False: literal}


@pytest.fixture(scope="module")
def server_client(llama_server: LocalLlamaServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=llama_server.url, timeout=30) as client:
        yield client


def _assert_same(client: httpx.Client, tokenizers: dict[bool, Tokenizer], texts: list[str]) -> None:
    """Every text encodes to llama.cpp's ids in both ``parse_special`` modes."""
    for parse_special, tokenizer in tokenizers.items():
        want = [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
        for text, ids in zip(texts, want, strict=True):
            body = {"content": text, "add_special": False, "parse_special": parse_special}
            reply = client.post("/tokenize", json=body)
            reply.raise_for_status()
            assert reply.json()["tokens"] == ids, (parse_special, text)


@pytest.fixture(scope="module")
def adversarial_texts() -> list[str]:
    """The traps alone, in runs of 2, 3 and 7, and SmolLM2's special tokens among them."""
    windows = ["".join(TRAPS[i : i + k]) for k in (2, 3, 7) for i in range(len(TRAPS))]
    r = Random(7)
    specials = [
        "".join(r.choice([*SMOLLM2_SPECIALS, *TRAPS]) for _ in range(r.randint(2, 8)))
        for _ in range(150)
    ]
    return [*TRAPS, *windows, *SMOLLM2_SPECIALS, *MISSING_BYTE_TEXTS, *specials, "".join(TRAPS)]


@pytest.fixture(scope="module")
def agent_texts() -> list[str]:
    """Four 60K-character agent transcripts, and 400 slices of them at random places."""
    r = Random(11)
    texts: list[str] = []
    for seed in range(4):
        text = corpus(seed, 60_000)
        texts.append(text)
        for _ in range(100):
            start = r.randrange(len(text))
            texts.append(text[start : start + int(r.lognormvariate(5.5, 1.2))])
    return texts


def test_enough_texts(adversarial_texts: list[str], agent_texts: list[str]) -> None:
    total = len(adversarial_texts) + len(agent_texts) + HYPOTHESIS_EXAMPLES * HYPOTHESIS_BATCH
    assert total >= 1500


def test_adversarial_texts_match_llama_cpp(
    server_client: httpx.Client,
    tokenizers_by_mode: dict[bool, Tokenizer],
    adversarial_texts: list[str],
) -> None:
    _assert_same(server_client, tokenizers_by_mode, adversarial_texts)


def test_agent_session_texts_match_llama_cpp(
    server_client: httpx.Client, tokenizers_by_mode: dict[bool, Tokenizer], agent_texts: list[str]
) -> None:
    _assert_same(server_client, tokenizers_by_mode, agent_texts)


HYPOTHESIS_EXAMPLES, HYPOTHESIS_BATCH = 20, 40
_with_specials = st.lists(
    st.one_of(fragments, st.sampled_from([*SMOLLM2_SPECIALS, *MISSING_BYTE_TEXTS])), max_size=40
)


@settings(
    max_examples=HYPOTHESIS_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(_with_specials.map("".join), min_size=HYPOTHESIS_BATCH, max_size=HYPOTHESIS_BATCH))
def test_hypothesis_texts_match_llama_cpp(
    server_client: httpx.Client, tokenizers_by_mode: dict[bool, Tokenizer], texts: list[str]
) -> None:
    _assert_same(server_client, tokenizers_by_mode, texts)
