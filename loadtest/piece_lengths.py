"""How long the pre-tokenizer's pieces are in agent transcripts, per tokenizer family.

    python loadtest/piece_lengths.py [--chars 2000000]

Repair re-encodes a window around each change, cut at stable piece boundaries, so a change
inside a long piece re-encodes the whole piece.  The incremental BPE could take over inside
such pieces; whether that pays depends on how long pieces get in real transcripts.  Printed per
family over ``agent_sessions.corpus`` (tool outputs, code, logs, multilingual text): the
number of pieces, their median, 99.9th percentile and longest length (characters), and the
share of characters in pieces of 256 characters or more.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "loadtest"))

from agent_sessions import corpus  # noqa: E402

FAMILIES = ("qwen3", "llama3", "deepseek_v3", "gpt2", "cl100k", "o200k", "smollm2")
CHUNK = 100_000


def piece_lengths(tokenizer: Tokenizer, text: str) -> np.ndarray:
    lengths: list[int] = []
    for start in range(0, len(text), CHUNK):
        pieces = tokenizer.pre_tokenizer.pre_tokenize_str(text[start : start + CHUNK])
        lengths += [end - begin for _, (begin, end) in pieces]
    return np.asarray(lengths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=2_000_000)
    args = parser.parse_args()
    text = corpus(5, args.chars)
    print("| family | pieces | median | p99.9 | longest | chars in pieces >= 256 |")
    print("|---|---|---|---|---|---|")
    for family in FAMILIES:
        tokenizer = Tokenizer.from_file(str(ROOT / ".assets" / family / "tokenizer.json"))
        lengths = piece_lengths(tokenizer, text)
        long_share = lengths[lengths >= 256].sum() / lengths.sum()
        print(
            f"| {family} | {len(lengths):,} | {np.median(lengths):.0f} | "
            f"{np.percentile(lengths, 99.9):.0f} | {lengths.max()} | {long_share:.4%} |"
        )


if __name__ == "__main__":
    main()
