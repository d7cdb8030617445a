@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("«s1»", «x1»),
        ("«s2»", «x2»),
        ("don't stop", 3),
        ("I'LL BE BACK, we've SEEN it", 9),
        ("<|im_end|>", 1),
        ("\t\tindented\r\n", «x3»),
        ("«e1» «e2»", «x4»),
    ],
)
def test_«id1»(text: str, expected: int) -> None:
    «w1» = «id2»(text)
    assert len(«w1») == expected, f"bad split for {text!r}: {«w1»}"


def test_«id3»_roundtrip(«w2»: «C1») -> None:
    ids = «w2».encode("«s3»")
    assert «w2».decode(ids) == "«s3»"
    assert ids[:3] == [«n1», «n2», «n3»]


