"""The converted cl100k / o200k / GPT-2 ``tokenizer.json`` files encode exactly like tiktoken.

tiktoken's reference encodings are built by tiktoken's own constructors (``tiktoken_ext.
openai_public``) from the fetched files, which also checks their SHA-256. Every compared text gets
a non-space terminator: tiktoken >= 0.8 splits trailing whitespace at the end of a text into
other pieces than HF (``\\s++$``), and that documented difference is not what is tested here;
the bare text is compared too when it does not end in whitespace.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiktoken import load as tiktoken_load
from tiktoken_ext import openai_public  # type: ignore[import-untyped]
from tokenizers import Tokenizer

from app.byte_level import bytes_to_unicode
from app.tools import assets as app_assets
from app.tools import converters

NAMES = ("cl100k", "o200k", "gpt2")
TERMINATOR = "x"
SPECIAL_TOKENS = {
    "cl100k": converters.CL100K_SPECIAL_TOKENS,
    "o200k": converters.O200K_SPECIAL_TOKENS,
    "gpt2": converters.GPT2_SPECIAL_TOKENS,
}


@contextmanager
def _tiktoken_cache(folder: Path) -> Iterator[None]:
    with mock.patch.dict(os.environ, {"TIKTOKEN_CACHE_DIR": str(folder)}):
        yield


@pytest.fixture(scope="session")
def constructors(
    assets_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    """tiktoken's own constructor output (pattern, ranks, special tokens) for each encoding."""
    raw = app_assets.sources(assets_dir)
    # The rank files carry tiktoken's cache names, so its constructors read them offline.
    with _tiktoken_cache(raw["cl100k_ranks"].parent):
        out = {"cl100k": openai_public.cl100k_base(), "o200k": openai_public.o200k_base()}
    real = tiktoken_load.data_gym_to_mergeable_bpe_ranks

    def local_gpt2(**kw: Any) -> dict[bytes, int]:
        kw.update(vocab_bpe_file=str(raw["gpt2_vocab"]), encoder_json_file=str(raw["gpt2_encoder"]))
        return real(**kw)  # hashes are still checked against tiktoken's pins

    with (
        _tiktoken_cache(tmp_path_factory.mktemp("tiktoken-cache")),
        mock.patch.object(openai_public, "data_gym_to_mergeable_bpe_ranks", local_gpt2),
    ):
        out["gpt2"] = openai_public.gpt2()
    return out


@pytest.fixture(scope="session")
def engines(
    constructors: dict[str, dict[str, Any]], reference: Callable[[str], Tokenizer]
) -> dict[str, tuple[Tokenizer, tiktoken.Encoding]]:
    return {name: (reference(name), tiktoken.Encoding(**constructors[name])) for name in NAMES}


def _check(hf: Tokenizer, tt: tiktoken.Encoding, text: str) -> None:
    """Same ids as tiktoken (special tokens allowed) and exact decode round trips."""
    texts = [text + TERMINATOR]
    if text and not text[-1].isspace():  # no trailing whitespace: no documented difference
        texts.append(text)
    for sample in texts:
        want = tt.encode(sample, allowed_special="all")
        got = hf.encode(sample, add_special_tokens=False).ids
        assert got == want, f"{sample!r}"
        assert hf.decode(got, skip_special_tokens=False) == sample
        assert tt.decode(want) == sample


# --- structure -----------------------------------------------------------------------------


def test_special_tokens_match_tiktoken(
    constructors: dict[str, dict[str, Any]], engines: dict[str, tuple[Tokenizer, Any]]
) -> None:
    for name in NAMES:
        assert dict(SPECIAL_TOKENS[name]) == constructors[name]["special_tokens"]
        hf, tt = engines[name]
        for text, token_id in SPECIAL_TOKENS[name].items():
            assert hf.token_to_id(text) == token_id == tt.encode_single_token(text)
            assert hf.id_to_token(token_id) == text
            assert hf.encode(text).ids == [token_id]
            assert hf.encode(f"a{text}b").ids == tt.encode(f"a{text}b", allowed_special="all")
            assert hf.decode([token_id], skip_special_tokens=False) == text


def test_patterns(constructors: dict[str, dict[str, Any]], assets: dict[str, Path]) -> None:
    # tiktoken's o200k pattern has no possessives: HF takes it as is.
    assert constructors["o200k"]["pat_str"] == converters.O200K_PATTERN
    # cl100k: the non-possessive form that Meta's Llama-3 tokenizer.json ships.
    llama3 = json.loads(assets["llama3"].read_text(encoding="utf-8"))
    pattern = llama3["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    assert pattern == converters.CL100K_PATTERN


def test_vocab_matches_ranks(
    constructors: dict[str, dict[str, Any]], engines: dict[str, tuple[Tokenizer, Any]]
) -> None:
    to_char = bytes_to_unicode()
    assert sorted(to_char) == list(range(256)) and len(set(to_char.values())) == 256
    for name in NAMES:
        ranks: dict[bytes, int] = constructors[name]["mergeable_ranks"]
        vocab = engines[name][0].get_vocab(with_added_tokens=True)
        expected = {"".join(to_char[b] for b in tok): rank for tok, rank in ranks.items()}
        expected.update(SPECIAL_TOKENS[name])
        assert vocab == expected


def test_merges_from_ranks_small() -> None:
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5}
    assert converters.merges_from_ranks(ranks) == [
        (b"a", b"b"),
        (b"b", b"c"),
        (b"a", b"bc"),
        (b"ab", b"c"),
    ]


