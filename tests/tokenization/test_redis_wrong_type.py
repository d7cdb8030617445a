"""One session's Redis key of another type than the store's hashes (damage, or a stray write
into the store's namespace) is that session's miss, against a real ``redis-server``: the
breaker stays closed for every other session, and the session's next write replaces the key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tokenizers import Tokenizer

from app.sessions import SessionTokenizer
from app.sessions.redis_store import RedisStore
from loadtest.agent_sessions import MARKUPS, session_calls
from tests.services import RedisServer


def test_a_key_of_another_type_is_one_sessions_miss(
    assets: dict[str, Path],
    reference: Callable[[str], Tokenizer],
    make_store: Callable[..., RedisStore],
    redis_server: RedisServer,
) -> None:
    ref = reference("qwen3")
    writer, reader = make_store(), make_store()
    first = SessionTokenizer.from_file(assets["qwen3"], store=writer)
    second = SessionTokenizer.from_file(assets["qwen3"], store=reader)
    texts = list(session_calls(5, MARKUPS["qwen3"], target_chars=20_000, max_calls=3))
    for session in ("t/damaged", "t/other"):
        first.encode(texts[0], session=session)
    writer.flush()
    client = redis_server.client()
    (key,) = client.keys(b"*damaged")
    client.delete(key)
    client.rpush(key, b"not a hash")

    enc = second.encode(texts[1], session="t/damaged")
    assert list(enc.ids) == ref.encode(texts[1], add_special_tokens=False).ids
    assert enc.route == "full"
    assert second.encode(texts[1], session="t/other").route != "full"  # Redis still asked
    assert reader.stats()["redis_rejected"] == 1
    assert reader.stats()["redis_hits"] == 1
    assert "redis_errors" not in reader.stats()

    reader.flush()  # the damaged session's write replaces the key
    assert client.type(key) == b"hash"
    late = SessionTokenizer.from_file(assets["qwen3"], store=make_store())
    assert late.encode(texts[2], session="t/damaged").route != "full"
    assert "redis_errors" not in reader.stats()
