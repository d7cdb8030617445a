"""``bounded_json.loads`` equals ``orjson.loads``: the same value (types, key order, the last
of duplicate keys) or the same error (message, position, line and column), on JSON cut into
pieces as small as a byte; and no orjson call reads more than a piece of a large body, valid
or not."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import bounded_json
from app._json_spans import parts

_TEXT = st.text(
    st.sampled_from(['"', "\\", "/", "\n", "\t", "\x01", "a", " ", "é", "数", "🙂", "\u2028"])
    | st.characters(),
    max_size=30,
)
_SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | _TEXT
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(_TEXT, inner, max_size=6),
    max_leaves=30,
)


def _text(value: Any, style: int) -> bytes:
    """JSON text of ``value`` in one of several spellings (compact, spaced, ASCII with
    ``\\u`` escapes and surrogate pairs, pretty)."""
    if style == 0:
        return orjson.dumps(value)
    spelling: dict[int, dict[str, Any]] = {
        1: {"separators": (" , ", " : ")}, 2: {"ensure_ascii": True}, 3: {"indent": 2},
    }  # fmt: skip
    return json.dumps(value, **spelling[style], allow_nan=False).encode("utf-8", "surrogatepass")


def _error(exc: orjson.JSONDecodeError) -> tuple[str, str, int, int, int]:
    return str(exc), exc.msg, exc.pos, exc.lineno, exc.colno


def _same(data: bytes, piece_bytes: int) -> None:
    """The same value or error, and no orjson call reads more than a piece (a scalar, or a
    value nested deeper than ``MAX_DEPTH``, over ``piece_bytes`` is read whole up to
    ``PIECE_BYTES``)."""
    read: list[int] = []
    loads = orjson.loads

    def counted(text: bytes) -> Any:
        read.append(len(text))
        return loads(text)

    try:
        expected: Any = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        with pytest.MonkeyPatch.context() as patch, pytest.raises(orjson.JSONDecodeError) as found:
            patch.setattr(orjson, "loads", counted)
            bounded_json.loads(data, piece_bytes)
        assert _error(found.value) == _error(exc)
    else:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(orjson, "loads", counted)
            value = bounded_json.loads(data, piece_bytes)
        assert type(value) is type(expected)
        assert orjson.dumps(value) == orjson.dumps(expected)  # order of keys included
    assert max(read, default=0) <= max(piece_bytes, bounded_json.PIECE_BYTES) + 8  # an escape


@settings(max_examples=400)
@given(_VALUES.filter(lambda v: not isinstance(v, float) or v == v), st.integers(0, 3),
       st.integers(1, 40))  # fmt: skip
def test_valid_json_reads_as_orjson_reads_it(value: Any, style: int, piece_bytes: int) -> None:
    try:
        data = _text(value, style)
    except (ValueError, TypeError):  # inf / nan, lone surrogates: no JSON text
        return
    _same(data, piece_bytes)


@settings(max_examples=400)
@given(_VALUES, st.integers(0, 3), st.integers(1, 40), st.data())
def test_damaged_json_is_refused_or_read_as_orjson_does(
    value: Any, style: int, piece_bytes: int, data: st.DataObject
) -> None:
    """Bytes deleted, inserted or replaced anywhere, JSON's structural bytes most often."""
    try:
        text = bytearray(_text(value, style))
    except (ValueError, TypeError):
        return
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text)))
        byte = data.draw(st.sampled_from(list(b'"\\,:[]{} u0dDe-\xff\xc3\x80')))
        edit = data.draw(st.sampled_from(["delete", "insert", "replace"]))
        if edit == "insert" or at == len(text):
            text[at:at] = bytes([byte])
        elif edit == "delete":
            del text[at]
        else:
            text[at] = byte
    _same(bytes(text), piece_bytes)


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "messages"]), _SCALARS), max_size=8),
       st.integers(1, 30))  # fmt: skip
def test_duplicate_keys_keep_the_first_place_and_the_last_value(
    members: list[tuple[str, Any]], piece_bytes: int
) -> None:
    inner = b",".join(orjson.dumps(k) + b":" + orjson.dumps(v) for k, v in members
                      if _orjson_writes(v))  # fmt: skip
    for data in (b"{" + inner + b"}", b'{"x": [{' + inner + b"}, {" + inner + b"}]}"):
        _same(data, piece_bytes)


def _orjson_writes(value: Any) -> bool:
    """Whether orjson writes the scalar as it is: not NaN, not a string with a lone surrogate
    (the other tests spell those as escapes, through ``_text``)."""
    if isinstance(value, float):
        return value == value
    return not isinstance(value, str) or not any(0xD800 <= ord(c) <= 0xDFFF for c in value)


