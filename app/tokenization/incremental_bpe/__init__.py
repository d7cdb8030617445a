"""Exact incremental BPE with eager output (issue 7); see ``engine.py``."""

from app.tokenization.incremental_bpe.engine import IncrementalBPE, IncrementalState
from app.tokenization.incremental_bpe.vocabulary import VocabularyError

__all__ = ["IncrementalBPE", "IncrementalState", "VocabularyError"]
