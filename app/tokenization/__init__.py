"""Exact stateful tokenization: reference-equal ids with per-session repair."""

from app.tokenization.session import Encoding, SessionTokenizer
from app.tokenizer_spec import TokenizerSpec, load_spec

__all__ = ["Encoding", "SessionTokenizer", "TokenizerSpec", "load_spec"]
