"""GLM-4.5 to 5.x and Kimi K2, whose tokenizer files are not on a package registry: their split
and added tokens on a vocabulary built for the test, recognised, cut and repaired exactly.

- GLM: Llama-3's tokenizer.json (vocabulary, merges, split, byte level) with GLM's added tokens
  (those its chat templates write, and its other control tokens) in place of Llama-3's; it is
  the ``cl100k`` family.
- Kimi: o200k's ranks converted as our tiktoken files are, with Kimi's split pattern
  (``tokenizer_spec.KIMI_PATTERN``) and the special tokens its template writes: the ``kimi``
  family.  Its vocabulary differs from o200k's, but the cut rules and the native scanner read
  only the split and the added tokens; the vocabulary only decides how a piece merges, never
  where pieces end.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.sessions import SessionTokenizer
from app.tokenization.boundaries import CutRules
from app.tokenization.native.encoder import NativeEncoder
from app.tokenization.reference import ReferenceEncoder
from app.tokenizer_spec import KIMI_PATTERN, load_spec
from app.tools.assets import O200K_FILE
from app.tools.converters import tiktoken_to_tokenizer_json
from loadtest.agent_sessions import MARKUPS, session_calls
from tests.adversarial import fragments, grown_texts
from tests.tokenization.test_boundaries import check_all_cuts

GLM_ADDED = [
    "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
    "<|assistant|>", "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>",
    "<|begin_of_video|>", "<|end_of_video|>", "<|code_prefix|>", "<|code_middle|>",
    "<|code_suffix|>", "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
    "</tool_response>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "/nothink",
]  # fmt: skip
KIMI_SPECIALS = [
    "[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>",
    "<|im_middle|>", "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
    "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>",
    "<|media_start|>", "<|media_content|>", "<|media_end|>", "<|media_pad|>",
]  # fmt: skip
ADDED = {"glm": GLM_ADDED, "kimi": KIMI_SPECIALS}
FAMILY = {"glm": "cl100k", "kimi": "kimi"}
NAMES = list(ADDED)

traps = st.sampled_from(["中文", "北京市 Pascal", "English混合", "/abc", "it's", "12345", "é"])


def texts_of(name: str) -> st.SearchStrategy[str]:
    """The session tests' fragments with the vocabulary's added tokens and Han runs."""
    pieces = st.one_of(fragments, traps, st.sampled_from(ADDED[name]))
    return st.lists(pieces, max_size=40).map("".join)


def build_kimi(assets: dict[str, Path], path: Path) -> Path:
    """Kimi K2's tokenizer.json as this module builds it (o200k's ranks), written to ``path``."""
    ranks = assets["o200k"].parents[1] / "tiktoken" / O200K_FILE
    specials = {text: 200_000 + i for i, text in enumerate(KIMI_SPECIALS)}
    return tiktoken_to_tokenizer_json(ranks, path, pattern=KIMI_PATTERN, special_tokens=specials)


@pytest.fixture(scope="module")
def built(
    assets: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Path]:
    """``name ->`` the tokenizer.json built for it, once per module."""
    folder = tmp_path_factory.mktemp("built")

    @functools.cache
    def build(name: str) -> Path:
        path = folder / f"{name}.json"
        if name == "kimi":
            return build_kimi(assets, path)
        data = json.loads(assets["llama3"].read_text(encoding="utf-8"))
        first = len(data["model"]["vocab"])
        flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
        data["added_tokens"] = [
            {"id": first + i, "content": text, **flags, "special": text != "/nothink"}
            for i, text in enumerate(GLM_ADDED)
        ]
        data["post_processor"] = None  # GLM's template writes [gMASK]<sop> itself
        path.write_text(json.dumps(data), encoding="utf-8")
        return path

    return build


def _ids(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("name", NAMES)
def test_the_family_is_recognised(name: str, built: Callable[[str], Path]) -> None:
    spec = load_spec(built(name))
    assert spec.family == FAMILY[name] and len(spec.added_tokens) == len(ADDED[name])


@pytest.mark.parametrize("name", NAMES)
def test_every_stable_cut_splits_exactly(name: str, built: Callable[[str], Path]) -> None:
    rules, tok = CutRules(load_spec(built(name))), Tokenizer.from_file(str(built(name)))
    seen = {"cuts": 0}

    @settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(texts_of(name))
    def run(text: str) -> None:
        seen["cuts"] += check_all_cuts(rules, tok, text)

    run()
    assert seen["cuts"] > 500


@pytest.mark.parametrize("name", NAMES)
def test_grown_sessions_and_agent_sessions_match_reference(
    name: str, built: Callable[[str], Path]
) -> None:
    tok = SessionTokenizer.from_file(built(name), window=64, parallel_chunk=48)
    ref = Tokenizer.from_file(str(built(name)))
    counter = iter(range(10**9))

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(grown_texts())
    def run(versions: list[str]) -> None:
        session = f"{name}/s{next(counter)}"
        for text in versions:
            assert list(tok.encode(text, session=session).ids) == _ids(ref, text), versions

    run()
    routes = []
    for text in session_calls(5, MARKUPS[name], target_chars=40_000):
        enc = tok.encode(text, session=f"ci/{name}")
        assert list(enc.ids) == _ids(ref, text), (len(text), enc.route)
        routes.append(enc.route)
    assert routes[0] == "full" and "full" not in routes[1:]
    assert tok.explain()["counters"].get("route:append", 0) > 50


han_mixed = st.lists(
    st.one_of(
        st.text(alphabet="中文北京々〇\u2e80\U00016ff0\U00016fe3", min_size=1, max_size=6),
        st.text(alphabet="aZǅʰ\u0301'sStTlLdD1 \n/!", min_size=1, max_size=6),
        st.sampled_from(KIMI_SPECIALS),
    ),
    max_size=30,
).map("".join)
"""Han runs against Latin letters, marks and apostrophes: Han letters (``々``, ``〇``, a
numeral), Han symbols and marks (``⺀``, U+16FF0) that are no letters of the word alternatives."""


@pytest.mark.parametrize("name", NAMES)
def test_the_native_encoder_is_exact(name: str, built: Callable[[str], Path]) -> None:
    tok = Tokenizer.from_file(str(built(name)))
    encoder = NativeEncoder(ReferenceEncoder(tok))

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.one_of(texts_of(name), han_mixed))
    def run(text: str) -> None:
        got = encoder.encode(text)
        assert got is not None and got[0].tolist() == _ids(tok, text), text

    run()
    info = SessionTokenizer.from_file(built(name)).explain()
    assert info["proven"] and info["native_off"] is None
