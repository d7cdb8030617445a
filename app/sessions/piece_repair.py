"""One piece of a transcript split at special tokens: encoded, or repaired from its last version.

Hugging Face encodes a text holding special tokens by splitting it at them and encoding each
piece between them as a text of its own: nothing before or after a piece changes its ids.
So the split is a forced cut that needs no proof, and each piece is a whole text for the
repair engine (``TranscriptEncoder``, configured for the tokenizer with special matching
off): a long piece that changed (Claude Code's system prompt, edited by its billing line on
every call) is repaired from the state of the previous call's version of that piece, exactly
as a whole transcript is repaired from its previous one.  ``TranscriptEncoder`` gives the
reference's ids of the new text whatever state it is handed (the state only decides how much
is reused), so which old piece is chosen is a matter of speed, never of ids.

Nothing here is remembered: the states are values inside the session's one piece state
(``pieces.PieceState``), counted in its size and evicted with the rest of the session, under
no key of their own.  Cutting the whole transcript with one state instead would need the
engine to know that a special-token match cuts whatever bytes surround it, in its cut rules
and its whole-text encodes alike; per piece, the engine runs unchanged on texts without
special matches, which is what its proofs cover.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import numpy as np
from tokenizers import Tokenizer

from app.tokenization.engines import EngineParts
from app.tokenization.native_route import CpuEncoder, native_encoder
from app.tokenization.reference import IdArray, ReferenceEncoder
from app.tokenization.state import SessionState
from app.tokenization.transcript import TranscriptEncoder
from app.tokenizer_spec import spec_from_json

REPAIRED_PIECE = 2048
"""Characters from which a piece is encoded by the repair engine (and its state kept, to repair
its next version from); shorter ones cost less to encode whole than to keep offsets for."""


class Piece(NamedTuple):
    ids: IdArray
    engines: EngineParts
    """Which engine gave ``ids`` (``Encoding.engines``)."""
    state: SessionState | None
    """The piece's state, to repair its next version from (long pieces only)."""


class PieceRepairer:
    """Encodes pieces with special-token matching off; thread-safe."""

    def __init__(
        self, tokenizer: Tokenizer, parallel_chunk: int, cpu_encoder: CpuEncoder = "native"
    ) -> None:
        """The repair engine's cut rules see only the added tokens that are still matched; a
        family without proven rules encodes every piece whole.  ``cpu_encoder``: as for the
        session tokenizer (the native encoder encodes pieces where it covers the family)."""
        self._plain = plain = Tokenizer.from_str(tokenizer.to_str())
        plain.encode_special_tokens = True
        data = json.loads(plain.to_str())
        data["added_tokens"] = [t for t in data.get("added_tokens") or [] if not t.get("special")]
        spec = spec_from_json(data)
        reference = ReferenceEncoder(plain)
        self._native = native_encoder(reference, cpu_encoder) if spec.proven else None
        self._engine = (
            TranscriptEncoder(reference, spec, parallel_chunk=parallel_chunk, native=self._native)
            if spec.proven
            else None
        )

    def encode(self, text: str, base: SessionState | None) -> Piece:
        """The ids of piece ``text``, repaired from ``base`` (the state of a piece of the
        previous call) where there is one."""
        if self._engine is None or len(text) < REPAIRED_PIECE:
            found = self._native.encode(text) if self._native is not None else None
            if found is not None:
                return Piece(found[0], ((len(found[0]), "native"),), None)
            ids = np.asarray(self._plain.encode(text, add_special_tokens=False).ids, np.int32)
            return Piece(ids, ((len(ids), "reference"),), None)
        outcome = self._engine.outcome(text, text.encode("utf-8"), base, None)
        return Piece(outcome.state.ids, outcome.engines, outcome.state)

    def disable_repair(self, reason: str) -> None:
        """Encodes every piece whole from now on (``TranscriptEncoder.disable_repair``)."""
        if self._engine is not None:
            self._engine.disable_repair(reason)
