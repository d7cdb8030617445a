"""What the proxy learns from the upstream before sending ids (``app.service.alignment``
finds it out): whether it tokenizes as we do, and the model's context."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Alignment:
    verified: bool
    """False when the upstream has no usable /tokenize (ids are sent, unverified)."""
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches


@dataclass(frozen=True, slots=True)
class Learned:
    """The upstream facts the proxy serves by."""

    alignment: Alignment | None
    """None when the check is switched off."""
    context_tokens: int | None
    """What one request may fill (prompt and answer), None when the upstream does not say."""

    @property
    def send_text(self) -> bool:
        return self.alignment is not None and not self.alignment.ok
