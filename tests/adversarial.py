"""Hypothesis strategies for text where token boundaries move.

Texts are built from fragments that sit on the known traps of each pre-tokenizer family
(docs/design.md#pre-tokenizer-rules-per-family): words that merge across a cut ("pipe"+"line"),
digit runs split between calls, whitespace runs before words, CRLF and newline absorption,
contractions in both cases, o200k case splits and "[\\r\\n/]*", CJK, combining marks, emoji ZWJ
sequences, the text of special tokens and, for Gemma, literal "▁" and its one token that joins
a character to a space (">▁</"), mixed with arbitrary characters so nothing is only
hand-picked.
"""

from __future__ import annotations

from hypothesis import strategies as st

TRAPS = [
    "pipe",
    "line",
    "pipeline",
    " pipe",
    "line ",
    "the",
    " the",
    "The",
    "HTTPServer",
    "camelCase",
    "X",
    "aB",
    "ABc",
    "ß",
    "ſ",
    "İ",
    "ǅ",
    "ʕ",
    "ﬁ",
    "0",
    "1",
    "12",
    "123",
    "1234",
    "12345",
    "٣",
    "²",
    "½",
    "Ⅻ",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    " \n",
    "\n ",
    "\n  ",
    "\u00a0",
    "\u3000",
    "\u2028",
    "\u0085",
    "\x0b",
    "\x0c",
    "\u200b",
    "\ufeff",
    "\x1c",
    "'",
    "'s",
    "'S",
    "'t",
    "'re",
    "'ll",
    "'LL",
    "'d",
    "'ve",
    "'m",
    "don't",
    "I'LL",
    "’",
    ".",
    ",",
    "!?",
    "...",
    "(",
    ")",
    "/",
    "//",
    ".\n/",
    "-->",
    '{"',
    '":',
    "`",
    "#",
    "@",
    "é",
    "e\u0301",
    "\u0301",
    "n\u0303",
    "ñ",
    "Å",
    "A\u030a",
    "ệ",
    "\u0915\u093f",
    "ก\u0e31",
    "中文",
    "日本語",
    "ひらがな",
    "カタカナ",
    "한국어",
    "Привет",
    "مرحبا",
    "עברית",
    "👍",
    "👍🏽",
    "👨\u200d👩\u200d👧",
    "🏳\ufe0f\u200d🌈",
    "\U0001f600",
    "\U000e0001",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "<|eot_id|>",
    "<|begin_of_text|>",
    "<｜User｜>",
    "<｜end▁of▁sentence｜>",
    "<|im_",
    "|>",
    "word ",
    "a b",
    "x\n",
    "\nfoo",
    "\n(",
    "\n#",
    "\n/",
    "\n'",
    "\n1",
    "9 ",
    "Z ",
    "\n\tif",
    "[INST]",
    "[TOOL_CALLS]",
    "<SPECIAL_20>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<b>",
    "\u2581",
    "\u2581\u2581",
    "> </",
    "\t\t",
    # Kimi K2's Han runs against letters, apostrophes and Han that is no letter there.
    "北京's",
    "中A'LL",
    "々〇",
    "\u2e80",
    "\U00016ff0",
    "<|im_user|>",
]

fragments = st.one_of(
    st.sampled_from(TRAPS),
    st.text(min_size=1, max_size=4),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=3),
    st.text(alphabet="ab \n\t.'1", min_size=1, max_size=6),
    st.text(alphabet="aZ9 \n/(", min_size=1, max_size=8),
)

texts = st.lists(fragments, min_size=0, max_size=40).map("".join)
long_texts = st.lists(fragments, min_size=60, max_size=200).map("".join)


@st.composite
def grown_texts(draw: st.DrawFn) -> list[str]:
    """Successive transcripts of one session: appends, edits anywhere, truncations, repeats."""
    text = draw(long_texts)
    versions = [text]
    for _ in range(draw(st.integers(1, 6))):
        action = draw(st.sampled_from(["append", "append", "append", "edit", "cut", "same"]))
        if action == "append":
            text += draw(texts.filter(bool))
        elif action == "edit" and text:
            at = draw(st.integers(0, len(text)))
            dropped = draw(st.integers(0, min(8, len(text) - at)))
            text = text[:at] + draw(texts) + text[at + dropped :]
        elif action == "cut" and text:
            text = text[: draw(st.integers(0, len(text)))]
        versions.append(text)
    return versions
