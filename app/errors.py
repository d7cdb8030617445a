"""The exceptions toksplice raises, in one tree.

    TokspliceError
    ├── InvalidTextError        text that no tokenizer can take (not a str, lone surrogates)
    └── TokenizerSpecError      a tokenizer.json that cannot be loaded or is not supported at all

Services raise these; each client API maps them to its own error JSON at one boundary.
"""

from __future__ import annotations


class TokspliceError(Exception):
    """Base class of every error toksplice raises on purpose."""


class InvalidTextError(TokspliceError, ValueError):
    """The input is not text the reference tokenizer accepts (non-str, lone surrogates)."""


class TokenizerSpecError(TokspliceError, ValueError):
    """The tokenizer file cannot be read or describes a model toksplice cannot run."""
