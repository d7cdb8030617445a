"""The ids a prompt must have, computed afresh with Hugging Face ``tokenizers``.

Two contracts, as the proxy promises them:

* a plain prompt's ids are the reference encode of the whole rendered text;
* a prompt whose client content held special-token text (route "pieces", see
  ``app.sessions.typed_specials``) is the rendered text split at the special tokens the
  template placed, each piece between them encoded with special-token matching off.

Both use ``encode_batch``, which releases the GIL: a check of a long transcript in the
verifier's thread does not stall the event loop.
"""

from __future__ import annotations

import re

import numpy as np
from tokenizers import Tokenizer

from app.tokenization.reference import IdArray


class Oracle:
    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._plain = Tokenizer.from_str(tokenizer.to_str())
        self._plain.encode_special_tokens = True
        self._special_ids = {
            token.content: index
            for index, token in tokenizer.get_added_tokens_decoder().items()
            if token.special
        }
        longest_first = sorted(self._special_ids, key=len, reverse=True)
        self._specials = (
            re.compile("|".join(map(re.escape, longest_first))) if longest_first else None
        )

    def ids(self, text: str, sentinels: dict[str, str] | None = None) -> IdArray:
        """Exact ids of ``text``; with ``sentinels`` (sentinel character -> the special-token
        text a user typed), of a transcript whose user-typed specials were masked."""
        if sentinels is None or self._specials is None:
            whole = self._tokenizer.encode_batch([text], add_special_tokens=False)[0]
            return np.asarray(whole.ids, dtype=np.int32)
        pieces: list[str] = []
        specials: list[int] = []
        position = 0
        for match in self._specials.finditer(text):
            pieces.append(text[position : match.start()])
            specials.append(self._special_ids[match.group()])
            position = match.end()
        pieces.append(text[position:])
        restore = re.compile("|".join(map(re.escape, sentinels))) if sentinels else None
        if restore is not None:
            pieces = [restore.sub(lambda m: sentinels[m.group()], p) for p in pieces]
        encoded = self._plain.encode_batch(pieces, add_special_tokens=False)
        ids: list[int] = []
        for k, piece in enumerate(encoded):
            ids += piece.ids
            if k < len(specials):
                ids.append(specials[k])
        return np.asarray(ids, dtype=np.int32)


def first_divergence(expected: IdArray, actual: IdArray) -> int | None:
    """Index of the first id that differs (or where the shorter one ends); None if equal."""
    n = min(len(expected), len(actual))
    differing = np.flatnonzero(expected[:n] != actual[:n])
    if len(differing):
        return int(differing[0])
    return None if len(expected) == len(actual) else n
