"""What the tool format asks of the upstream, resolved once against the model's vocabulary.

A format whose markers are special tokens (gpt-oss's harmony, Kimi's sections...) is only
readable when the server writes special tokens into the answer's text, and harmony's turn ends
at ``<|call|>`` / ``<|return|>``, which a server stops at only when told (or when the model's
generation config lists them): the dialects turn these into their servers' fields
(``UpstreamCall.special_tokens`` and ``stop_token_ids``). Ids we detokenize ourselves
(tokens-out upstreams) then keep their special tokens too (``keeps_special_tokens``), and
the markers that are control tokens of the vocabulary are taken out of the text the client
reads (``control_tokens``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tokenizers import Tokenizer

from app.generation import ToolFormat
from app.protocol.output import FORMATS

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FormatTokens:
    special_tokens: tuple[str, ...] = ()
    """The format's markers the answer's text must show (empty: its text needs none)."""
    stop_token_ids: tuple[int, ...] = ()
    """The ids of the tokens its answer ends at, where the vocabulary has them."""
    control_tokens: tuple[str, ...] = ()
    """Those of ``special_tokens`` that are special tokens of this vocabulary: control tokens,
    never text for the client (``marker_free``)."""
    dropped_ids: frozenset[int] | None = None
    """Where the format keeps special tokens, the vocabulary's other special tokens: ids we
    detokenize lose these (an end-of-turn token vLLM's ids hold); None: they lose all."""

    @property
    def keeps_special_tokens(self) -> bool:
        """Whether ids we detokenize must keep their special tokens as text."""
        return bool(self.special_tokens)


def format_tokens(tool_format: ToolFormat | None, tokenizer: Tokenizer) -> FormatTokens:
    """The tokens ``tool_format`` needs; a stop marker the vocabulary has no token for is
    logged and not asked for (a stop string would reach the client as its stop sequence)."""
    fmt = FORMATS.get(tool_format) if tool_format is not None else None
    if fmt is None:
        return FormatTokens()
    stops = []
    for marker in fmt.stop:
        token = tokenizer.token_to_id(marker)
        if token is None:
            log.warning("tool format %s: %r is no token of this tokenizer", fmt.name, marker)
        else:
            stops.append(token)
    special = {i: t.content for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
    control = tuple(marker for marker in fmt.special_tokens if marker in special.values())
    dropped = None
    if fmt.special_tokens:
        dropped = frozenset(i for i, text in special.items() if text not in fmt.special_tokens)
    return FormatTokens(fmt.special_tokens, tuple(stops), control, dropped)