def test_a_large_string_is_cut_only_between_characters_and_escapes() -> None:
    content = ('\\"' * 5 + "é" * 3 + "\\ud83d\\ude00" + "🙂" + "\\n") * 50
    data = ('{"m": ["' + content + '"]}').encode()
    for limit in range(1, 25):
        assert bounded_json.loads(data, limit) == orjson.loads(data)
    inner = data.index(b'["') + 1
    found = parts(data, inner, len(data) - 2, 7)
    assert found is not None and found[0] == 0 and len(found[1]) > 100
    for cut in found[1][1:-1]:
        assert data[cut] & 0xC0 != 0x80  # not inside a UTF-8 character
        assert not data[:cut].endswith(b"\\ud83d")  # not inside a surrogate pair


def test_a_53_mb_body_is_parsed_in_pieces() -> None:
    """The hostile body of ``loadtest/event_loop_gaps.py``: every orjson call it makes reads
    at most about ``PIECE_BYTES``."""
    body = {"model": "m", "messages": [{"role": "user", "content": '"' * 26_000_000}]}
    data = orjson.dumps(body)
    read: list[int] = []
    loads = orjson.loads

    def counted(text: bytes) -> Any:
        read.append(len(text))
        return loads(text)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(orjson, "loads", counted)
        assert bounded_json.loads(data) == body
    assert len(read) > 40 and max(read) <= bounded_json.PIECE_BYTES + 8


@pytest.mark.parametrize("outside", [1, 20, 31, 40])
@pytest.mark.parametrize("piece_bytes", [2500, bounded_json.PIECE_BYTES])
def test_nesting_past_512_levels_is_refused_at_every_size(outside: int, piece_bytes: int) -> None:
    """The bracket that opens level 513 is named, whatever the body's size (orjson reads up
    to 1024 levels; cut pieces each nest less than the body)."""
    for inside in (480, 492, 493, 1000, 1010):
        deep = b"[" * inside + b"1" + b"]" * inside
        data = b"[" * outside + deep + b',"' + b"x" * 5000 + b'"' + b"]" * outside
        if outside + inside <= bounded_json.MAX_NESTING:
            assert _levels(bounded_json.loads(data, piece_bytes)) == _levels(orjson.loads(data))
            continue
        with pytest.raises(orjson.JSONDecodeError) as found:
            bounded_json.loads(data, piece_bytes)
        assert str(found.value) == (
            "JSON nested too deeply (over 512 levels): line 1 column 513 (char 512)"
        )
    line = b'{"messages": [\n' + b"[" * 600  # unclosed too: the nesting is found first
    with pytest.raises(
        orjson.JSONDecodeError, match=r"512 levels\): line 2 column 511 \(char 525\)"
    ):
        bounded_json.loads(line, piece_bytes)


def _levels(value: Any) -> list[tuple[int, Any]]:
    """Each level's length and last item (a leaf), down the first items (too deep to compare
    with ``==`` or to write with orjson)."""
    levels = []
    while isinstance(value, list):
        levels.append((len(value), value[-1] if not isinstance(value[-1], list) else None))
        value = value[0]
    return [*levels, (0, value)]


_KEYS = st.sampled_from([b'"messages"', b'"messag\\u0065s"', b'"input"', b'"a"', b'"m"'])


@settings(max_examples=300)
@given(st.lists(st.tuples(_KEYS, _VALUES), max_size=6), st.sampled_from([b"", b" ", b"\n  "]))
def test_array_span_is_the_one_top_level_array(
    members: list[tuple[bytes, Any]], space: bytes
) -> None:
    """The array under the key, found by the scan, where the key is at the top level once (in
    any spelling); else None."""
    try:
        texts = [space + k + space + b":" + space + orjson.dumps(v) for k, v in members]
    except TypeError:  # a lone surrogate
        return
    data = b"{" + b",".join(texts) + space + b"}"
    pairs: list[list[tuple[str, Any]]] = []

    def kept(found: list[tuple[str, Any]]) -> dict[str, Any]:
        pairs.append(found)
        return dict(found)

    json.loads(data, object_pairs_hook=kept)
    top = pairs[-1]  # the top-level object's, duplicates kept
    for key in ("messages", "input"):
        values = [v for k, v in top if k == key]
        span = bounded_json.array_span(data, key)
        if len(values) != 1 or not isinstance(values[0], list):
            assert span is None
            continue
        assert span is not None
        start, close = span
        assert data[start : start + 1] == b"[" and data[close : close + 1] == b"]"
        assert orjson.loads(data[start : close + 1]) == orjson.loads(data)[key]


