"""What the proxy remembers between the calls of a session, and where it keeps it.

``app.tokenization`` encodes; this package finds the previous call's state of a session,
keeps the new one (in memory, and in Redis when configured) and holds the other per-session
memos of the request path.
"""

from app.sessions.tokenizer import SessionTokenizer

__all__ = ["SessionTokenizer"]
