"""The native encoder's ids equal the reference's, family by family: adversarial text, long
pieces (the heap merge), real transcripts, threads, and what it must decline or refuse."""

from __future__ import annotations

import functools
import json
import operator
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.__main__ import serve_settings
from app.config import Settings
from app.sessions import SessionTokenizer
from app.tokenization.boundaries import CutRules
from app.tokenization.chunked import NATIVE_CHUNKS_PER_WORKER, ChunkedEncoder
from app.tokenization.native import _native
from app.tokenization.native import encoder as encoder_module
from app.tokenization.native.encoder import NativeEncoder
from app.tokenization.native.nfc import Alignment
from app.tokenization.native_route import CpuEncoder
from app.tokenization.reference import IdArray, ReferenceEncoder
from app.tokenizer_spec import load_spec
from gpu_kernels import UnsupportedTokenizer
from gpu_kernels.char_classes import ClassTable
from gpu_kernels.payload import decode, marked, nfc_windows
from gpu_kernels.plan import EncoderPlan
from loadtest.agent_sessions.session import corpus
from tests.adversarial import long_texts, texts
from tests.conftest import REPO_ROOT
from tests.gpu_kernels.conftest import FAMILIES, case_texts, differential, spliced_texts
from tests.gpu_kernels.test_twin import dense_texts
from tests.tokenization.test_chunked import _at_characters

long_pieces = st.builds(
    lambda run, tail: run + tail,
    st.one_of(
        st.text(alphabet="abcdefghijklmnop", min_size=97, max_size=400),
        st.text(alphabet="ab", min_size=97, max_size=300),
        st.text(alphabet="-=*#.!", min_size=97, max_size=300),
        st.text(alphabet="中文日本語", min_size=40, max_size=120),
        st.text(alphabet="\u0301\u0300\u0308", min_size=50, max_size=150),
    ),
    texts,
)
"""Pieces past the array merge's 96 bytes: the heap merge must take HF's merges in order."""

NATIVE_FAMILIES = [*FAMILIES, "smollm2", "tekken", "qwen35", "gemma3"]
"""The twin's families, and those only the native encoder covers: SmolLM2 (Digits, GPT-2's
split, bytes its vocabulary lacks removed), Mistral's Tekken, Qwen3.5 and Gemma 3 (character
BPE with byte fallback, no pre-split)."""

digits_and_dropped = st.lists(
    st.one_of(
        st.sampled_from(["\x04", "\x06", "\x13", "\x14", "\x16", "\x1d", "\U00050000"]),
        st.sampled_from(["\U00011de0", "\U00016ff4", "\u0663", "\u2160", "\xbd", "\U0001d7ce"]),
        st.text(alphabet="0123456789 a'\n.", min_size=1, max_size=6),
        st.characters(min_codepoint=0x40000, max_codepoint=0xBFFFF),
        st.characters(max_codepoint=0x1F),
        texts,
    ),
    max_size=30,
).map("".join)
"""SmolLM2's traps: the bytes it removes (controls, the lead byte of planes 4-11), characters
the Digits step isolates and ``\\p{N}`` does not see (Rust's Unicode is newer) or the other way
round, digits of other scripts and numerals that are not digits."""


_EXPECTED_DECLINES = {
    "NFC changes text with characters Python lacks",
    "NFC changes text next to an added token",
    "a token ends inside a character NFC changed",
    "a literal U+2581 in the text (spaces become it)",
}


@pytest.fixture(scope="module")
def native(reference: Callable[[str], Tokenizer]) -> Callable[[str], NativeEncoder]:
    """``name -> NativeEncoder`` of that asset, built once per module."""
    return functools.cache(lambda name: NativeEncoder(ReferenceEncoder(reference(name))))


def assert_exact(tokenizer: Tokenizer, encoder: NativeEncoder, text: str) -> None:
    """Ids equal to the reference's, and ends too (at character boundaries: where the reference
    takes offsets, an end inside a character is that character's end)."""
    declined = sum(encoder.stats()["declined"].values())
    got = encoder.encode(text)
    if got is None:  # declined: where NFC changes the text or Gemma's mark is in it, counted
        assert set(encoder.stats()["declined"]) <= _EXPECTED_DECLINES
        assert sum(encoder.stats()["declined"].values()) == declined + 1
        return
    want_ids, want_ends = encoder.reference.encode(text)
    assert got[0].tolist() == want_ids.tolist(), text
    data = text.encode()
    assert np.array_equal(_at_characters(data, got[1]), _at_characters(data, want_ends)), text