def _large_body() -> bytes:
    """A chat body over three pieces, pretty-printed (lines to count): small messages, one
    large string with escapes and wide characters, a large array of ids, nested objects."""
    words = ["plain", 'quoted "x"', "tab\there", "é数🙂", "\\path", "line\nbreak", "\u2028"]
    messages = [
        {"role": "user", "content": " ".join(words[k % 7] for k in range(j % 40))}
        for j in range(1500)
    ]
    messages.insert(700, {"role": "user", "content": "".join(words) * 9000})
    tools = [{"type": "function", "function": {"name": f"f{k}", "parameters": {"n": k}}}
             for k in range(300)]  # fmt: skip
    body = {"model": "m", "messages": messages, "ids": list(range(60_000)), "tools": tools}
    return json.dumps(body, indent=1, ensure_ascii=False).encode()


_LARGE = _large_body()


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_damaged_large_body_is_refused_as_orjson_refuses_it(data: st.DataObject) -> None:
    """A byte replaced, the body cut short or junk inserted anywhere: the same error as one
    ``orjson.loads`` of the whole body, from orjson calls that each read a piece at most."""
    assert len(_LARGE) > 3 * bounded_json.PIECE_BYTES
    text = bytearray(_LARGE)
    at = data.draw(st.integers(0, len(text) - 1))
    edit = data.draw(st.sampled_from(["replace", "truncate", "insert"]))
    if edit == "truncate":
        del text[at:]
    else:
        junk = data.draw(st.binary(min_size=1, max_size=3) | st.sampled_from(
            [b'"', b"\\", b",", b":", b"[", b"]", b"{", b"}", b"\\u", b"\xc3", b"\x01", b"-"]
        ))  # fmt: skip
        text[at : at + (len(junk) if edit == "replace" else 0)] = junk
    _same(bytes(text), bounded_json.PIECE_BYTES)


def test_a_large_value_past_max_depth_is_refused_and_a_small_one_read() -> None:
    """Past ``MAX_DEPTH`` levels a value would be scanned once per level: one up to
    ``PIECE_BYTES`` is read whole there, a larger one refused at its first byte."""
    depth = bounded_json.MAX_DEPTH + 3
    for size, refused in ((1000, False), (bounded_json.PIECE_BYTES + 10, True)):
        inner = b'["' + b"x" * size + b'"]'
        data = b"[" * depth + inner + b",1" + b"]" * depth
        if not refused:
            assert _levels(bounded_json.loads(data, 100)) == _levels(orjson.loads(data))
            continue
        with pytest.raises(orjson.JSONDecodeError) as found:
            bounded_json.loads(data)
        assert found.value.msg.startswith("JSON nested too deeply (a value over 262144 bytes")
        assert found.value.pos == bounded_json.MAX_DEPTH  # the first bracket at that level


@pytest.mark.parametrize(
    ("number", "message", "at"),
    [
        (b"1." + b"1" * 300_000, "JSON number over 262144 bytes", 10),  # orjson reads it
        (b"9" * 300_000, "number is infinity when parsed as double", 10),  # orjson's error
        (b"-" + b"x" * 300_000, "no digit after sign", 11),  # orjson's error
    ],
)
def test_a_scalar_over_a_piece_is_never_read_whole(number: bytes, message: str, at: int) -> None:
    data = b'{"a": [1, ' + number + b"]}"
    with pytest.raises(orjson.JSONDecodeError) as found:
        bounded_json.loads(data)
    assert (found.value.msg, found.value.pos) == (message, at)
    if message[0] != "J":
        with pytest.raises(orjson.JSONDecodeError) as whole:
            orjson.loads(data)
        assert _error(found.value) == _error(whole.value)


@pytest.mark.parametrize(
    "data",
    [b"[-", b"[1, 2, 1.", b'{"a": tru', b'{"a": [1}', b'["abc\\u12', b'"abc\\ud83d', b'["a\\',
     b'{"k\\uzz": 1 2}', b"[1, 2 3]", b"[0\\]", b'{"a": 1,}', b"[1]  x", b"\n\n [1,\n ,2]",
     b'["\xc3\xa9\xe6\x95\xb0", x]', b'{"\\u001f\\u"001f": 1}', b"\x01[1]", b" " * 9],
)  # fmt: skip
def test_malformed_edges_are_refused_as_orjson_refuses_them(data: bytes) -> None:
    """Cases the hypothesis tests found: the end of data inside a scalar, a string or an
    escape; an error inside a key before the scan's; a stray byte at the start."""
    for piece_bytes in range(1, 8):
        _same(data, piece_bytes)
