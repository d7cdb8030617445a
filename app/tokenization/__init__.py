"""Exact tokenization: reference-equal ids, repaired from a related text's state."""

from app.tokenization.spec import TokenizerSpec, load_spec
from app.tokenization.state import SessionState
from app.tokenization.transcript import Encoding, TranscriptEncoder

__all__ = ["Encoding", "SessionState", "TokenizerSpec", "TranscriptEncoder", "load_spec"]
