@dataclass(frozen=True, slots=True)
class «C1»:
    """«doc1»

    «doc2»
    """

    «id1»: int
    «id2»: str = "«s1»"
    «id3»: list[int] = field(default_factory=list)
    «id4»: dict[str, float] = field(default_factory=dict)

    def «id5»(self, «w1»: int) -> bool:
        if «w1» < 0:
            raise ValueError(f"«w1» must be >= 0, got {«w1»!r}")
        return self.«id1» <= «w1» < self.«id1» + len(self.«id3»)