ascii_texts = st.builds(
    operator.mul,
    st.lists(
        st.sampled_from(
            ["    ", "\n", "\n\n", "\r\n", "  \n", " ", "\t", "\x01", "\x1c", "\x7f", "123",
             "4567", "9", "abc", "Abc", "x", ".foo", "'s", "(", "//", "#!", "...", "__init__"]
        )
        | st.text(st.characters(max_codepoint=0x7F), min_size=1, max_size=6),
        min_size=1,
        max_size=40,
    ).map("".join),
    st.integers(1, 20),
)  # fmt: skip
"""All-ASCII text of controls, digit runs, blanks and code-like pieces, often past 64
characters: the scanners read an ASCII stretch's bytes, 64 at a time, and some families take
it by other rules than the rest of their text (DeepSeek-V3 by cl100k's masks)."""

_ascii_piece = st.sampled_from(
    ["    ", "\n", "\n\n", " ", "\t", "abc", "Abc", "ABC", "aBc", "x", "'s", "'LL", "'",
     "/", "//", "\n/", ".\n/", "(", "...", "123", "4567", "__init__", "McDonald"]
) | st.text(st.characters(max_codepoint=0x7F), min_size=1, max_size=8)  # fmt: skip
_wide = st.sampled_from(
    ["é", "É", "ß", "ſ", "'ſ", "\u212a", "ǅ", "Ǆ", "İ", "ı", "Я", "я", "Ω", "ω", "→", "━━",
     "’", "“", "”", "©", "€", "🚀", "²", "١", "Ⅻ", "\u200d", "\xa0", "\u2028", "\u3000",
     "\x85", "é's", "Éa", "aÉ", "→\n/", "\u0301", " \u0301a", "(\u0308", "中", "ʰ", "ª"]
)  # fmt: skip
_ascii_line = st.lists(_ascii_piece, min_size=20, max_size=60).map("".join)
sparse_texts = st.lists(
    st.one_of(_ascii_piece, _ascii_piece, _ascii_piece, _ascii_piece, _ascii_line, _wide),
    min_size=1,
    max_size=120,
).map("".join)
"""Mostly ASCII text with a few wide characters, often past 64 characters, as agent
transcripts are: o200k, Tekken and Kimi take a block by masks where its letters are cased
(arrows, quotes, accented and Cyrillic letters), by their sequential matcher where an uncased
letter or a mark is in it or in the three characters after it; and the decode takes 64 ASCII
bytes at a time after a wide character (``_ascii_line``: long runs of them)."""

_ADVERSARIAL = {
    "mixed": st.one_of(
        texts, long_texts, dense_texts, case_texts, spliced_texts, long_pieces,
        st.text(max_size=40),
    ),
    "ascii": ascii_texts,
    "sparse": sparse_texts,
}  # fmt: skip


@pytest.mark.parametrize("name", NATIVE_FAMILIES)
@pytest.mark.parametrize("kind", _ADVERSARIAL)
@differential(200)
@given(data=st.data())
def test_adversarial_text(
    name: str,
    kind: str,
    data: st.DataObject,
    reference: Callable[[str], Tokenizer],
    native: Callable[[str], NativeEncoder],
) -> None:
    assert_exact(reference(name), native(name), data.draw(_ADVERSARIAL[kind], label="text"))


@pytest.mark.parametrize("name", NATIVE_FAMILIES)
def test_blanks_ending_at_a_block_edge(
    name: str,
    reference: Callable[[str], Tokenizer],
    native: Callable[[str], NativeEncoder],
) -> None:
    """A run of blanks that ends at or near a 64-character edge of the scanners' masks, before a
    digit, a letter or punctuation: whether its last blank goes to what follows is decided
    across the edge (SmolLM2 splits digits off first, so before one it does not)."""
    for end in range(56, 67):
        for run in (1, 2, 3, 9):
            for after in ("1", "12", "a", "."):
                text = "x" * (end - run) + " " * run + after + " end"
                assert_exact(reference(name), native(name), text)


