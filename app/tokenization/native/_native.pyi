from typing import Any

class Encoder:
    def __init__(self, *arrays_and_sizes: Any) -> None: ...
    def encode(
        self, data: bytes, span_begin: Any, span_end: Any, added_ids: Any, /
    ) -> bytes | list[int]: ...