# --- real text -----------------------------------------------------------------------------

PROSE = """\
The quick brown fox didn't jump; it's been RESTING since 1999-12-31T23:59:59Z. "Why?" she'd ask.
We'll see — l'été dernier, naïve café owners in Zürich paid €1,234.56 (≈ $1 337) for 12 croissants.
Приветствую! Ελληνικά κείμενα, עברית, العربية الفصحى, हिन्दी पाठ, ภาษาไทย,
한국어 문장, 日本語の文章と中文句子。全角：ＡＢＣ１２３。
Emoji: 👨‍👩‍👧‍👦 🏳️‍🌈 👍🏽 🙂 — and combining: e\u0301, a\u0308\u0323.
  Indented line with trailing spaces   \r\n\ttab-indented\n\n\n    four spaces\u00a0nbsp\u3000ideo.
"""

CODE = '''\
def parse(line: str) -> dict[str, int]:
    """Parse 'key=value' pairs; it's O(n)."""
    out: dict[str, int] = {}
    for part in line.split(";"):
        if not part.strip():  # skip blanks\r
            continue
        key, _, value = part.partition("=")
        out[key.strip()] = int(value or 0x1F, 0) ** 2 // 3
    return out  # {'a': 1}\n\n\n
<|endoftext|>{"id": 12345678901, "tags": ["x/y", "a\\\\b"], "ok": true, "v": -0.5e-10}
SELECT COUNT(*) FROM users WHERE name LIKE '%O''Brien%' AND id >= 1000000;
'''


def _real_texts() -> list[str]:
    tiktoken_core = Path(tiktoken.__file__).with_name("core.py")
    files = [Path(converters.__file__), Path(__file__), tiktoken_core]
    return [PROSE, CODE, *(path.read_text(encoding="utf-8") for path in files)]


@pytest.mark.parametrize("name", NAMES)
def test_real_text(name: str, engines: dict[str, tuple[Tokenizer, tiktoken.Encoding]]) -> None:
    hf, tt = engines[name]
    for text in _real_texts():
        _check(hf, tt, text)
        for line in text.splitlines(keepends=True):
            _check(hf, tt, line)


# --- adversarial text ----------------------------------------------------------------------

ATOMS = [
    # letters: cases, scripts, titlecase, long s, dotted/dotless i, modifier letters, Lo
    *["a", "Z", "hello", "World", "camelCaseX", "HTTPServer", "ǅ", "ǈa", "ſ", "İ", "ı", "ß"],
    *["É", "Ωμέγα", "Привет", "ʰ", "ˢ", "中文", "日本語", "ひらがな", "カタカナ", "한국어"],
    *["ไทย", "العربية", "हिन्दी", "𝔘𝔫𝔦", "ﬁ", "Ⓐ", "ǅungla"],
    # digits and other numbers
    *["0", "7", "1234567", "٣٤٥", "５６", "²", "Ⅻ", "१२३", "½"],
    # whitespace (incl. non-newline \s and non-\s look-alikes)
    *[" ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", " \n ", "\v", "\f", "\u00a0", "\u2028"],
    *["\u0085", "\u3000", "\u200b", "\ufeff", "\x1c", "\u2009", "\u202f"],
    # apostrophes and contractions
    *["'", "'s", "'S", "'ll", "'LL", "'ve", "'Re", "'d", "'m", "'t", "’s", "'ſ", "n't", "''"],
    # punctuation
    *list('.,;:!?()[]{}<>/\\-_=+*&^%$#@~`|"'),
    *["...", "->", "//", "/*", "\n/", ".\n/", "(\u0301\n/", "—", "«", "»", "¿"],
    # emoji, ZWJ, combining marks, controls
    *["👨‍👩‍👧‍👦", "🏳️‍🌈", "👍🏽", "🙂", "\u200d", "\ufe0f", "e\u0301", "\u0301", "a\u0308\u0323"],
    *["\u0903", "\x00", "\x7f", "\ufffd"],
    # special tokens and near misses
    *["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|endoftext", "<|"],
]
RUN_CHARS = [*"19 \n\t'.aAé中/\u00a0\u0301\u3000", "\r\n"]  # repeated 1-9 times

atoms = st.one_of(
    st.sampled_from(ATOMS),
    st.builds(lambda c, n: c * n, st.sampled_from(RUN_CHARS), st.integers(1, 9)),
    st.text(max_size=4),
)
adversarial = st.lists(atoms, max_size=24).map("".join)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=adversarial)
def test_adversarial(
    name: str, engines: dict[str, tuple[Tokenizer, tiktoken.Encoding]], text: str
) -> None:
    hf, tt = engines[name]
    _check(hf, tt, text)
