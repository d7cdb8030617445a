"""Exact tokenization: reference-equal ids, repaired from a related text's state."""

from app.tokenization.state import SessionState
from app.tokenization.transcript import Encoding, TranscriptEncoder
from app.tokenizer_spec import TokenizerSpec, load_spec

__all__ = ["Encoding", "SessionState", "TokenizerSpec", "TranscriptEncoder", "load_spec"]
