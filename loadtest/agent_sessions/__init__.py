"""Deterministic generator of realistic, tokenizer-hostile coding-agent transcripts.

toksplice keeps the token ids of every agent session and, on each model call, re-tokenizes
only the part of the rendered transcript that changed.  Exactness campaigns and benchmarks
for that need transcripts that behave like the ones coding agents (Claude Code, Codex, ...)
really send, so this package generates them:

* Every model call resends the WHOLE transcript.  ``session_calls`` yields the full rendered
  text of each successive call: the previous call's text minus the trailing generation prompt,
  plus the assistant's answer and the next tool result(s) or user message, plus the generation
  prompt again (as a chat server appends it).  Appends average ``append_chars`` (the median
  real call appends ~1.4K characters) with a heavy tail: some appends are a few dozen
  characters, some are 10-30K tool outputs (whole source files, test logs, web pages).
* ``billing_line=True`` imitates Claude Code, whose first system block starts with
  ``x-anthropic-billing-header: cc_version=2.1.37.abc; cch=1f3e9;`` where ``cch`` changes on
  every call: an edit near the START of the transcript.
* ``drop_thinking=True`` imitates Qwen3's chat template: assistant turns carry
  ``<think>\\n...\\n</think>\\n\\n`` reasoning, and the think blocks of assistant turns that
  precede the latest user message are removed from later calls: an edit in the MIDDLE.
  Tool-call loops (assistant -> tool -> assistant) run between user messages, so both kept
  and dropped think blocks occur.
* The content is realistic and adversarial for BPE pre-tokenizers: a several-KB system prompt
  with JSON tool schemas; user requests with contractions (don't, I'LL, we've, curly
  apostrophes); tool calls as JSON; tool outputs with Python/JS/TS/Rust/Go/YAML/TOML/SQL/
  Makefile sources, minified JSON, Markdown tables, unified diffs, pytest/cargo/jest logs,
  stack traces with caret lines, ``ls -la``/``git status`` (tabs), hashes, UUIDs, timestamps,
  long numbers, base64 blobs and PEM blocks, box-drawing characters, ANSI escapes, lone CRs,
  CRLF line endings, trailing whitespace, runs of blank lines, multilingual text (CJK, kana
  incl. half-width, Hangul, Cyrillic, Arabic, Hebrew, Devanagari, Thai, NFD Vietnamese with
  U+0301 etc.), emoji ZWJ sequences with skin tones and flags, NBSP/ZWSP/BOM, and text that
  looks like special tokens (``"<|im_end|>"`` inside a code string, ``<｜end▁of▁sentence｜>``).

``chat_requests(seed, target_chars=...)`` yields the same kind of session as OpenAI
``/v1/chat/completions`` request bodies, for servers that render the chat template
themselves: ``messages`` (system, user, assistant turns with ``reasoning_content`` and
``tool_calls``, ``tool`` results), ``tools`` (``tool_definitions()``), ``model``, ``stream``,
``max_tokens`` and ``user=session_id(seed)``.  Sizes are ``content_chars(messages)``.  Each
body's list is new but its message dicts are shared with the session's other bodies: do not
mutate them.  A 1M-character session takes ~0.1 s.

``corpus(seed, chars)`` returns one long mixed text from the same pools (cold-start tests).
``MARKUPS`` holds the chat markups keyed like the tokenizers under test.

Everything is driven by ``random.Random(seed)``: identical arguments give identical output.
Only the standard library is used.  Generation is cheap: content is produced per call (a
few KB of Python-level work) and each call's text is a single ``str.join`` over a cached
prefix and a short list of recent parts, so a 4M-character session of ~3000 calls takes a
few seconds, dominated by copying the yielded strings.

Layout: ``markup`` (chat markups), ``session`` (the text generators), ``chat`` (request
bodies), ``turns`` (the turn plan both share: sizes, tool loops, billing line), ``content`` and the
modules it builds on (``atoms``, ``source_files``, ``git_outputs``, ``build_logs``,
``shell_outputs``) for the text itself, ``rendering`` (turns in a markup), and
``vocabulary``/``templates`` over the literal pools in ``pools/`` (read by ``pool_files``).
"""

from __future__ import annotations

from .anthropic import anthropic_body
from .chat import Shape, chat_requests, content_chars, session_id, tool_definitions
from .markup import MARKUPS, Markup
from .session import corpus, session_calls
from .turns import fresh_call

__all__ = [
    "MARKUPS",
    "Markup",
    "Shape",
    "anthropic_body",
    "chat_requests",
    "content_chars",
    "corpus",
    "fresh_call",
    "session_calls",
    "session_id",
    "tool_definitions",
]