@pytest.mark.parametrize("name", NATIVE_FAMILIES)
def test_few_wide_characters_among_64_bytes(
    name: str,
    reference: Callable[[str], Tokenizer],
    native: Callable[[str], NativeEncoder],
) -> None:
    """64 bytes with up to four characters past ASCII are decoded by a permute of the ASCII
    bytes' classes, the others classed one by one: each kind of them (marks, letters to
    Qwen3.5, where Devanagari's split otherwise; a cased letter, read by its code point; an
    arrow; 4 bytes) at every place of the block, once and five times (then not so decoded)."""
    for wide in (" स्ते", "(\u0308", "xÉy", "→", "🚀x", "中"):
        for count in (1, 5):
            for at in range(0, 64, 3):
                text = "ab c.d" * (at // 6) + "ab c.d"[: at % 6] + wide * count + " xy = z" * 14
                assert_exact(reference(name), native(name), text)


@pytest.fixture(scope="module")
def specials_as_text(
    reference: Callable[[str], Tokenizer],
) -> Callable[[str], tuple[Tokenizer, NativeEncoder]]:
    """``name ->`` (that tokenizer with ``encode_special_tokens``: special tokens are text, as
    the typed route encodes client content, and its native encoder)."""

    @functools.cache
    def build(name: str) -> tuple[Tokenizer, NativeEncoder]:
        plain = Tokenizer.from_str(reference(name).to_str())
        plain.encode_special_tokens = True
        return plain, NativeEncoder(ReferenceEncoder(plain))

    return build


@pytest.mark.parametrize("name", NATIVE_FAMILIES)
@differential(200)
@given(text=st.one_of(texts, spliced_texts, st.text(max_size=40)))
def test_special_tokens_as_text(
    name: str, text: str, specials_as_text: Callable[[str], tuple[Tokenizer, NativeEncoder]]
) -> None:
    """With special-token matching off only the other added tokens split the text."""
    plain, encoder = specials_as_text(name)
    assert_exact(plain, encoder, text)


@pytest.mark.parametrize("name", NATIVE_FAMILIES)
def test_agent_transcripts(
    name: str, reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    for seed in (0, 1):
        assert_exact(reference(name), native(name), corpus(seed, 100_000))


@pytest.mark.parametrize("name", NATIVE_FAMILIES)
def test_real_files(
    name: str, reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    """Markdown, C, Python and a recorded agent session as they are (long digit runs, tables,
    code indentation, JSON escapes)."""
    root = Path(__file__).parents[2]
    paths = [*sorted((root / "docs").glob("*.md")), root / "app/tokenization/native/scan.c"]
    paths += [Path(__file__), root / "tests/api/fixtures/anthropic_claude_code_session.json"]
    for path in paths:
        assert_exact(reference(name), native(name), path.read_text(encoding="utf-8"))


@differential(400)
@given(text=digits_and_dropped)
def test_smollm2_digits_and_removed_bytes(
    text: str, reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    assert_exact(reference("smollm2"), native("smollm2"), text)


def test_smollm2_removes_what_its_vocabulary_lacks(native: Callable[[str], NativeEncoder]) -> None:
    """The bytes removed are exactly those without a byte token; the twin takes none."""
    encoder = native("smollm2")
    assert np.array_equal(encoder.plan.dropped == 1, encoder.plan.merges.byte_ids < 0)
    assert encoder.plan.dropped.sum() == 21
    with pytest.raises(UnsupportedTokenizer):
        EncoderPlan(encoder.reference.tokenizer)


@pytest.fixture(scope="module")
def llama3_removing(reference: Callable[[str], Tokenizer]) -> tuple[Tokenizer, NativeEncoder]:
    """Llama-3 with a trailing Split that removes spaces and ``a`` (their byte-level
    characters): bytes the vocabulary has, in the middle of pieces."""
    document = json.loads(reference("llama3").to_str())
    removal = {"type": "Split", "pattern": {"Regex": "[\u0120a]"}, "behavior": "Removed"}
    document["pre_tokenizer"]["pretokenizers"].append(removal | {"invert": False})
    tokenizer = Tokenizer.from_str(json.dumps(document))
    return tokenizer, NativeEncoder(ReferenceEncoder(tokenizer))


@differential(150)
@given(text=st.one_of(texts, digits_and_dropped))
def test_a_removing_split_on_another_family(
    text: str, llama3_removing: tuple[Tokenizer, NativeEncoder]
) -> None:
    assert_exact(*llama3_removing, text)


@pytest.mark.parametrize("name", ["qwen3", "o200k", "gpt2", "smollm2"])
def test_a_long_repeated_piece(
    name: str, reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    """One piece of 100K bytes (``'a' * 10**7`` is the same merge, only longer)."""
    for text in ("a" * 100_000, "ab" * 50_000 + " x", "=" * 100_000):
        assert_exact(reference(name), native(name), text)


def test_blocks_are_probed_on_first_use(reference: Callable[[str], Tokenizer]) -> None:
    """A fresh class table: each script's block is probed when a text first touches it."""
    table = ClassTable()
    encoder = NativeEncoder(ReferenceEncoder(reference("o200k")), classes=table)
    text = "Ἀθῆναι ᚠᛇᚻ 𝔘𝔫𝔦 ꧐꧑꧒ 𞤀𞤢 Ⰰⰰ " * 3
    assert_exact(reference("o200k"), encoder, text)
    assert table.probed.sum() >= 6


@pytest.mark.parametrize("name", ["cl100k", "o200k", "qwen3"])
def test_new_blocks_found_past_blocks_encoded(
    name: str, reference: Callable[[str], Tokenizer]
) -> None:
    """Where NFC is not checked the class blocks are surveyed block by block as the text is
    encoded (Qwen3's NFC check surveys them first): characters of blocks not probed, found
    past 120K bytes of ASCII, ids already merged, and again 40K bytes on, are probed then, all
    of them, and the text encoded exactly."""
    table = ClassTable()
    encoder = NativeEncoder(ReferenceEncoder(reference(name)), classes=table)
    text = "x = f(1)\n" * 12_000 + "Ἀθῆναι " + "y\n" * 20_000 + "ᚠᛇᚻ 𝔘𝔫𝔦"
    blocks = [ord(c) >> 12 for c in "Ἀᚠ𝔘"]
    assert not table.probed[blocks].any()
    assert_exact(reference(name), encoder, text)
    assert table.probed[blocks].all()
    assert encoder.stats()["declined"] == {}


def test_short_texts_leave_new_blocks_to_a_background_probe(
    reference: Callable[[str], Tokenizer],
) -> None:
    """Below ``probe_later_below`` bytes per unprobed block a text is declined (counted) and
    the blocks are probed in the background; once they are, the same text is encoded
    natively.  A long text probes inline and is encoded at once."""
    table = ClassTable()
    encoder = NativeEncoder(
        ReferenceEncoder(reference("llama3")), classes=table, probe_later_below=1 << 15
    )
    short = "Ἀθῆναι and ᚠᛇᚻ"
    blocks = sorted({ord(c) >> 12 for c in short})
    assert not table.probed[blocks[1:]].any()
    assert encoder.encode(short) is None
    assert encoder.stats()["declined"] == {"class blocks are being probed": 1}
    deadline = time.monotonic() + 60
    while not table.probed[blocks].all():
        assert time.monotonic() < deadline, "the background probe did not finish"
        time.sleep(0.01)
    assert_exact(reference("llama3"), encoder, short)
    assert encoder.stats()["declined"] == {"class blocks are being probed": 1}
    long_text = "𝔘𝔫𝔦 " * 20_000  # 380 KB for one new block: probed inline
    assert not table.probed[ord("𝔘") >> 12]
    assert_exact(reference("llama3"), encoder, long_text)
    assert encoder.stats()["declined"] == {"class blocks are being probed": 1}


def test_gemma_reads_no_classes_so_probes_none(reference: Callable[[str], Tokenizer]) -> None:
    """Gemma's pieces are found on the bytes alone: a short text of blocks never probed is
    encoded natively at once, where a family that reads classes declines it (above)."""
    table = ClassTable()
    encoder = NativeEncoder(
        ReferenceEncoder(reference("gemma3")), classes=table, probe_later_below=1 << 15
    )
    short = "Ἀθῆναι and ᚠᛇᚻ, 世界 ok"
    blocks = sorted({ord(c) >> 12 for c in short})
    assert_exact(reference("gemma3"), encoder, short)
    assert encoder.stats()["declined"] == {}
    assert not table.probed[blocks[1:]].any()


def test_the_first_encode_probes_nothing(reference: Callable[[str], Tokenizer]) -> None:
    """The constructor probes the block every text touches (the proxy builds the encoder at
    start-up), so a first call of ASCII or Latin text builds no table."""
    table = ClassTable()
    encoder = NativeEncoder(ReferenceEncoder(reference("llama3")), classes=table)
    built = table.version
    assert_exact(reference("llama3"), encoder, "What is the capital of France? Café, naïve.")
    assert table.version == built


def test_threads_share_one_encoder(
    reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    """Encodes on four times as many threads as there are work sets, all at once, stay exact,
    and no more sets are made than the cores the process may run on (a set a thread would
    have been 12.8 MB for each of the service's 40 worker threads)."""
    encoder, tokenizer = native("llama3"), reference("llama3")
    chunks = [corpus(seed, 20_000) for seed in range(8)]
    want = [tokenizer.encode(c, add_special_tokens=False).ids for c in chunks]
    threads = max(8, 4 * _native.WORK_SETS)
    barrier = threading.Barrier(threads)

    def run(i: int) -> list[int]:
        barrier.wait() if i < threads else None
        encoded = encoder.encode(chunks[i % len(chunks)])
        assert encoded is not None
        return encoded[0].tolist()

    with ThreadPoolExecutor(threads) as pool:
        got = list(pool.map(run, range(2 * threads)))
    assert got == [want[i % len(chunks)] for i in range(2 * threads)]
    made, taken, _, _ = _native.work_sets()
    assert 1 <= made <= _native.WORK_SETS == len(os.sched_getaffinity(0)) and taken == 0


def _holding_every_work_set(encoder: NativeEncoder) -> list[threading.Thread]:
    """Threads, one per work set, each encoding ``'a' * 3_000_000`` (one piece: ~0.5 s), once
    all of them hold a set."""
    threads = [
        threading.Thread(target=encoder.encode, args=("a" * 3_000_000,))
        for _ in range(_native.WORK_SETS)
    ]
    for thread in threads:
        thread.start()
    while _native.work_sets()[1] < _native.WORK_SETS:
        assert all(thread.is_alive() for thread in threads), "a set freed before all were taken"
        time.sleep(0.001)
    return threads


def test_an_encode_that_finds_every_work_set_taken_does_not_wait_for_a_long_one(
    reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    """While long encodes hold every work set, a short text (as the event loop's inline
    repairs encode) does not wait at all and a text of 64 KiB or more waits 2 ms; each then
    gets a set of its own without caches and is done, exact, before any of the long ones: a
    hostile one-piece text on every core does not hold up the other requests' encodes."""
    encoder, tokenizer = native("llama3"), reference("llama3")
    texts = [corpus(9, 20_000), corpus(10, 80_000)]
    want = [tokenizer.encode(text, add_special_tokens=False).ids for text in texts]
    _, _, waits, passing = _native.work_sets()
    holders = _holding_every_work_set(encoder)
    got = [encoder.encode(texts[0]), _native.work_sets()[2], encoder.encode(texts[1])]
    assert all(thread.is_alive() for thread in holders)
    for thread in holders:
        thread.join()
    assert [ids[0].tolist() for ids in (got[0], got[2]) if ids is not None] == want
    assert got[1] == waits  # the short text did not wait
    assert _native.work_sets()[2:] == (waits + 1, passing + 2)


def test_a_child_forked_while_every_work_set_is_taken_encodes_with_caches(
    reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    """A fork while other threads hold every work set (and maybe the pool's lock): the child
    forgets the sets those threads took (they are gone in it), makes its own and encodes
    with caches, not without them for ever (nor waits on a lock no thread of it holds)."""
    encoder, tokenizer = native("llama3"), reference("llama3")
    text = corpus(5, 200_000)
    want = tokenizer.encode(text, add_special_tokens=False).ids
    holders = _holding_every_work_set(encoder)
    try:
        child = os.fork()
        if child == 0:  # pragma: no cover (the child's exit status is the verdict)
            passing = _native.work_sets()[3]
            got = encoder.encode(text)
            cached = _native.work_sets()[3] == passing
            os._exit(0 if cached and got is not None and got[0].tolist() == want else 1)
        deadline = time.monotonic() + 60
        while (done := os.waitpid(child, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if done[0] == 0:
            os.kill(child, 9)
            os.waitpid(child, 0)
        assert done[0] == child and os.waitstatus_to_exitcode(done[1]) == 0
    finally:
        for thread in holders:
            thread.join()


def test_a_thread_s_kept_buffers_hold_nothing_of_an_earlier_text(
    reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    """A thread keeps its work buffers between calls up to 128 KiB of text and frees larger
    ones: texts on either side of that, long after short and short after long, on one thread
    (and so in the same buffers), are each exact."""
    encoder, tokenizer = native("qwen3"), reference("qwen3")
    long_text = corpus(3, 200_000)
    for size in (130_000, 5, 131_072, 60, 127_000, 200_000, 1, 90_000, 131_073, 20_000):
        text = long_text[:size]
        want_ids, want_ends = encoder.reference.encode(text)
        got = encoder.encode(text)
        assert got is not None
        assert got[0].tolist() == want_ids.tolist()
        assert want_ids.tolist() == tokenizer.encode(text, add_special_tokens=False).ids
        data = text.encode()
        assert np.array_equal(_at_characters(data, got[1]), _at_characters(data, want_ends))


@pytest.mark.parametrize(
    "text",
    [
        "cafe\u0301",
        "Vie\u0323\u0302t Nam",
        "<|im_start|>\u0301x",
        "A\u030a\u0301 e\u0301\u0301",
        "\u1100\u1161\u11a8",
    ],
)
def test_text_nfc_changes(
    text: str, reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    """Normalized first, the ends moved back; a token ending inside a changed window (the
    reference's offsets would put it somewhere in its characters) is declined."""
    assert_exact(reference("qwen3"), native("qwen3"), text)


@st.composite
def _windows_over(draw: st.DrawFn, size: int) -> Alignment:
    """Disjoint windows [begin, end) over a normalized text of ``size`` bytes, and what NFC
    gained up to each."""
    edges = sorted(draw(st.sets(st.integers(0, size), max_size=12)))
    pairs = list(zip(edges[::2], edges[1::2], strict=False))
    gained = np.cumsum([draw(st.integers(-3, 3)) for _ in pairs]).astype(np.int64)
    begin = np.asarray([a for a, _ in pairs], dtype=np.int64)
    end = np.asarray([b for _, b in pairs], dtype=np.int64)
    return Alignment(begin, end, gained)


@differential(100)
@given(text=st.text(st.characters(max_codepoint=0x7F), min_size=1, max_size=300), data=st.data())
def test_token_ends_move_back_by_what_the_windows_before_them_gained(
    text: str, data: st.DataObject, native: Callable[[str], NativeEncoder]
) -> None:
    """The C part's ends, moved back by windows: each end, one by one, is inside a window (no
    ends: code 2) or less what the windows wholly at or before it gained."""
    core = native("qwen3")._core
    utf8 = text.encode()
    none, no_ids = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
    ids, plain = core.encode(utf8, none, none, no_ids, False, b"")
    ends = np.frombuffer(plain, dtype=np.int32).tolist()
    alignment = data.draw(_windows_over(len(utf8)))
    windows = list(zip(alignment.begin.tolist(), alignment.end.tolist(), strict=True))
    want: list[int] | int = []
    for e in ends:
        if any(a < e < b for a, b in windows):
            want = 2
            break
        done = [w for w, (_, b) in enumerate(windows) if b <= e]
        assert isinstance(want, list)
        want.append(e - (int(alignment.gained[done[-1]]) if done else 0))
    moved_ids, moved = core.encode(utf8, none, none, no_ids, False, alignment.moves())
    assert moved_ids == ids
    got = moved if isinstance(moved, int) else np.frombuffer(moved, dtype=np.int32).tolist()
    assert got == want


_MISCOUNTS: dict[str, Callable[[IdArray, int], IdArray]] = {
    "one longer": lambda lengths, e: _changed(lengths, e, lengths[e] + 1),
    "one empty": lambda lengths, e: _changed(lengths, e, 0),
    "one too long for the byte table": lambda lengths, e: _changed(lengths, e, 1 << 26),
    "one negative": lambda lengths, e: _changed(lengths, e, -1),
    "cut before it": lambda lengths, e: lengths[:e],
}


def _changed(lengths: IdArray, at: int, value: int) -> IdArray:
    changed = lengths.copy()
    changed[at] = value
    return changed


@functools.cache
def _miscounting(reference: Callable[[str], Tokenizer], miscount: str) -> NativeEncoder:
    """Qwen3's encoder given token lengths that ``_MISCOUNTS[miscount]`` got wrong for "e"."""
    e = reference("qwen3").token_to_id("e")
    real = encoder_module._token_lengths
    wrong = functools.partial(_MISCOUNTS[miscount], e=e)
    with mock.patch.object(encoder_module, "_token_lengths", lambda *a: wrong(real(*a))):
        return NativeEncoder(ReferenceEncoder(reference("qwen3")))


@pytest.mark.parametrize("miscount", _MISCOUNTS)
@differential(100)
@given(
    text=st.builds(
        operator.mul, st.text(st.sampled_from("abcd ,\n"), min_size=1), st.integers(1, 40)
    ),
    e_at=st.none() | st.integers(min_value=0),
)
def test_token_ends_are_the_sums_of_the_lengths_or_do_not_add_up(
    text: str, e_at: int | None, miscount: str, reference: Callable[[str], Tokenizer]
) -> None:
    """The C part's ends are the running sums of its length table (from its byte per id or,
    for a length of 255 or more or a negative one, from the full table), and code 1 where an
    id is past the table or the sums miss the text's size (a length table that does not fit
    the vocabulary: never expected, counted as declined).  The token "e" whose length is
    wrong is in the text or not (``e_at``)."""
    encoder = _miscounting(reference, miscount)
    if e_at is not None:
        e_at %= len(text) + 1
        text = f"{text[:e_at]} e {text[e_at:]}"
    utf8 = text.encode()
    none, no_ids = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
    found, ends = encoder._core.encode(utf8, none, none, no_ids, False, b"")
    ids = np.frombuffer(found, dtype=np.int32)
    lengths = encoder._lengths.astype(np.int64)
    sums = np.cumsum(lengths[ids]) if ids.max() < len(lengths) else None
    if sums is None or sums[-1] != len(utf8):
        assert ends == 1
    else:
        assert np.frombuffer(ends, dtype=np.int32).tolist() == sums.tolist()


@pytest.mark.parametrize("size", [254, 255, 256, 300, 70_000])
@differential(20)
@given(text=texts, at=st.integers(min_value=0), times=st.integers(1, 3))
def test_tokens_of_255_bytes_or_more_end_where_the_reference_says(
    size: int, text: str, at: int, times: int, reference: Callable[[str], Tokenizer]
) -> None:
    """An added token as long as the byte table of lengths holds (254) or longer (the full
    table answers), repeated and put anywhere in adversarial text: ids and ends as the
    reference's."""
    tokenizer, encoder = _with_long_token(reference, size)
    token = tokenizer.id_to_token(tokenizer.get_vocab_size() - 1)
    at %= len(text) + 1
    assert_exact(tokenizer, encoder, text[:at] + token * times + text[at:])


@functools.cache
def _with_long_token(
    reference: Callable[[str], Tokenizer], size: int
) -> tuple[Tokenizer, NativeEncoder]:
    """Llama-3's tokenizer with one added token of size bytes (of 1 to 3 bytes a character)."""
    tokenizer = Tokenizer.from_str(reference("llama3").to_str())
    token = ("ab\u00e9\u4e2d" * size)[: size // 2]
    token += "x" * (size - len(token.encode()))
    assert len(token.encode()) == size
    tokenizer.add_tokens([token])
    return tokenizer, NativeEncoder(ReferenceEncoder(tokenizer))


def test_a_token_inside_a_changed_window_is_declined(
    native: Callable[[str], NativeEncoder],
) -> None:
    encoder = native("qwen3")
    before = encoder.stats()["declined"].get("a token ends inside a character NFC changed", 0)
    assert encoder.encode("e\u0301\u0301") is None  # é, then a lone mark: one window
    assert encoder.stats()["declined"]["a token ends inside a character NFC changed"] == before + 1


def test_lone_surrogates_are_refused(native: Callable[[str], NativeEncoder]) -> None:
    with pytest.raises(UnicodeEncodeError):
        native("qwen3").encode("a\ud800b")


@pytest.mark.parametrize("name", ["mistral_v1", "mistral_v3"])
def test_uncovered_families_are_refused(name: str, reference: Callable[[str], Tokenizer]) -> None:
    with pytest.raises(UnsupportedTokenizer):
        NativeEncoder(ReferenceEncoder(reference(name)))


@pytest.mark.parametrize("engine", ["native", "reference"])
def test_the_session_says_which_engine_encoded(engine: CpuEncoder, assets: dict[str, Path]) -> None:
    tok = SessionTokenizer.from_file(assets["qwen3"], cpu_encoder=engine, parallel_chunk=256)
    text = corpus(3, 4_000)
    first = tok.encode(text, session="t/s")
    grown = tok.encode(text + " and then some more text", session="t/s")
    reference = tok.reference.tokenizer
    assert first.ids.tolist() == reference.encode(text, add_special_tokens=False).ids
    assert first.parallel_chunks > 1 and grown.route == "append"
    native = engine == "native"
    assert first.native_bytes == (len(text.encode()) if native else 0)
    assert (grown.native_bytes > 0) == native
    assert tok.explain()["parallel_chunks"]["engine"] == engine


@differential(300)
@given(text=st.one_of(texts, case_texts, spliced_texts, dense_texts, sparse_texts))
def test_nfc_windows_are_the_twins(text: str, native: Callable[[str], NativeEncoder]) -> None:
    """The C part's NFC windows are ``payload.nfc_windows`` over the marked text."""
    encoder = native("qwen3")
    payload = encoder.plan.split.payload(text)
    encoder.encode(text)  # probes the blocks
    args = (payload.data, payload.span_begin, payload.span_end, payload.added_ids)
    found = encoder._core.encode(*args, True, b"")
    if isinstance(found, tuple):  # no windows: encoded
        found = b""
    points, char_at = decode(marked(payload))
    windows = nfc_windows(encoder.plan.classes.nfc_codes(points), char_at, len(payload.data), np)
    if windows is None:
        assert found is None
        return
    assert found is not None
    want = sorted(set(zip(windows[0].tolist(), windows[1].tolist(), strict=True)))
    got = np.frombuffer(found, dtype=np.int64).reshape(-1, 2).tolist()
    assert [tuple(w) for w in got] == want


def test_the_cpu_encoder_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--cpu-encoder`` / ``TOKSPLICE_CPU_ENCODER``: native by default, reference to switch
    back, anything else refused."""
    assert Settings().cpu_encoder == "native"
    assert serve_settings(["--cpu-encoder", "reference"]).cpu_encoder == "reference"
    monkeypatch.setenv("TOKSPLICE_CPU_ENCODER", "reference")
    assert Settings().cpu_encoder == "reference"
    monkeypatch.setenv("TOKSPLICE_CPU_ENCODER", "fast")
    with pytest.raises(ValueError, match="cpu_encoder"):
        Settings()


def test_a_long_text_in_chunks_probes_its_new_blocks_once(
    reference: Callable[[str], Tokenizer], assets: dict[str, Path]
) -> None:
    """A cold start in 32 KiB chunks, each too short to wait for the blocks it is the first to
    touch: the whole text is long enough, so they are probed once before the chunks run, and
    every chunk is encoded natively (none declined to the reference)."""
    table = ClassTable()
    tokenizer = ReferenceEncoder(reference("llama3"))
    native = NativeEncoder(tokenizer, classes=table, probe_later_below=1 << 15)
    rules = CutRules(load_spec(assets["llama3"]))
    chunked = ChunkedEncoder(tokenizer, rules, 1 << 15, native, native_chunks_per_worker=None)
    text = "".join(f"line {i}: Ἀθῆναι ᚠᛇᚻ 𝔘𝔫𝔦 ꧐꧑꧒\n" for i in range(20_000))
    assert not table.probed[[ord(c) >> 12 for c in "Ἀᚠ𝔘꧐"]].any()
    encoded = chunked.encode(text.encode(), text)
    assert encoded.chunks > 8
    assert encoded.native_bytes == len(text.encode())
    assert native.stats()["declined"] == {}
    assert encoded.ids.tolist() == reference("llama3").encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("name", ["qwen3", "llama3", "o200k"])
def test_the_native_encoder_gets_a_few_long_chunks(
    name: str, reference: Callable[[str], Tokenizer], assets: dict[str, Path]
) -> None:
    """With the native encoder a long text goes in at most two chunks per pool thread, each
    still at least the chunk size, with the whole text's ids and ends; the reference keeps
    chunks of the chunk size."""
    tokenizer = ReferenceEncoder(reference(name))
    rules = CutRules(load_spec(assets[name]))
    text = corpus(5, 300_000)
    data = text.encode()
    native = ChunkedEncoder(tokenizer, rules, 1 << 12, NativeEncoder(tokenizer)).encode(data)
    alone = ChunkedEncoder(tokenizer, rules, 1 << 12).encode(data)
    assert 2 <= native.chunks <= NATIVE_CHUNKS_PER_WORKER * (os.cpu_count() or 1)
    assert alone.chunks > native.chunks
    assert (
        native.ids.tolist()
        == alone.ids.tolist()
        == reference(name).encode(text, add_special_tokens=False).ids
    )
    assert np.array_equal(_at_characters(data, native.ends), _at_characters(data, alone.ends))


def test_chunks_the_native_encoder_declines_go_to_the_reference(
    reference: Callable[[str], Tokenizer], assets: dict[str, Path]
) -> None:
    """The chunks reach the native encoder as UTF-8; those it declines (a token ending inside
    a character NFC changes) are decoded for the reference, and the ids stay the whole text's."""
    tokenizer = ReferenceEncoder(reference("qwen3"))
    native = NativeEncoder(tokenizer)
    rules = CutRules(load_spec(assets["qwen3"]))
    chunked = ChunkedEncoder(tokenizer, rules, 1 << 12, native, native_chunks_per_worker=None)
    plain = "".join(f"line {i}: the parts fit together\n" for i in range(400))
    declined = "".join(f"line {i}: cafe\u0301\u0301 and more\n" for i in range(400))
    text = plain + declined + plain
    encoded = chunked.encode(text.encode(), text)
    engines = {name for _, name in encoded.engines}
    assert encoded.chunks > 4 and engines == {"native", "reference"}
    assert 0 < encoded.native_bytes < len(text.encode())
    assert encoded.ids.tolist() == reference("qwen3").encode(text, add_special_tokens=False).ids
    data, (_, want_ends) = text.encode(), tokenizer.encode(text)
    assert np.array_equal(_at_characters(data, encoded.ends), _at_characters(data, want_ends))


def test_the_scalar_decode_where_the_cpu_has_the_wide_one() -> None:
    """Where the CPU has AVX-512 VBMI, ASCII is classified 64 bytes at a time and the scalar
    path never runs in this process: this module's differential tests run again in a child
    with it turned off (``TOKSPLICE_NATIVE_SCALAR=1``), which says it is off."""
    _rerun_differential_tests("TOKSPLICE_NATIVE_SCALAR", "1", "WIDE_ASCII", "0")


def test_stretches_cut_into_blocks_of_a_few_bytes() -> None:
    """A long stretch is encoded block by block, cut where a piece is sure to end; the tests'
    texts are short, so this module's differential tests run again in a child whose blocks
    are 8 bytes (``TOKSPLICE_NATIVE_BLOCK``), where most of their texts are cut many times."""
    _rerun_differential_tests("TOKSPLICE_NATIVE_BLOCK", "8", "BLOCK_BYTES", "8")


def test_encodes_without_piece_caches() -> None:
    """An encode that finds every work set taken merges each piece without caches: this
    module's differential tests run again in a child with no sets at all
    (``TOKSPLICE_NATIVE_WORK_SETS=0``), where every encode does."""
    _rerun_differential_tests("TOKSPLICE_NATIVE_WORK_SETS", "0", "WORK_SETS", "0")


def _rerun_differential_tests(
    variable: str,
    value: str,
    constant: str,
    says: str,
    module: str = __file__,
    selected: str = "adversarial_text or agent_transcripts or real_files or long_repeated_piece",
) -> None:
    """``module``'s differential tests (``selected``) in a child with ``variable=value``, whose
    native module's ``constant`` reads ``says``."""
    env = {**os.environ, variable: value}
    flag = f"import app.tokenization.native._native as m; print(m.{constant})"
    seen = subprocess.run([sys.executable, "-c", flag], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert seen.stdout.strip() == says
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", module,
         "-k", selected],
        env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:]
    assert " passed" in run.stdout and " failed" not in run.stdout
