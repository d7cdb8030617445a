from typing import Any

WIDE_ASCII: int
"""1 where ASCII is classified 64 bytes at a time (AVX-512 VBMI), 0 on the scalar path."""
BLOCK_BYTES: int
"""The least bytes of a block a long stretch is encoded in (``TOKSPLICE_NATIVE_BLOCK``)."""

WORK_SETS: int
"""Work sets (buffers and 12.8 MB of piece caches each) there are at most: the cores the process
may run on, or ``TOKSPLICE_NATIVE_WORK_SETS``; an encode that finds all taken (and, of 64 KiB or
more, waited 2 ms in vain) merges each piece without caches."""

class Encoder:
    def __init__(self, *arrays_and_sizes: Any) -> None: ...
    def encode(
        self,
        data: bytes,
        span_begin: Any,
        span_end: Any,
        added_ids: Any,
        check_nfc: bool,
        moves: bytes,
        /,
    ) -> tuple[bytes, bytes | int] | list[int] | bytes | None: ...
    def missing_blocks(self, data: bytes, /) -> list[int]: ...

class AddedTokens:
    def __init__(
        self, edge_start: Any, edge_byte: Any, edge_child: Any, token: Any, label_at: Any,
        labels: Any, /
    ) -> None: ...
    def find(self, data: bytes, /) -> tuple[bytes, bytes, bytes]: ...

def work_sets() -> tuple[int, int, int, int]: ...
def common_prefix(a: str, b: str, i: int = 0, j: int = 0, /) -> int: ...
def common_suffix(a: str, b: str, floor: int, /) -> int: ...
def gather(source: bytes, starts: Any, lengths: Any, /) -> bytes: ...
def compared_lines(a: bytes, b: bytes, /) -> tuple[bytes, bytes, bytes] | None: ...
