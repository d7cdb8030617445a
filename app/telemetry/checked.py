"""What the shadow verifier needs of the session layer, as protocols: telemetry sits beside
``app.sessions`` and imports none of it (``tests/test_layers.py``)."""

from __future__ import annotations

from typing import Protocol

from app.tokenization.reference import ReferenceEncoder
from app.tokenizer_spec import TokenizerSpec


class Repairing(Protocol):
    """A keeper of session state the verifier resets after a divergence (the session
    tokenizer, or the typed special tokens' pieces)."""

    def forget(self, session: str) -> None: ...

    def disable_repair(self, reason: str) -> None: ...


class CheckedTokenizer(Repairing, Protocol):
    """The session tokenizer whose ids are checked (``app.sessions.SessionTokenizer``)."""

    @property
    def reference(self) -> ReferenceEncoder: ...

    @property
    def spec(self) -> TokenizerSpec: ...


class Sentinels(Protocol):
    """Client data with special-token text masked (``app.sessions.typed_specials.Masked``)."""

    @property
    def tokens(self) -> dict[str, str]:
        """Sentinel -> the special-token text it stands for."""
        ...
