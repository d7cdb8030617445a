class «C1»(«C2»):
    """«doc1»"""

    __slots__ = ("_«id1»", "_«id2»", "_lock")

    def __init__(self, «id1»: «C3» | None = None, *, «id2»: float = «fl1») -> None:
        super().__init__()
        self._«id1» = «id1» or «C3»()
        self._«id2» = «id2»
        self._lock = threading.RLock()

    @property
    def «id3»(self) -> int:
        """«doc2»"""
        with self._lock:
            return len(self._«id1»)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(«id1»={self._«id1»!r}, «id2»={self._«id2»:.3f})"

    def «id4»(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        # «cm1»
        return self._«id1».get(key, default)


