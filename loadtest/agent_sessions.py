"""Deterministic generator of realistic, tokenizer-hostile coding-agent transcripts.

toksplice keeps the token ids of every agent session and, on each model call, re-tokenizes
only the part of the rendered transcript that changed.  Exactness campaigns and benchmarks
for that need transcripts that behave like the ones coding agents (Claude Code, Codex, ...)
really send, so this module generates them:

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

``corpus(seed, chars)`` returns one long mixed text from the same pools (cold-start tests).
``MARKUPS`` holds the chat markups keyed like the tokenizers under test.

Everything is driven by ``random.Random(seed)``: identical arguments give identical output.
Only the standard library is used.  Generation is cheap: content is produced per call (a
few KB of Python-level work) and each call's text is a single ``str.join`` over a cached
prefix and a short list of recent parts, so a 4M-character session of ~3000 calls takes a
few seconds, dominated by copying the yielded strings.
"""

from __future__ import annotations

import base64
import json
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from random import Random
from typing import Any

__all__ = ["MARKUPS", "Markup", "corpus", "session_calls"]


# --------------------------------------------------------------------------------------------
# Chat markups
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Markup:
    """The strings a chat template puts around turns.

    ``start(role)`` opens a turn and ``end`` closes it (``end_for`` applies per-role
    overrides, e.g. DeepSeek-V3 only closes assistant turns).  ``generation_prompt`` is the
    assistant start a chat server appends at the end of each call's transcript.  The tool
    fields describe how tool calls and tool results are rendered.
    """

    name: str
    start_fmt: str
    end: str
    bos: str = ""
    role_tags: tuple[tuple[str, str], ...] = ()
    role_ends: tuple[tuple[str, str], ...] = ()
    tool_role: str = "tool"
    group_tool_results: bool = False
    tool_results_open: str = ""
    tool_results_close: str = ""
    tool_result_open: str = ""
    tool_result_close: str = ""
    tool_result_sep: str = ""
    tool_calls_open: str = ""
    tool_call_fmt: str = "{json}"
    tool_call_sep: str = "\n"
    tool_calls_close: str = ""
    content_tool_sep: str = "\n"
    args_key: str = "arguments"
    think_open: str = "<think>\n"
    think_close: str = "\n</think>\n\n"

    def start(self, role: str) -> str:
        """Opening markup of a turn of ``role``."""
        tag = role
        for r, t in self.role_tags:
            if r == role:
                tag = t
                break
        return self.start_fmt.replace("{role}", tag)

    def end_for(self, role: str) -> str:
        """Closing markup of a turn of ``role`` (``end`` unless overridden)."""
        for r, e in self.role_ends:
            if r == role:
                return e
        return self.end

    @property
    def generation_prompt(self) -> str:
        """The assistant start appended after the last turn of every call."""
        return self.start("assistant")


_CHATML = Markup(
    name="qwen3",
    start_fmt="<|im_start|>{role}\n",
    end="<|im_end|>\n",
    tool_role="user",
    group_tool_results=True,
    tool_result_open="<tool_response>\n",
    tool_result_close="\n</tool_response>",
    tool_result_sep="\n",
    tool_call_fmt="<tool_call>\n{json}\n</tool_call>",
)

_LLAMA3 = Markup(
    name="llama3",
    start_fmt="<|start_header_id|>{role}<|end_header_id|>\n\n",
    end="<|eot_id|>",
    bos="<|begin_of_text|>",
    tool_role="ipython",
    args_key="parameters",
)

_DEEPSEEK_V3 = Markup(
    name="deepseek_v3",
    start_fmt="{role}",
    end="<｜end▁of▁sentence｜>",
    bos="<｜begin▁of▁sentence｜>",
    role_tags=(
        ("system", ""),
        ("user", "<｜User｜>"),
        ("assistant", "<｜Assistant｜>"),
        ("tool", ""),
    ),
    role_ends=(("system", ""), ("user", ""), ("tool", "")),
    group_tool_results=True,
    tool_results_open="<｜tool▁outputs▁begin｜>",
    tool_results_close="<｜tool▁outputs▁end｜>",
    tool_result_open="<｜tool▁output▁begin｜>",
    tool_result_close="<｜tool▁output▁end｜>",
    tool_calls_open="<｜tool▁calls▁begin｜>",
    tool_call_fmt="<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{args}\n```"
    "<｜tool▁call▁end｜>",
    tool_calls_close="<｜tool▁calls▁end｜>",
)


def _plain(name: str) -> Markup:
    return Markup(
        name=name,
        start_fmt="### {role}:\n",
        end="\n<|endoftext|>\n",
        tool_call_fmt="<tool_call>\n{json}\n</tool_call>",
    )


MARKUPS: dict[str, Markup] = {
    "qwen3": _CHATML,
    "llama3": _LLAMA3,
    "deepseek_v3": _DEEPSEEK_V3,
    "gpt2": _plain("gpt2"),
    "cl100k": _plain("cl100k"),
    "o200k": _plain("o200k"),
}


# --------------------------------------------------------------------------------------------
# Content pools
# --------------------------------------------------------------------------------------------

_NOUNS = (
    "token", "cache", "session", "buffer", "splice", "config", "request", "handler", "index",
    "stream", "batch", "vocab", "offset", "window", "chunk", "state", "prefix", "suffix",
    "queue", "worker", "client", "router", "schema", "record", "payload", "metric", "span",
    "trace", "merge", "rank", "encoder", "decoder", "segment", "boundary", "anchor", "ledger",
    "snapshot", "shard", "lease", "cursor", "message", "turn", "template", "delta", "digest",
)
_VERBS = (
    "get", "set", "load", "parse", "build", "render", "apply", "flush", "encode", "decode",
    "split", "merge", "update", "compute", "validate", "resolve", "fetch", "emit", "reset",
    "scan", "splice", "commit", "verify", "normalize", "hash", "retokenize", "evict", "align",
)
_ADJS = (
    "fast", "raw", "cached", "pending", "stale", "dirty", "local", "remote", "partial", "full",
    "lazy", "strict", "safe", "max", "min", "last", "first", "next", "prev", "base", "hot",
)
_USERS = (
    "alice", "bob", "dev", "mkowalski", "jsmith", "yuki", "ana", "omar", "priya", "linh",
    "ubuntu", "runner", "sasha", "chen", "fatima", "noah",
)
_FULLNAMES = (
    "Alice Martin", "Bob Okafor", "Marta Kowalski", "John Smith", "Yuki Tanaka", "Ana Souza",
    "Omar Haddad", "Priya Raman", "Linh Nguyễn", "Sasha Ivanova", "Chen Wei", "Zoë Müller",
    "José Álvarez", "Björn Ødegård", "Fatima Zahra", "Noah O'Brien",
)
_PROJ_A = (
    "tok", "fast", "hyper", "micro", "open", "deep", "quick", "stream", "edge", "core",
    "atlas", "delta", "nova", "pico", "zen",
)
_PROJ_B = (
    "splice", "cache", "router", "gateway", "infer", "server", "lens", "forge", "kit",
    "bench", "proxy", "store", "pilot", "mesh", "loom",
)
_PY_STDLIB = (
    "os", "re", "sys", "json", "time", "asyncio", "logging", "hashlib", "itertools",
    "functools", "threading", "struct", "bisect", "heapq", "contextlib", "pathlib", "typing",
    "dataclasses", "collections", "argparse", "unicodedata", "base64", "zlib", "math",
)

_SENTENCES = (
    "Returns the {noun} for the given {noun2}, or None if it doesn't exist.",
    "This is called once per request, so it must not allocate.",
    "We can't reuse the {noun} here because the {noun2} may have changed.",
    "Don't call this from the hot path; it's O(n) in the number of {noun}s.",
    "Splits the {noun} at the last safe boundary before the {noun2}.",
    "The {adj} {noun} is only valid until the next {verb}() call.",
    "If the {noun} is stale we fall back to a full {verb} of the {noun2}.",
    "It's fine to ignore the error: the {noun} will be rebuilt on the next {noun2}.",
    "We've seen {n} {noun}s per second in production, so keep this cheap.",
    "I'LL document this properly once the {noun} API settles.",
    "Note: the {noun2} is shared between threads; take the lock first.",
    "They're {adj} by design, see the comment on {ident}.",
    "Callers shouldn't assume the {noun} is sorted; we'd have to {verb} it first.",
    "You'll get a KeyError if the {noun} wasn't registered; that's intentional.",
    "The {noun} must stay byte-identical to what the upstream {noun2} produced.",
    "Keep the {adj} path first; it handles ~{pct}% of calls.",
    "WE'VE been bitten by this twice: never {verb} a {noun} in place.",
    "Each {noun} is {n} bytes on disk, aligned to 64.",
    "This mirrors the {noun2} logic in {ident}, but without the retry loop.",
    "The {noun}’s lifetime ends when the {noun2} is evicted, so don’t keep references.",
)

_ZH = (
    "这个函数在输入为空时会返回错误的结果。",
    "请检查缓存是否在每次请求之后被正确清除。",
    "分词器的边界计算有问题，导致出现重复的标记。",
    "我们需要在合并之前验证所有的偏移量。",
    "测试在持续集成环境中偶尔失败，但在本地可以通过。",
    "性能下降了大约百分之三十，原因还不清楚。",
    "请用中文回答，并给出修改后的完整代码。",
)
_JA = (
    "このテストはキャッシュが無効化されたときに失敗します。",
    "トークナイザーの境界をもう一度確認してください。",
    "ログにはタイムアウトのエラーしか出ていません。",
    "差分が大きすぎるので、小さなコミットに分けましょう。",
    "ｶﾀｶﾅの半角文字も正しく処理できますか？",
    "リクエストごとにセッションIDが変わってしまいます。",
)
_KO = (
    "토큰 경계가 잘못 계산되었습니다.",
    "캐시를 비우면 테스트가 통과합니다.",
    "이 함수는 빈 입력에서 예외를 던집니다.",
)
_RU = (
    "Функция возвращает неверный результат при пустом вводе.",
    "Проверь, пожалуйста, почему кэш не очищается после запроса.",
    "Тесты падают только в CI, локально всё работает.",
    "Ёлки-палки, опять сломался парсер конфигурации!",
    "Сессия обрывается через 30 секунд без какой-либо ошибки в логах.",
)
_AR = (
    "تقوم الدالة بإرجاع نتيجة خاطئة عند إدخال فارغ.",
    "يرجى التحقق من أن ذاكرة التخزين المؤقت تُمسح بعد كل طلب.",
    "فشل الاختبار في بيئة التكامل المستمر فقط.",
)
_HE = ("הפונקציה מחזירה תוצאה שגויה כאשר הקלט ריק.", "בדוק בבקשה את קובץ התצורה.")
_HI = (
    "यह फ़ंक्शन खाली इनपुट पर ग़लत परिणाम देता है।",
    "कृपया जाँच करें कि हर अनुरोध के बाद कैश साफ़ होता है या नहीं।",
    "टोकन की सीमाएँ ग़लत गिनी जा रही हैं।",
    "क्या आप इस त्रुटि को ठीक कर सकते हैं?",
)
_VI = (
    "Hàm này trả về kết quả sai khi đầu vào rỗng.",
    "Vui lòng kiểm tra xem bộ nhớ đệm có được xóa sau mỗi yêu cầu không.",
    "Kiểm thử chỉ thất bại trên máy chủ tích hợp liên tục.",
    "Tiếng Việt có rất nhiều dấu thanh điệu và nguyên âm ghép.",
)
_TH = ("ฟังก์ชันนี้คืนค่าผิดเมื่ออินพุตว่างเปล่า", "กรุณาตรวจสอบว่าแคชถูกล้างหลังจากทุกคำขอ")
_EL = ("Η συνάρτηση επιστρέφει λάθος αποτέλεσμα όταν η είσοδος είναι κενή.",)
_DE_FR_ES = (
    "Die Größe des Zwischenspeichers überschreitet das Maß, das wir früher hatten.",
    "L'éditeur n'a pas enregistré le fichier ; vérifiez les droits d'accès.",
    "¿Por qué falla la prueba sólo en el servidor de integración?",
    "Naïve façade coöperation: résumé of the señor's piñata.",
)
_EMOJI = (
    "\U0001f680", "\u2705", "\u274c", "\U0001f525", "\U0001f41b",
    "\U0001f469\u200d\U0001f4bb",  # woman technologist
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",  # family
    "\U0001f44d\U0001f3fd",  # thumbs up, medium skin tone
    "\U0001f9d1\U0001f3ff\u200d\U0001f680",  # astronaut, dark skin tone
    "\U0001f3f3\ufe0f\u200d\U0001f308",  # rainbow flag
    "\u2764\ufe0f", "\U0001f1ef\U0001f1f5", "\U0001f1fa\U0001f1e6",
    "\U0001f926\U0001f3fb\u200d\u2642\ufe0f",  # facepalm, light skin tone, male
    "1\ufe0f\u20e3", "\U0001f647\u200d\u2640\ufe0f", "\U0001f605", "\U0001f389",
    "\u26a0\ufe0f", "\U0001f44b\U0001f3fc", "\U0001f9ea", "\U0001f4e6",
    "\U0001f9d1\U0001f3fe\u200d\U0001f91d\u200d\U0001f9d1\U0001f3fb",  # people holding hands
)
_ODD_SPACES = ("\u00a0", "\u200b", "\u3000", "\u2009", "\u202f")
_SPECIAL_LOOKALIKES = (
    "<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|eot_id|>", "<|start_header_id|>",
    "<|end_header_id|>", "<|begin_of_text|>", "<｜end▁of▁sentence｜>", "<｜User｜>",
    "<｜Assistant｜>", "<tool_call>", "</tool_response>", "<|fim_middle|>", "<|im_sep|>",
)


def _foreign_pool() -> tuple[str, ...]:
    vi = tuple(unicodedata.normalize("NFD", s) for s in _VI)  # decomposed combining marks
    return _ZH + _JA + _KO + _RU + _AR + _HE + _HI + vi + _TH + _EL + _DE_FR_ES


_FOREIGN = _foreign_pool()

_TEMPLATE_VAR = re.compile(r"«([A-Za-z]+)(\d*)»")


# --------------------------------------------------------------------------------------------
# Code templates (placeholders «kindN» are filled by _Content.fill)
#   id: snake identifier   C: class   cc: camelCase   K: CONST   w: noun   x: small int
#   n: numeric literal     fl: float  s: string-literal body   doc: sentence   cm: comment
#   h: hex hash   u: uuid   p: path   user: user name   kb: kebab   e: emoji
# --------------------------------------------------------------------------------------------

_PY_BLOCKS = (
    '''@dataclass(frozen=True, slots=True)
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


''',
    '''def «id1»(«w1»s: Sequence[int], *, «id2»: int = «x1») -> dict[str, int]:
    # «cm1»
    out: dict[str, int] = {}
    for i, «w1» in enumerate(«w1»s):
        if «w1» % «id2» == 0:
            continue
        elif «w1» > «n1»:
            out[f"«w1»_{i}"] = «w1» >> 3
        else:
            try:
                out[str(«w1»)] = «id3»(«w1»)
            except (KeyError, ValueError) as exc:  # noqa: PERF203
                log.warning("skipping %r: %s", «w1», exc)
    return out


''',
    '''class «C1»(«C2»):
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


''',
    '''async def «id1»(client: «C1», «w1»_ids: list[str], *, timeout: float = «fl1») -> list[bytes]:
    """«doc1»"""
    sem = asyncio.Semaphore(«x1»)

    async def one(«w1»_id: str) -> bytes:
        async with sem, client.stream("GET", f"/v1/«w1»s/{«w1»_id}") as resp:
            resp.raise_for_status()
            return b"".join([chunk async for chunk in resp.aiter_bytes()])

    results = await asyncio.wait_for(
        asyncio.gather(*(one(i) for i in «w1»_ids), return_exceptions=True),
        timeout=timeout,
    )
    return [r for r in results if isinstance(r, bytes)]


''',
    '''@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("«s1»", «x1»),
        ("«s2»", «x2»),
        ("don't stop", 3),
        ("I'LL BE BACK, we've SEEN it", 9),
        ("<|im_end|>", 1),
        ("\\t\\tindented\\r\\n", «x3»),
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


''',
    '''_«K1»_RE = re.compile(
    r"(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)\\s*[:=]\\s*(?P<value>.+?)\\s*(?:#.*)?$", re.MULTILINE
)
«K2»: Final[dict[str, tuple[int, float]]] = {
    "«w1»":      («x1», «fl1»),   # «cm1»
    "«w2»":      («x2», «fl2»),
    "«w3»":      («x3», «fl3»),   # TODO(«user»): «cm2»
    "«w4»_«w1»": («n1», «fl4»),
}
«K3» = 0x«h1»
«K4» = «n2»


''',
    '''def «id1»(self, «w1»: «C1», «w2»: int) -> «C1» | None:
    if «w1» is None:
        return None
    for «id2» in self._«id3»:
        if «id2».«id4»:
            for j in range(«w2»):
                if j in self._«id5»:
                    if «id2».matches(j):
                        while self._«id6»(j):
                            j += 1
                            if j > «x1»:
                                # «cm1»
                                break
                        else:
                            continue
                        return «id2»
    return «w1»



''',
    '''def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="«kb1»", description="«doc1»")
    parser.add_argument("--«kb2»", type=int, default=«x1», help="«doc2»")
    parser.add_argument("--«w1»", choices=["«w2»", "«w3»", "auto"], default="auto")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * args.verbose)
    log.info("starting «kb1» with %s", vars(args))
    return «id1»(args)


if __name__ == "__main__":
    sys.exit(main())
''',
    '''# -----------------------------------------------------------------------------
# «cm1»
# «cm2»
#
# NOTE(«user»): «doc1»
# -----------------------------------------------------------------------------
«K1» = "«s1»"   \t# legacy
«K2» = "«s2»"
«K3» = b"\\x00\\xff«w1»\\x7f"
«K4» = r"C:\\Users\\«user»\\AppData\\Local\\«kb1»"
«K5» = """multi-line
    string with trailing spaces   \n
    and «e1» and «s3»
"""


''',
)

_JS_BLOCKS = (
    """import { «cc1», «cc2» } from "./«kb1»";
import type { «C1» } from "../types/«kb2»";
import * as path from "node:path";

const «K1» = «n1»;
const «K2» = Object.freeze({ «cc3»: "«s1»", retries: «x1», timeoutMs: «x2»_000 });

""",
    """export const «cc1» = async («cc2», { «cc3» = «x1», signal } = {}) => {
  const url = `${BASE_URL}/v1/«kb1»/${encodeURIComponent(«cc2»)}?limit=${«cc3»}`;
  const res = await fetch(url, { signal, headers: { "x-request-id": "«u1»" } });
  if (!res.ok) {
    throw new Error(`«cc1» failed: ${res.status} ${res.statusText}`);
  }
  const data = await res.json();
  return data?.items?.map((it) => ({ ...it, «cc4»: it.«cc4» ?? null })) ?? [];
};

""",
    """export class «C1» extends EventEmitter {
  #«cc1» = new Map();
  #«cc2» = 0;

  constructor(options = {}) {
    super();
    this.options = { maxSize: «x1», ttlMs: «n1», ...options };
  }

  // «cm1»
  get size() {
    return this.#«cc1».size;
  }

  «cc3»(key, value) {
    if (this.#«cc1».size >= this.options.maxSize) {
      const oldest = this.#«cc1».keys().next().value;
      this.#«cc1».delete(oldest);
      this.emit("evict", oldest);
    }
    this.#«cc1».set(key, { value, at: Date.now() });
    return ++this.#«cc2»;
  }
}

""",
    """export function «C1»({ «cc1», onSelect }: Props): JSX.Element {
  const [«cc2», set«C2»] = useState<«C3» | null>(null);
  useEffect(() => {
    const id = setInterval(() => set«C2»((prev) => prev ?? «cc1»[0]), «x1»);
    return () => clearInterval(id);
  }, [«cc1»]);

  return (
    <ul className="«kb1» flex gap-2" aria-label="«s1»">
      {«cc1».map((item, i) => (
        <li key={item.id} onClick={() => onSelect?.(item)} data-index={i}>
          {item.label} &mdash; {item.count.toLocaleString("de-DE")} «e1»
        </li>
      ))}
    </ul>
  );
}

""",
    """describe("«cc1»", () => {
  it("handles «s1»", async () => {
    const out = await «cc1»("«s2»");
    expect(out).toHaveLength(«x1»);
    expect(out[0]).toMatchObject({ id: "«u1»", score: «fl1» });
  });

  it.each([
    ["don't", 2],
    ["WE'VE", 3],
    ["<|endoftext|>", 1],
  ])("splits %s into %d pieces", (input, n) => {
    expect(split(input)).toHaveLength(n);
  });
});

""",
    """const «K1»_RE = /^(?<key>[\\w.-]+)\\s*[:=]\\s*(?<val>.*?)\\s*$/gmu;
const «K2» = /[\\u0300-\\u036f]/g; // strip combining marks
export const «cc1» = (s) => s.normalize("NFD").replace(«K2», "").toLowerCase();
module.exports = { «cc1», «K1»_RE, version: "«x1».«x2».«x3»" };

""",
)

_RS_BLOCKS = (
    """use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

""",
    """#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub struct «C1»<'a> {
    pub «id1»: u32,
    pub «id2»: &'a str,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub «id3»: Vec<u64>,
}

""",
    """impl «C1» {
    /// «doc1»
    pub fn «id1»(&mut self, «w1»: &[u32]) -> Result<usize, «C2»Error> {
        let mut n = 0usize;
        for (i, &t) in «w1».iter().enumerate() {
            match t {
                0 => continue,
                1..=«x1» => n += 1,
                t if t > «n1» => return Err(«C2»Error::OutOfRange { index: i, value: t }),
                _ => {
                    self.«id2».entry(t).or_insert_with(Vec::new).push(i as u32);
                    n = n.checked_add(2).ok_or(«C2»Error::Overflow)?;
                }
            }
        }
        Ok(n)
    }
}

""",
    """#[derive(Debug, thiserror::Error)]
pub enum «C1»Error {
    #[error("value {value} at index {index} is out of range")]
    OutOfRange { index: usize, value: u32 },
    #[error("overflow while computing «w1» (limit = {})", u32::MAX)]
    Overflow,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

""",
    """#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn «id1»_roundtrip() {
        let s = "«s1»";
        let ids = encode(s).expect("encode");
        assert_eq!(decode(&ids).unwrap(), s, "roundtrip for {s:?}");
        assert!(ids.len() <= «x1»);
    }

    #[test]
    #[should_panic(expected = "index out of bounds")]
    fn «id2»_panics() {
        let v: Vec<u8> = vec![0xde, 0xad, 0xbe, 0xef];
        let _ = v[«x2» + 4];
    }
}

""",
    """pub trait «C1»<'a, T>: Send + Sync
where
    T: AsRef<[u8]> + 'a,
{
    fn «id1»(&self, input: T) -> Box<dyn Iterator<Item = (usize, &'a str)> + 'a>;

    fn «id2»(&self) -> Option<&'static str> {
        None // «cm1»
    }
}

macro_rules! «id3» {
    ($($k:expr => $v:expr),* $(,)?) => {{
        let mut m = ::std::collections::HashMap::new();
        $( m.insert($k, $v); )*
        m
    }};
}

""",
)

_GO_BLOCKS = (
    """package «w1»

import (
    "context"
    "encoding/json"
    "fmt"
    "time"
)

""",
    """// «C1» «doc1»
type «C1» struct {
    «C2»    string            `json:"«id1»"`
    Count   int               `json:"count,omitempty"`
    Labels  map[string]string `json:"labels,omitempty"`
    Updated time.Time         `json:"updated_at"`
}

func (x *«C1») «C3»(ctx context.Context, n int) (int, error) {
    if n < 0 {
        return 0, fmt.Errorf("«w1»: negative count %d", n)
    }
    select {
    case <-ctx.Done():
        return 0, ctx.Err()
    default:
    }
    x.Count += n
    return x.Count, nil
}

""",
    """func Test«C1»(t *testing.T) {
    tests := []struct {
        name string
        in   string
        want int
    }{
        {"empty", "", 0},
        {"ascii", "«s1»", «x1»},
        {"cjk", "日本語のテキスト", 8},
    }
    for _, tt := range tests {
        t.Run(tt.name, func(t *testing.T) {
            if got := «C2»(tt.in); got != tt.want {
                t.Errorf("«C2»(%q) = %d, want %d", tt.in, got, tt.want)
            }
        })
    }
}

""",
)

_YAML_BLOCKS = (
    """name: CI

on:
  push:
    branches: [main, "release/**"]
  pull_request:

env:
  PYTHONUNBUFFERED: "1"
  CACHE_KEY: «kb1»-«h1»

jobs:
  test:
    runs-on: ${{ matrix.os }}
    strategy:
      fail-fast: false
      matrix:
        os: [ubuntu-latest, macos-14]
        python: ["3.11", "3.12"]
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python }}
      - run: |
          pip install -e ".[dev]"
          pytest -q -x --maxfail=«x1»

""",
    """apiVersion: apps/v1
kind: Deployment
metadata:
  name: «kb1»
  labels: &labels
    app.kubernetes.io/name: «kb1»
    app.kubernetes.io/version: "«x1».«x2».«x3»"
spec:
  replicas: «x4»
  selector:
    matchLabels: *labels
  template:
    metadata:
      labels: *labels
      annotations:
        checksum/config: «h1»
    spec:
      containers:
        - name: server
          image: ghcr.io/«user»/«kb1»:sha-«h2»
          args: ["--port=8080", "--max-batch=«x5»"]
          resources:
            limits: {cpu: "2", memory: 4Gi, nvidia.com/gpu: 1}

""",
    """x-defaults: &defaults
  restart: unless-stopped
  logging:
    driver: json-file
    options: {max-size: "10m", max-file: "3"}

services:
  «kb1»:
    <<: *defaults
    build: .
    ports: ["8000:8000"]
    environment:
      - DATABASE_URL=postgres://«user»:«h1»@db:5432/«w1»
      - GREETING=«s1»
  db:
    <<: *defaults
    image: postgres:16-alpine

""",
)

_TOML_BLOCKS = (
    """[package]
name = "«kb1»"
version = "«x1».«x2».«x3»"
edition = "2021"
authors = ["«user» <«user»@example.com>"]

[dependencies]
serde = { version = "1.0", features = ["derive"] }
tokio = { version = "1", features = ["rt-multi-thread", "macros"] }
anyhow = "1"

[profile.release]
lto = "fat"
codegen-units = 1

""",
    """[tool.ruff]
line-length = «x1»0
target-version = "py311"

[tool.ruff.lint]
select = ["E", "F", "W", "I", "B", "UP"]
ignore = ["E501"]   # «cm1»

[tool.pytest.ini_options]
addopts = "-q --strict-markers"
markers = ["slow: long runs", "gpu: needs CUDA"]

""",
)

_SQL_BLOCKS = (
    """CREATE TABLE IF NOT EXISTS «id1» (
    id          BIGSERIAL PRIMARY KEY,
    «id2»       TEXT NOT NULL,
    payload     JSONB NOT NULL DEFAULT '{}'::jsonb,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT «id1»_uniq UNIQUE («id2», created_at)
);
CREATE INDEX CONCURRENTLY idx_«id1»_«id2» ON «id1» USING btree («id2»);

""",
    """WITH recent AS (
    SELECT «id1», count(*) AS n, percentile_cont(0.99) WITHIN GROUP (ORDER BY latency_ms) AS p99
    FROM requests
    WHERE created_at > now() - interval '«x1» hours' AND status <> 'it''s cancelled'
    GROUP BY «id1»
)
SELECT r.*, s.«id2» FROM recent r LEFT JOIN sessions s USING («id1») ORDER BY p99 DESC LIMIT «x2»;

""",
)

_SH_BLOCKS = (
    """#!/usr/bin/env bash
set -euo pipefail
IFS=$'\\n\\t'

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${«K1»:=«x1»}"

for f in "$ROOT"/data/*.jsonl; do
  [[ -s "$f" ]] || continue
  echo ">> $(basename "$f"): $(wc -l < "$f") lines"
done

""",
    """cat > "$TMPDIR/«kb1».json" <<'EOF'
{"name": "«w1»", "ids": [«n1», «n2»], "note": "don't expand $HOME here"}
EOF
python -m «id1» --input "$TMPDIR/«kb1».json" 2>&1 | tee -a "$LOG" || exit 3

""",
)

_MK_BLOCKS = (
    """.PHONY: all test lint bench clean

PY ?= python3
SRC := $(wildcard «w1»/*.py)

all: lint test

test:
    $(PY) -m pytest -q $(PYTEST_ARGS)

lint: $(SRC)
    ruff check . && mypy «w1»

bench:
    $(PY) -m loadtest.run --calls=«x1» --seed=$${SEED:-0}

""",
)

_MD_BLOCKS = (
    """## «C1»

«doc1» «doc2»

| Tokenizer | Vocab | p50 (µs) | p99 (µs) | Exact |
|:----------|------:|---------:|---------:|:-----:|
| qwen3 | 151,646 | «fl1» | «fl2» | ✅ |
| llama3 | 128,256 | «fl3» | «fl4» | ✅ |
| o200k | 200,019 | «fl5» | «fl6» | ❌ |

""",
    """### Usage

```bash
pip install «kb1»
«kb1» serve --port 8000 --«kb2» «x1»
```

- **«w1»**: «doc1»
- *«w2»*: «doc2»
    - nested item with `inline code` and a [link](https://example.com/«kb2»?q=«x2»&lang=ja)
1. First step «e1»
2. Second step — don't skip it

> **Note**
> «cm1»

""",
    """## «x1».«x2».«x3» — «ts1»

### Fixed
- «doc1» (#«n1»)
- Handle `\\r\\n` line endings in tool outputs (thanks @«user»!)

### Changed
- Bumped `tokenizers` to 0.«x4».«x5»; «doc2»



""",
)

_CSV_HEADER = "id,name,score,created_at,comment\n"

_TOOLS: tuple[tuple[str, str, dict[str, Any], list[str]], ...] = (
    (
        "Bash",
        "Run a shell command in a persistent bash session. The working directory persists "
        "between calls; shell variables set with export do not. Quote paths that contain "
        'spaces with double quotes (for example: cd "/home/user/My Project"). Prefer the '
        "dedicated Read, Grep and Glob tools over cat, grep and find. Commands time out after "
        "120000 ms unless a timeout is given (at most 600000 ms). Output longer than 30000 "
        "characters is cut in the middle. Chain commands with ';' or '&&', never with "
        "newlines, and never start interactive programs such as editors or `git rebase -i`.",
        {
            "command": {"type": "string", "description": "The command to run"},
            "timeout": {"type": "number", "description": "Optional timeout in milliseconds"},
            "description": {
                "type": "string",
                "description": "A 5-10 word summary of what the command does, e.g. "
                "'List files in current directory'",
            },
            "run_in_background": {
                "type": "boolean",
                "description": "Run the command in the background and poll it later",
            },
        },
        ["command"],
    ),
    (
        "Read",
        "Read a file from the local filesystem. file_path must be absolute. By default up to "
        "2000 lines are returned from the start of the file; use offset and limit for long "
        "files. Lines longer than 2000 characters are cut. Output is `cat -n` style: the line "
        "number, an arrow, then the line. Images are shown visually, PDFs page by page and "
        "Jupyter notebooks cell by cell with their outputs. It's fine to read several files "
        "in parallel when you'll need all of them.",
        {
            "file_path": {"type": "string", "description": "Absolute path of the file"},
            "offset": {"type": "number", "description": "First line to read (1-based)"},
            "limit": {"type": "number", "description": "Number of lines to read"},
        },
        ["file_path"],
    ),
    (
        "Edit",
        "Replace an exact string in a file. Read the file at least once in this conversation "
        "before editing it. old_string must match the file exactly, including indentation "
        "(tabs vs spaces); never include the line-number prefix from Read output. The edit "
        "fails when old_string isn't unique: give more surrounding context, or set "
        "replace_all to change every occurrence (useful for renaming a variable). Don't add "
        "emojis unless the user asks for them.",
        {
            "file_path": {"type": "string", "description": "Absolute path of the file"},
            "old_string": {"type": "string", "description": "The text to replace"},
            "new_string": {"type": "string", "description": "The replacement text"},
            "replace_all": {"type": "boolean", "default": False},
        },
        ["file_path", "old_string", "new_string"],
    ),
    (
        "Write",
        "Create or overwrite a file. Overwriting an existing file requires reading it first. "
        "Prefer editing existing files, and never create documentation files (*.md, README) "
        "unless you're explicitly asked to.",
        {
            "file_path": {"type": "string", "description": "Absolute path of the file"},
            "content": {"type": "string", "description": "The full new content"},
        },
        ["file_path", "content"],
    ),
    (
        "Glob",
        'Fast file-pattern matching for any codebase size. Supports patterns like "**/*.ts" '
        'or "src/**/*.{rs,toml}" and returns matching paths sorted by modification time, '
        "newest first.",
        {
            "pattern": {"type": "string", "description": "The glob pattern"},
            "path": {"type": "string", "description": "Directory to search (default: cwd)"},
        },
        ["pattern"],
    ),
    (
        "Grep",
        "Search file contents with ripgrep-style regular expressions (e.g. \"log.*Error\", "
        '"fn\\\\s+\\\\w+"). Literal braces need escaping: use `interface\\\\{\\\\}` to find '
        "`interface{}` in Go. Filter files with glob (\"*.js\") or type (\"py\", \"rust\"). "
        'output_mode is "files_with_matches" (default), "content" or "count"; -A/-B/-C add '
        "context lines in content mode and -n shows line numbers.",
        {
            "pattern": {"type": "string"},
            "path": {"type": "string"},
            "glob": {"type": "string"},
            "type": {"type": "string"},
            "output_mode": {
                "type": "string",
                "enum": ["content", "files_with_matches", "count"],
            },
            "-i": {"type": "boolean"},
            "-n": {"type": "boolean"},
            "-A": {"type": "number"},
            "-B": {"type": "number"},
            "-C": {"type": "number"},
            "head_limit": {"type": "number"},
            "multiline": {"type": "boolean"},
        },
        ["pattern"],
    ),
    (
        "WebFetch",
        "Fetch a URL, convert the HTML to Markdown and answer the prompt about it with a "
        "small, fast model. HTTP URLs are upgraded to HTTPS; results are cached for 15 "
        "minutes. When the page redirects to another host the tool reports the redirect URL "
        "instead of following it.",
        {
            "url": {"type": "string", "format": "uri"},
            "prompt": {"type": "string", "description": "What to extract from the page"},
        },
        ["url", "prompt"],
    ),
    (
        "TodoWrite",
        "Create and manage a structured task list for the current session. Use it for "
        "multi-step work (three or more distinct steps), when the user gives several tasks "
        "at once, or when asked to. Keep exactly one task in_progress at a time and mark "
        "tasks completed as soon as they're done; don't batch completions. Skip it for a "
        "single trivial task.",
        {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1},
                        "status": {
                            "type": "string",
                            "enum": ["pending", "in_progress", "completed"],
                        },
                        "activeForm": {"type": "string", "minLength": 1},
                    },
                    "required": ["content", "status", "activeForm"],
                    "additionalProperties": False,
                },
            }
        },
        ["todos"],
    ),
    (
        "Task",
        "Launch a sub-agent that works autonomously on a complex, multi-step task and "
        "reports back once. Agent types: general-purpose (research, code search, multi-step "
        "tasks; tools: *), statusline-setup (tools: Read, Edit), output-style-setup (tools: "
        "Read, Write, Edit, Glob, Grep). Each invocation is stateless: the prompt must hold "
        "everything the agent needs, and its final message isn't shown to the user, so "
        "summarise it yourself.",
        {
            "description": {"type": "string", "description": "3-5 word task summary"},
            "prompt": {"type": "string"},
            "subagent_type": {"type": "string"},
        },
        ["description", "prompt", "subagent_type"],
    ),
    (
        "NotebookEdit",
        "Replace, insert or delete one cell of a Jupyter notebook (.ipynb). cell_number is "
        "0-indexed; edit_mode defaults to replace.",
        {
            "notebook_path": {"type": "string"},
            "cell_number": {"type": "number"},
            "new_source": {"type": "string"},
            "cell_type": {"type": "string", "enum": ["code", "markdown"]},
            "edit_mode": {"type": "string", "enum": ["replace", "insert", "delete"]},
        },
        ["notebook_path", "new_source"],
    ),
    (
        "BashOutput",
        "Fetch new output of a background shell started with run_in_background. Returns only "
        "output produced since the last call, plus the shell's status.",
        {
            "bash_id": {"type": "string"},
            "filter": {"type": "string", "description": "Optional regex; non-matching lines "
                       "are dropped"},
        },
        ["bash_id"],
    ),
    (
        "KillShell",
        "Stop a background shell by id.",
        {"shell_id": {"type": "string"}},
        ["shell_id"],
    ),
)


def _tool_schema_json(name: str, desc: str, props: dict[str, Any], req: list[str]) -> str:
    params = {
        "type": "object",
        "properties": props,
        "required": req,
        "additionalProperties": False,
        "$schema": "http://json-schema.org/draft-07/schema#",
    }
    obj = {"type": "function", "function": {"name": name, "description": desc,
                                             "parameters": params}}
    return json.dumps(obj, ensure_ascii=False)


_TOOL_SCHEMAS = tuple(_tool_schema_json(*t) for t in _TOOLS)


def _gerund(verb: str) -> str:
    if verb in ("get", "set", "split", "emit", "commit", "scan"):
        return verb + verb[-1] + "ing"
    if verb.endswith("e") and not verb.endswith("ee"):
        return verb[:-1] + "ing"
    return verb + "ing"


def _center(title: str, ch: str = "=", width: int = 80) -> str:
    return f" {title} ".center(width, ch)


def _tabify(text: str) -> str:
    out = []
    for line in text.split("\n"):
        stripped = line.lstrip(" ")
        n = (len(line) - len(stripped)) // 4
        out.append("\t" * n + line[4 * n :] if n else line)
    return "\n".join(out)


_BAR = "\u2501" * 40
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


# --------------------------------------------------------------------------------------------
# Content generator (one per session; all randomness comes from the session's Random)
# --------------------------------------------------------------------------------------------


class _Content:
    """Draws every piece of text for one session from a single seeded Random."""

    def __init__(self, rng: Random) -> None:
        r = self.r = rng
        self.user = r.choice(_USERS)
        self.fullname = r.choice(_FULLNAMES)
        self.project = f"{r.choice(_PROJ_A)}{r.choice(('-', '_', ''))}{r.choice(_PROJ_B)}"
        self.pkg = self.project.replace("-", "_")
        self.root = f"/home/{self.user}/src/{self.project}"
        self.clock = 1_700_000_000 + r.randrange(60_000_000)
        self._idents = [self._new_ident() for _ in range(48)]
        self._classes = [self._new_class() for _ in range(16)]
        self.files = [self._new_path() for _ in range(36)]
        self.branch = f"{r.choice(('feat', 'fix', 'chore', 'perf'))}/{self.kebab()}"
        kinds: dict[str, Callable[[], str]] = {
            "id": self.ident, "C": self.cls, "cc": self.camel, "K": self.const,
            "w": self.noun, "x": self.small, "n": self.number, "fl": self.flt,
            "s": self.literal, "doc": self.sentence, "cm": self.comment,
            "h": lambda: self.hexs(r.choice((7, 12, 16, 40))), "u": self.uuid,
            "p": lambda: self.path()[0], "user": lambda: self.user, "kb": self.kebab,
            "e": self.emoji, "ts": self.date,
        }
        self._kinds = kinds
        self._sources: dict[str, Callable[[], str]] = {
            "py": lambda: self.fill(r.choice(_PY_BLOCKS)),
            "ts": lambda: self.fill(r.choice(_JS_BLOCKS)),
            "js": lambda: self.fill(r.choice(_JS_BLOCKS)),
            "rs": lambda: self.fill(r.choice(_RS_BLOCKS)),
            "go": lambda: _tabify(self.fill(r.choice(_GO_BLOCKS))),
            "yaml": lambda: self.fill(r.choice(_YAML_BLOCKS)),
            "toml": lambda: self.fill(r.choice(_TOML_BLOCKS)),
            "sql": lambda: self.fill(r.choice(_SQL_BLOCKS)),
            "sh": lambda: self.fill(r.choice(_SH_BLOCKS)),
            "mk": lambda: _tabify(self.fill(r.choice(_MK_BLOCKS))),
            "md": self._md_block,
            "json": self._json_block,
            "csv": self._csv_block,
        }

    # ---- atoms -------------------------------------------------------------------------

    def _new_ident(self) -> str:
        r = self.r
        k = r.random()
        if k < 0.45:
            return f"{r.choice(_VERBS)}_{r.choice(_NOUNS)}"
        if k < 0.7:
            return f"{r.choice(_ADJS)}_{r.choice(_NOUNS)}"
        if k < 0.92:
            return f"{r.choice(_VERBS)}_{r.choice(_ADJS)}_{r.choice(_NOUNS)}"
        return f"{r.choice(_NOUNS)}{r.randint(2, 64)}"

    def _new_class(self) -> str:
        r = self.r
        words = [r.choice(_ADJS)] if r.random() < 0.3 else []
        words += [r.choice(_NOUNS), r.choice(_NOUNS)]
        return "".join(w.capitalize() for w in words)

    def _new_path(self) -> tuple[str, str]:
        r = self.r
        lang = r.choices(
            ("py", "ts", "js", "rs", "go", "yaml", "toml", "md", "json", "sql", "sh", "mk", "csv"),
            weights=(30, 10, 4, 10, 5, 5, 3, 6, 5, 2, 2, 1, 2),
        )[0]
        n1, n2 = r.choice(_NOUNS), r.choice(_NOUNS)
        if lang == "py":
            if r.random() < 0.35:
                return f"tests/test_{self.ident()}.py", lang
            return f"{self.pkg}/{n1}/{self.ident()}.py", lang
        if lang == "ts":
            return r.choice((f"web/src/components/{self.cls()}.tsx",
                             f"web/src/lib/{self.camel()}.ts")), lang
        if lang == "js":
            return f"scripts/{self.kebab()}.js", lang
        if lang == "rs":
            return r.choice((f"crates/{n1}-{n2}/src/{n1}.rs", "src/lib.rs", "src/main.rs")), lang
        if lang == "go":
            return f"internal/{n1}/{n2}.go", lang
        if lang == "yaml":
            return r.choice((".github/workflows/ci.yml", f"deploy/k8s/{n1}.yaml",
                             "docker-compose.yml")), lang
        if lang == "toml":
            return r.choice(("pyproject.toml", "Cargo.toml", f"crates/{n1}/Cargo.toml")), lang
        if lang == "md":
            return r.choice(("README.md", "CHANGELOG.md", f"docs/{n1}.md", "CLAUDE.md")), lang
        if lang == "json":
            return r.choice(("package.json", f"config/{n1}.json", "tokenizer_config.json",
                             ".vscode/settings.json")), lang
        if lang == "sql":
            return f"migrations/{r.randint(1, 120):04d}_{r.choice(_VERBS)}_{n1}.sql", lang
        if lang == "sh":
            return f"scripts/{r.choice(_VERBS)}-{n1}.sh", lang
        if lang == "csv":
            return f"data/{n1}_{r.choice(('2023', '2024', 'eval', 'raw'))}.csv", lang
        return "Makefile", lang

    def noun(self) -> str:
        return self.r.choice(_NOUNS)

    def ident(self) -> str:
        if self.r.random() < 0.8:
            return self.r.choice(self._idents)
        return self._new_ident()

    def cls(self) -> str:
        if self.r.random() < 0.75:
            return self.r.choice(self._classes)
        return self._new_class()

    def camel(self) -> str:
        head, *rest = self.ident().lstrip("_").split("_")
        return head + "".join(p.capitalize() for p in rest)

    def const(self) -> str:
        return self.ident().upper().lstrip("_")

    def kebab(self) -> str:
        return self.ident().strip("_").replace("_", "-")

    def path(self) -> tuple[str, str]:
        return self.r.choice(self.files)

    def abspath(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def hexs(self, n: int) -> str:
        return f"{self.r.getrandbits(4 * n):0{n}x}"

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.r.getrandbits(128), version=4))

    def small(self) -> str:
        return str(self.r.choice((0, 1, 2, 3, 4, 5, 7, 8, 10, 12, 16, 32, 64, 100, 128, 256)))

    def number(self) -> str:
        r = self.r
        k = r.randrange(9)
        if k == 0:
            return f"{r.randrange(1, 10**7):_}"
        if k == 1:
            return f"0x{r.getrandbits(32):08X}"
        if k == 2:
            return str(r.choice((18446744073709551615, 4294967295, 9007199254740993, 65535)))
        if k == 3:
            return f"{r.uniform(-1e6, 1e6):.6f}"
        if k == 4:
            return f"{r.uniform(1, 9):.3f}e-{r.randint(3, 12)}"
        if k == 5:
            return str(-r.randrange(1, 100000))
        return str(r.randrange(10, 1_000_000))

    def flt(self) -> str:
        return f"{self.r.lognormvariate(2, 1.5):.{self.r.randint(1, 4)}f}"

    def date(self) -> str:
        self.clock += self.r.randrange(1, 90_000)
        return datetime.fromtimestamp(self.clock, UTC).strftime("%Y-%m-%d")

    def ts(self) -> str:
        self.clock += self.r.randrange(0, 5)
        us = self.r.randrange(1_000_000)
        return datetime.fromtimestamp(self.clock, UTC).strftime("%Y-%m-%dT%H:%M:%S") + (
            f".{us:06d}Z"
        )

    def emoji(self) -> str:
        return self.r.choice(_EMOJI)

    def foreign(self) -> str:
        return self.r.choice(_FOREIGN)

    def sentence(self) -> str:
        r = self.r
        s = r.choice(_SENTENCES).format(
            noun=r.choice(_NOUNS), noun2=r.choice(_NOUNS), adj=r.choice(_ADJS),
            verb=r.choice(_VERBS), n=f"{r.randrange(100, 10**6):,}", ident=self.ident(),
            pct=r.randint(60, 99),
        )
        if r.random() < 0.05:
            s = s.replace("'", "\u2019")
        return s

    def comment(self) -> str:
        k = self.r.random()
        if k < 0.2:
            return self.foreign()
        if k < 0.25:
            return f"{self.sentence()} {self.emoji()}"
        return self.sentence()

    def literal(self) -> str:
        """Body of a double-quoted string literal (valid in Python/JS/Rust/Go)."""
        r = self.r
        k = r.randrange(12)
        if k == 0:
            return r.choice(_SPECIAL_LOOKALIKES)
        if k == 1:
            return self.foreign()
        if k == 2:
            return f"{self.noun()} {self.emoji()} ready"
        if k == 3:
            return r.choice(("\\t", "\\n", "\\r\\n", "\\x00", "\\u00e9", "\\\\")) + self.noun()
        if k == 4:
            return f"/api/v{r.randint(1, 3)}/{self.kebab()}/{{id}}"
        if k == 5:
            return self.hexs(r.choice((8, 16, 32)))
        if k == 6:
            return f"{self.noun()} missing for %s (code=%d)"
        if k == 7:
            return f"h\u00e9llo w\u00f6rld \u2014 {self.noun()}"
        if k == 8:
            return f"{self.noun()}{r.choice(_ODD_SPACES)}{self.noun()}"
        if k == 9:
            return f"it's {r.choice(_ADJS)}, don't {r.choice(_VERBS)} it"
        return f"{self.noun()}_{self.noun()}"

    def fill(self, tpl: str) -> str:
        vals: dict[str, str] = {}
        kinds = self._kinds

        def sub(m: re.Match[str]) -> str:
            key = m.group(0)
            v = vals.get(key)
            if v is None:
                v = vals[key] = kinds[m.group(1)]()
            return v

        return _TEMPLATE_VAR.sub(sub, tpl)

    # ---- whitespace / line-ending roughening --------------------------------------------

    def roughen(self, text: str, p: float = 0.04) -> str:
        """Trailing whitespace on some lines and an occasional run of blank lines."""
        r = self.r
        lines = text.split("\n")
        for i in range(len(lines)):
            if r.random() < p:
                lines[i] += r.choice((" ", "  ", "\t", "    ", " \t"))
            elif r.random() < p / 4:
                lines[i] += "\n" * r.randint(2, 5)
        return "\n".join(lines)

    # ---- source files ------------------------------------------------------------------

    def _md_block(self) -> str:
        r = self.r
        if r.random() < 0.2:
            lines = [f"## {self.foreign()[:12]}", ""]
            lines += [self.foreign() for _ in range(r.randint(2, 5))]
            return "\n".join(lines) + "\n\n"
        return self.fill(r.choice(_MD_BLOCKS))

    def _json_block(self) -> str:
        r = self.r
        obj = self.json_obj(r.randint(2, 4))
        if r.random() < 0.5:
            return json.dumps(obj, indent=2, ensure_ascii=r.random() < 0.3) + "\n"
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=r.random() < 0.3) + "\n"

    def _csv_block(self) -> str:
        r = self.r
        rows = []
        sep = "\t" if r.random() < 0.3 else ","
        for i in range(r.randint(5, 25)):
            name = self.foreign()[:10] if r.random() < 0.2 else self.ident()
            note = '"' + self.sentence().replace('"', '""') + '"'
            rows.append(sep.join((str(r.randrange(10**6) + i), name, self.flt(), self.ts(), note)))
        return "\n".join(rows) + "\n"

    def json_obj(self, depth: int) -> Any:
        r = self.r
        if depth <= 0:
            k = r.randrange(8)
            if k == 0:
                return r.randrange(-(10**9), 10**12)
            if k == 1:
                return round(r.uniform(-100, 100), r.randint(1, 9))
            if k == 2:
                return r.choice((True, False, None))
            if k == 3:
                return self.uuid()
            if k == 4:
                return [r.randrange(200_000) for _ in range(r.randint(3, 24))]
            if k == 5:
                return self.foreign()
            if k == 6:
                return self.ts()
            return self.literal()
        out: dict[str, Any] = {}
        for _ in range(r.randint(2, 6)):
            key = r.choice((self.ident(), self.camel(), self.noun(), "id", "type", "data"))
            out[key] = self.json_obj(depth - r.randint(1, 2))
        if r.random() < 0.3:
            out["items"] = [self.json_obj(depth - 2) for _ in range(r.randint(1, 4))]
        return out

    def source(self, lang: str, size: int) -> str:
        """A source/config file of roughly ``size`` characters (at least one block)."""
        r = self.r
        gen = self._sources.get(lang, self._sources["py"])
        parts: list[str] = []
        total = 0
        if lang == "py":
            head = self._py_header()
            parts.append(head)
            total += len(head)
        elif lang == "csv":
            parts.append(_CSV_HEADER)
        while total < size:
            b = self._py_id_list() if lang == "py" and r.random() < 0.08 else gen()
            parts.append(b)
            total += len(b)
        text = "".join(parts)
        if len(text) > size * 1.3 + 200:
            cut = text.rfind("\n", 0, max(size, 80))
            text = text[: cut + 1] if cut > 0 else text[:size]
        return self.roughen(text, 0.02)

    def _py_header(self) -> str:
        r = self.r
        mods = sorted(r.sample(_PY_STDLIB, r.randint(2, 6)))
        lines = ['"""' + self.sentence() + '"""', "", "from __future__ import annotations", ""]
        lines += [f"import {m}" for m in mods]
        lines += ["from dataclasses import dataclass, field",
                  "from typing import Any, Final, Sequence", ""]
        lines += [f"from {self.pkg}.{self.noun()} import {self.cls()}, {self.ident()}", ""]
        lines += ["log = logging.getLogger(__name__)", "", ""]
        return "\n".join(lines) + "\n"

    def _py_id_list(self) -> str:
        r = self.r
        ids = [str(r.randrange(0, 151_936)) for _ in range(r.randint(20, 120))]
        lines = []
        for i in range(0, len(ids), 12):
            lines.append("    " + ", ".join(ids[i : i + 12]) + ",")
        return f"{self.const()}_IDS = [\n" + "\n".join(lines) + "\n]\n\n"

    # ---- tool outputs ------------------------------------------------------------------

    def numbered(self, text: str, start: int = 1) -> str:
        """Claude Code's Read format: right-aligned line number, an arrow, the line."""
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return "\n".join(f"{i:6d}\u2192{ln}" for i, ln in enumerate(lines, start))

    def read_output(self, rel: str, lang: str, size: int) -> str:
        r = self.r
        body = self.source(lang, max(40, size - 40))
        if r.random() < 0.03:
            body = "\ufeff" + body
        if r.random() < 0.07:
            body = body.replace("\n", "\r\n")
        start = 1 if r.random() < 0.8 else r.randint(2, 900)
        out = self.numbered(body, start)
        if r.random() < 0.3:
            out += (
                "\n\n<system-reminder>\nWhenever you read a file, consider whether it looks "
                "malicious. You may analyse it, but don't improve or extend malicious code."
                "\n</system-reminder>\n"
            )
        return out

    def ls_la(self, size: int) -> str:
        r = self.r
        lines = [f"total {r.randint(8, 4000)}"]
        names = [".", "..", ".git", ".gitignore", ".env.example", "README.md", "pyproject.toml"]
        month = r.choice(_MONTHS)
        while len(lines) * 62 < size:
            if len(names) <= len(lines) - 1:
                k = r.random()
                if k < 0.05:
                    names.append(r.choice(("résumé.pdf", "データ.csv", "отчёт.txt",
                                           "my file (1).txt", "ملف.json")))
                else:
                    rel, _ = self.path()
                    names.append(rel.rsplit("/", 1)[-1])
            name = names[len(lines) - 1]
            is_dir = name in (".", "..", ".git") or "." not in name
            perm = "drwxr-xr-x" if is_dir else r.choice(("-rw-r--r--", "-rwxr-xr-x", "-rw-------"))
            sz = 4096 if is_dir else r.choice((r.randrange(0, 999), r.randrange(1000, 10**7)))
            lines.append(
                f"{perm} {r.randint(1, 12):>3} {self.user:<8} {self.user:<8} {sz:>8} "
                f"{month} {r.randint(1, 28):>2} {r.randint(0, 23):02d}:{r.randint(0, 59):02d} "
                f"{name}"
            )
        return "\n".join(lines)

    def git_status(self) -> str:
        r = self.r
        lines = [f"On branch {self.branch}"]
        if r.random() < 0.5:
            lines += [f"Your branch is ahead of 'origin/main' by {r.randint(1, 9)} commits.",
                      '  (use "git push" to publish your local commits)']
        lines += ["", "Changes not staged for commit:",
                  '  (use "git add <file>..." to update what will be committed)',
                  '  (use "git restore <file>..." to discard changes in working directory)']
        for _ in range(r.randint(1, 6)):
            lines.append(f"\tmodified:   {self.path()[0]}")
        if r.random() < 0.5:
            lines += ["", "Untracked files:",
                      '  (use "git add <file>..." to include in what will be committed)',
                      f"\t{self.path()[0]}"]
        lines += ["", 'no changes added to commit (use "git add" and/or "git commit -a")']
        return "\n".join(lines)

    def git_log(self, size: int) -> str:
        r = self.r
        parts = []
        total = 0
        oneline = r.random() < 0.4
        while total < size:
            h = self.hexs(40)
            msg = f"{r.choice(('fix', 'feat', 'perf', 'refactor', 'test'))}: {self.sentence()}"
            if oneline:
                s = f"{h[:7]} {msg}"
            else:
                self.clock += r.randrange(100, 90_000)
                d = datetime.fromtimestamp(self.clock, UTC)
                s = (f"commit {h}\nAuthor: {r.choice(_FULLNAMES)} <{self.user}@example.com>\n"
                     f"Date:   {d.strftime('%a %b %d %H:%M:%S %Y')} +0{r.randint(0, 9)}00\n\n"
                     f"    {msg}\n")
                if r.random() < 0.3:
                    s += f"\n    {self.sentence()}\n\n    Co-Authored-By: {r.choice(_FULLNAMES)}\n"
            parts.append(s)
            total += len(s) + 1
        return "\n".join(parts)

    def git_diff(self, size: int) -> str:
        r = self.r
        out: list[str] = []
        total = 0
        while total < size:
            rel, lang = self.path()
            if lang not in ("py", "ts", "js", "rs", "go", "yaml", "toml", "md", "sql"):
                rel, lang = f"{self.pkg}/{self.ident()}.py", "py"
            src = self.source(lang, r.randint(600, 2500)).split("\n")
            hdr = (f"diff --git a/{rel} b/{rel}\nindex {self.hexs(7)}..{self.hexs(7)} 100644\n"
                   f"--- a/{rel}\n+++ b/{rel}")
            chunk = [hdr]
            pos = 0
            for _ in range(r.randint(1, 3)):
                if pos >= len(src) - 4:
                    break
                a = r.randint(pos, len(src) - 4)
                ctx1 = src[max(0, a - 3) : a]
                old = src[a : a + r.randint(1, 4)]
                new = [self._mutate(x) for x in old]
                if r.random() < 0.4:
                    new += self.source(lang, 120).split("\n")[: r.randint(1, 5)]
                b = a + len(old)
                ctx2 = src[b : b + 3]
                old_start = max(0, a - 3) + 1
                func = f" def {self.ident()}(" if lang == "py" else ""
                chunk.append(
                    f"@@ -{old_start},{len(ctx1) + len(old) + len(ctx2)} "
                    f"+{old_start},{len(ctx1) + len(new) + len(ctx2)} @@{func}"
                )
                chunk += [" " + x for x in ctx1] + ["-" + x for x in old]
                chunk += ["+" + x for x in new] + [" " + x for x in ctx2]
                pos = b + 3
            s = "\n".join(chunk)
            out.append(s)
            total += len(s) + 1
        return "\n".join(out)

    def _mutate(self, line: str) -> str:
        r = self.r
        k = r.random()
        if k < 0.4 and line.strip():
            words = re.findall(r"[A-Za-z_]{4,}", line)
            if words:
                return line.replace(r.choice(words), self.ident(), 1)
        if k < 0.6:
            return re.sub(r"\d+", lambda _m: str(r.randrange(1000)), line, count=1)
        if k < 0.8:
            return line.rstrip() + f"  # {self.comment()}"
        return line

    def pytest_log(self, size: int) -> str:
        r = self.r
        color = r.random() < 0.15
        n_files = max(1, size // 900)
        collected = r.randint(20, 60) * n_files
        lines = [
            _center("test session starts"),
            f"platform linux -- Python 3.11.{r.randint(4, 11)}, pytest-8.{r.randint(0, 3)}."
            f"{r.randint(0, 5)}, pluggy-1.5.0",
            f"rootdir: {self.root}",
            "configfile: pyproject.toml",
            f"plugins: hypothesis-6.{r.randint(90, 130)}.{r.randint(0, 9)}, anyio-4.4.0",
            f"collected {collected} items",
            "",
        ]
        done = 0
        failures: list[str] = []
        per = collected // n_files
        for _ in range(n_files):
            name = f"tests/test_{self.ident()}.py"
            marks = "".join(
                r.choices((".", "F", "s", "x", "E"), weights=(90, 3, 3, 2, 1))[0]
                for _ in range(per)
            )
            done += per
            pct = min(100, done * 100 // collected)
            lines.append(f"{name} {marks}".ljust(73) + f" [{pct:3d}%]")
            failures += [name] * marks.count("F")
        n_fail = len(failures)
        if n_fail:
            lines += ["", _center("FAILURES")]
            for name in failures[:6]:
                t = f"test_{self.ident()}"
                a, b = r.randint(0, 99), r.randint(0, 99)
                lines += [
                    _center(f"{t}[{self.noun()}-{r.randint(0, 9)}]", "_"),
                    "",
                    f"    def {t}({self.noun()}: {self.cls()}) -> None:",
                    f"        out = {self.ident()}({self.noun()}, \"{self.literal()}\")",
                    f">       assert len(out) == {b}",
                    f"E       AssertionError: assert {a} == {b}",
                    f"E        +  where {a} = len([{r.randint(0, 151_000)}, "
                    f"{r.randint(0, 151_000)}, ...])",
                    "",
                    f"{name}:{r.randint(10, 900)}: AssertionError",
                    _center("Captured stdout call", "-"),
                    f"{self.ts()} DEBUG {self.sentence()}",
                ]
            lines += ["", _center("short test summary info")]
            lines += [f"FAILED {n}::test_{self.ident()} - AssertionError" for n in failures[:10]]
        summary = f"{collected - n_fail} passed"
        if n_fail:
            summary = f"{n_fail} failed, " + summary
        summary += f", {r.randint(0, 5)} skipped in {r.uniform(0.5, 90):.2f}s"
        if color:
            summary = ("\x1b[31m" if n_fail else "\x1b[32m") + summary + "\x1b[0m"
        lines.append(_center(summary))
        return "\n".join(lines)

    def cargo_log(self, size: int) -> str:
        r = self.r
        crate = self.project.replace("_", "-")
        lines = [
            f"   Compiling {self.kebab()} v0.{r.randint(1, 9)}.{r.randint(0, 20)}",
            f"   Compiling {crate} v0.1.0 ({self.root})",
        ]
        if r.random() < 0.3:
            v = self.ident()
            lines += [
                f"warning: unused variable: `{v}`",
                f"  --> src/{self.noun()}.rs:{r.randint(5, 400)}:{r.randint(5, 30)}",
                "   |",
                f"{r.randint(5, 400):>3} |     let {v} = {self.ident()}(&input)?;",
                f"    |         {'^' * len(v)} help: if this is intentional, prefix it with an "
                f"underscore: `_{v}`",
                "   |",
                "   = note: `#[warn(unused_variables)]` on by default",
                "",
            ]
        lines += [
            f"    Finished `test` profile [unoptimized + debuginfo] target(s) in "
            f"{r.uniform(0.5, 60):.2f}s",
            f"     Running unittests src/lib.rs (target/debug/deps/{crate}-{self.hexs(16)})",
            "",
        ]
        n = max(3, size // 60)
        lines.append(f"running {n} tests")
        failed: list[str] = []
        for _ in range(n):
            t = f"{self.noun()}::tests::{self.ident()}"
            ok = r.random() > 0.04
            lines.append(f"test {t} ... {'ok' if ok else 'FAILED'}")
            if not ok:
                failed.append(t)
        if failed:
            lines += ["", "failures:", ""]
            for t in failed[:4]:
                lines += [
                    f"---- {t} stdout ----",
                    f"thread '{t}' panicked at src/{self.noun()}.rs:{r.randint(5, 500)}:"
                    f"{r.randint(1, 40)}:",
                    "assertion `left == right` failed",
                    f"  left: [{r.randint(0, 99999)}, {r.randint(0, 99999)}]",
                    f" right: [{r.randint(0, 99999)}]",
                    "note: run with `RUST_BACKTRACE=1` environment variable to display a "
                    "backtrace",
                    "",
                ]
        res = "FAILED" if failed else "ok"
        lines += [
            "",
            f"test result: {res}. {n - len(failed)} passed; {len(failed)} failed; 0 ignored; "
            f"0 measured; 0 filtered out; finished in {r.uniform(0, 5):.2f}s",
        ]
        return "\n".join(lines)

    def jest_log(self, size: int) -> str:
        r = self.r
        lines: list[str] = []
        total_tests = 0
        failed = 0
        while len(lines) * 60 < size:
            f = f"src/{self.noun()}/{self.cls()}.test.tsx"
            ok = r.random() > 0.15
            lines.append(f"{' PASS ' if ok else ' FAIL '} {f} ({r.uniform(0.2, 9):.3f} s)")
            total_tests += r.randint(2, 20)
            if not ok:
                failed += 1
                ln = r.randint(10, 200)
                lines += [
                    f"  \u25cf {self.cls()} \u203a renders {self.noun()} when {self.literal()}",
                    "",
                    "    expect(received).toBe(expected) // Object.is equality",
                    "",
                    f"    Expected: {r.randint(0, 9)}",
                    f"    Received: {r.randint(0, 9)}",
                    "",
                    f"      {ln - 1} |   it(\"renders\", async () => {{",
                    f"    > {ln} |     expect(count).toBe(3);",
                    f"      {' ' * len(str(ln))} |                   ^",
                    f"      {ln + 1} |   }});",
                    "",
                    f"      at Object.<anonymous> ({f}:{ln}:19)",
                    "",
                ]
        lines += [
            f"Test Suites: {failed} failed, {r.randint(5, 40)} passed",
            f"Tests:       {failed} failed, {total_tests} passed, {total_tests + failed} total",
            "Snapshots:   0 total",
            f"Time:        {r.uniform(1, 30):.3f} s",
            "Ran all test suites.",
        ]
        return "\n".join(lines)

    def traceback(self) -> str:
        r = self.r
        k = r.random()
        if k < 0.55:
            lines = ["Traceback (most recent call last):"]
            for _ in range(r.randint(2, 7)):
                rel = f"{self.pkg}/{self.noun()}/{self.ident()}.py"
                call = f"{self.ident()}({self.noun()}, offset={self.noun()}_offset)"
                lines += [
                    f'  File "{self.abspath(rel)}", line {r.randint(1, 2000)}, in {self.ident()}',
                    f"    result = self.{call}",
                    "             " + "^" * (len(call) + 5),
                ]
            exc = r.choice(("IndexError", "KeyError", "ValueError", "UnicodeDecodeError",
                            "AssertionError", "RuntimeError", "TypeError"))
            if exc == "UnicodeDecodeError":
                msg = ("'utf-8' codec can't decode byte 0xe2 in position "
                       f"{r.randint(0, 9999)}: unexpected end of data")
            else:
                msg = f"{self.noun()} {r.randint(0, 99999)} out of range ({self.literal()})"
            lines.append(f"{exc}: {msg}")
            return "\n".join(lines)
        if k < 0.75:
            lines = [f"TypeError: Cannot read properties of undefined (reading '{self.camel()}')"]
            for _ in range(r.randint(3, 8)):
                lines.append(
                    f"    at {self.cls()}.{self.camel()} (file://{self.root}/web/src/"
                    f"{self.noun()}.ts:{r.randint(1, 400)}:{r.randint(1, 80)})"
                )
            lines.append("    at process.processTicksAndRejections (node:internal/process/"
                         "task_queues:95:5)")
            return "\n".join(lines)
        if k < 0.9:
            lines = [
                f"thread 'main' panicked at src/{self.noun()}.rs:{r.randint(1, 900)}:"
                f"{r.randint(1, 60)}:",
                "called `Option::unwrap()` on a `None` value",
                "stack backtrace:",
            ]
            rc = self.hexs(40)
            for i in range(r.randint(3, 9)):
                lines += [
                    f"  {i:>2}: {self.pkg}::{self.noun()}::{self.ident()}",
                    f"             at /rustc/{rc}/library/core/src/{self.noun()}.rs:"
                    f"{r.randint(1, 3000)}:{r.randint(1, 60)}",
                ]
            return "\n".join(lines)
        lines = [f"Exception in thread \"main\" java.lang.IllegalStateException: "
                 f"{self.sentence()}"]
        for _ in range(r.randint(3, 10)):
            c = self.cls()
            lines.append(f"\tat com.example.{self.noun()}.{c}.{self.camel()}({c}.java:"
                         f"{r.randint(1, 999)})")
        lines.append(f"\t... {r.randint(3, 40)} more")
        return "\n".join(lines)

    def log_lines(self, size: int) -> str:
        r = self.r
        lines = []
        total = 0
        as_json = r.random() < 0.35
        while total < size:
            lvl = r.choices(("INFO", "DEBUG", "WARN", "ERROR"), weights=(60, 25, 10, 5))[0]
            if as_json:
                obj = {
                    "ts": self.ts(), "level": lvl.lower(), "msg": self.sentence(),
                    "request_id": self.uuid(), "latency_ms": round(r.lognormvariate(2, 1), 3),
                    "tokens": r.randrange(1, 200_000), "session": self.hexs(16),
                }
                s = json.dumps(obj, ensure_ascii=r.random() < 0.5)
            else:
                s = (f"{self.ts()} {lvl:<5} [{self.noun()}] request_id={self.uuid()} "
                     f"latency_ms={r.lognormvariate(2, 1):.3f} bytes={r.randrange(10**8)} "
                     f"sha256={self.hexs(64)} client=10.{r.randint(0, 255)}."
                     f"{r.randint(0, 255)}.{r.randint(1, 254)}")
                if lvl == "ERROR" and r.random() < 0.5:
                    s += "\n" + self.traceback()
            lines.append(s)
            total += len(s) + 1
        return "\n".join(lines)

    def base64_blob(self, size: int) -> str:
        r = self.r
        raw = r.randbytes(max(3, size * 3 // 4))
        enc = base64.b64encode(raw).decode("ascii")
        k = r.random()
        if k < 0.35:
            return "\n".join(enc[i : i + 76] for i in range(0, len(enc), 76))
        if k < 0.6:
            body = "\n".join(enc[i : i + 64] for i in range(0, len(enc), 64))
            return f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----"
        if k < 0.8:
            return f"data:image/png;base64,{enc}"
        head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
        body = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        return f"{head}.{body}.{base64.urlsafe_b64encode(r.randbytes(32)).decode().rstrip('=')}"

    def pip_log(self, size: int) -> str:
        r = self.r
        lines: list[str] = []
        while len(lines) * 110 < size:
            pkg = r.choice(("numpy", "tokenizers", "httpx", "pydantic", "torch", "uvloop",
                            "orjson", "safetensors", "regex"))
            ver = f"{r.randint(0, 3)}.{r.randint(0, 30)}.{r.randint(0, 9)}"
            mb = r.uniform(0.1, 900)
            lines += [
                f"Collecting {pkg}>={ver}",
                f"  Downloading {pkg}-{ver}-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_"
                f"x86_64.whl.metadata ({r.randint(1, 90)} kB)",
                f"     {_BAR} {mb:.1f}/{mb:.1f} MB {r.uniform(1, 90):.1f} MB/s "
                "eta 0:00:00",
            ]
            if r.random() < 0.2:
                lines.append("\r".join(f"Progress {p}%" for p in range(0, 101, 25)))
        lines.append(f"Successfully installed {' '.join(f'{self.noun()}-1.{i}' for i in range(4))}")
        return "\n".join(lines)

    def table_output(self) -> str:
        r = self.r
        k = r.random()
        if k < 0.4:
            rows = [f"{'NAME':<36}{'READY':<8}{'STATUS':<20}{'RESTARTS':<10}AGE"]
            for _ in range(r.randint(3, 12)):
                rows.append(f"{self.kebab() + '-' + self.hexs(10)[:10]:<36}"
                            f"{r.randint(0, 1)}/1     "
                            f"{r.choice(('Running', 'CrashLoopBackOff', 'Pending')):<20}"
                            f"{r.randint(0, 40):<10}{r.randint(1, 90)}m")
            return "\n".join(rows)
        if k < 0.7:
            rows = [
                "+-----------------------------------------------------------------------------+",
                f"| NVIDIA-SMI 550.{r.randint(10, 99)}.{r.randint(1, 9):02d}    "
                f"Driver Version: 550.{r.randint(10, 99)}    CUDA Version: 12.4     |",
                "|-------------------------------+----------------------+----------------------+",
                "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |",
                "|===============================+======================+======================|",
            ]
            for g in range(r.randint(1, 8)):
                rows.append(
                    f"|   {g}  NVIDIA H100 80GB    On | 00000000:{r.randint(10, 99)}:00.0 Off |"
                    f"                    0 |"
                )
                rows.append(
                    f"| N/A   {r.randint(30, 80)}C    P0   {r.randint(60, 700):>3}W / 700W | "
                    f"{r.randint(0, 81000):>5}MiB / 81559MiB | {r.randint(0, 100):>3}%      "
                    "Default |"
                )
            rows.append(rows[0])
            return "\n".join(rows)
        rows = [f"{self.project}/"]
        for i in range(r.randint(4, 14)):
            last = i == 13
            rows.append(("\u2514\u2500\u2500 " if last else "\u251c\u2500\u2500 ")
                        + self.path()[0].split("/")[0])
            if r.random() < 0.5:
                rows.append("\u2502   \u2514\u2500\u2500 " + self.path()[0].rsplit("/", 1)[-1])
        rows.append(f"\n{r.randint(3, 40)} directories, {r.randint(10, 400)} files")
        return "\n".join(rows)

    def web_page(self, size: int) -> str:
        r = self.r
        parts = [f"# {self.foreign()}\n"]
        total = len(parts[0])
        while total < size:
            k = r.random()
            if k < 0.45:
                s = " ".join(self.foreign() for _ in range(r.randint(2, 6)))
            elif k < 0.6:
                s = " ".join(self.sentence() for _ in range(r.randint(2, 5)))
            elif k < 0.75:
                s = "| " + " | ".join(self.foreign()[:8] for _ in range(3)) + " |\n|---|---|---|"
                for _ in range(r.randint(2, 6)):
                    s += f"\n| {self.noun()} | {self.flt()} | {self.emoji()} |"
            elif k < 0.85:
                s = " ".join(self.emoji() for _ in range(r.randint(3, 12)))
            else:
                s = "```python\n" + self.fill(r.choice(_PY_BLOCKS)) + "```"
            s += "\n\n"
            if r.random() < 0.1:
                s += "\n\n\n"
            parts.append(s)
            total += len(s)
        return "".join(parts)

    def grep_output(self, size: int) -> str:
        r = self.r
        lines = []
        total = 0
        pat = self.ident()
        while total < size:
            rel, lang = self.path()
            src = [x for x in self.source(lang, 300).split("\n") if x.strip()]
            for x in r.sample(src, min(len(src), r.randint(1, 4))):
                s = f"{rel}:{r.randint(1, 1500)}:{x}"
                lines.append(s)
                total += len(s) + 1
        if r.random() < 0.2:
            lines.append(f"{self.path()[0]}:{r.randint(1, 99)}:    # TODO: rename {pat}")
        return "\n".join(lines)

    def minified_response(self, size: int) -> str:
        r = self.r
        items = []
        total = 0
        while total < size:
            o = self.json_obj(r.randint(1, 3))
            s = json.dumps(o, separators=(",", ":"), ensure_ascii=r.random() < 0.4)
            items.append(o)
            total += len(s) + 1
        return json.dumps({"object": "list", "data": items, "has_more": r.random() < 0.5},
                          separators=(",", ":"), ensure_ascii=r.random() < 0.4)

    def bash(self, size: int) -> tuple[str, str, str]:
        """(command, description, output) with output of roughly ``size`` characters."""
        r = self.r
        if size < 200:
            j = r.randrange(7)
            if j == 0:
                return "git status --short", "Show short git status", "\n".join(
                    f"{r.choice((' M', 'M ', '??', 'A ', ' D'))} {self.path()[0]}"
                    for _ in range(r.randint(1, 4))
                )
            if j == 1:
                rel = self.path()[0]
                return f"wc -l {rel}", "Count lines", f"{r.randint(1, 4000)} {rel}"
            if j == 2:
                return f"mkdir -p {self.path()[0].rsplit('/', 1)[0]}", "Create directory", ""
            if j == 3:
                msg = self.sentence().replace('"', "")
                return (f'git commit -am "{msg}"', "Commit changes",
                        f"[{self.branch} {self.hexs(7)}] {msg}\n {r.randint(1, 9)} files changed,"
                        f" {r.randint(1, 300)} insertions(+), {r.randint(0, 99)} deletions(-)")
            if j == 4:
                return (f"python -c 'import {self.pkg}; print({self.pkg}.__version__)'",
                        "Print version",
                        f"0.{r.randint(1, 30)}.{r.randint(0, 9)}.dev{r.randint(0, 9)}")
            if j == 5:
                return "echo $? && which python", "Check exit code", (
                    f"{r.choice((0, 1, 2, 127))}\n/home/{self.user}/.venv/bin/python"
                )
            return f"ls {self.path()[0].split('/')[0]}", "List directory", "  ".join(
                self.path()[0].rsplit("/", 1)[-1] for _ in range(r.randint(2, 8))
            )
        k = r.random()
        if k < 0.2:
            return (f"python -m pytest -q tests/ -x --color={'yes' if r.random() < 0.2 else 'no'}",
                    "Run the test suite", self.pytest_log(size))
        if k < 0.3:
            return "cargo test --all-features 2>&1", "Run Rust tests", self.cargo_log(size)
        if k < 0.37:
            return "npx jest --ci", "Run JS tests", self.jest_log(size)
        if k < 0.5:
            return ("git diff" + r.choice(("", " HEAD~1", " --stat=0 main...")), "Show diff",
                    self.git_diff(size))
        if k < 0.56:
            return (f"git log -n {r.randint(5, 50)}" + r.choice(("", " --oneline")),
                    "Show recent commits", self.git_log(size))
        if k < 0.62:
            return (f"ls -la {r.choice(('', 'src/', self.pkg + '/'))}", "List files",
                    self.ls_la(size))
        if k < 0.7:
            return (f"tail -n {r.randint(50, 2000)} logs/{self.noun()}.log", "Show log tail",
                    self.log_lines(size))
        if k < 0.75:
            out = self.traceback() + "\n"
            out = self.log_lines(max(0, size - len(out))) + "\n" + out
            return f"python -m {self.pkg}.{self.noun()} --debug", "Run module", out
        if k < 0.8:
            return (f"grep -rn \"{self.ident()}\" {self.pkg}/ tests/", "Search code",
                    self.grep_output(size))
        if k < 0.84:
            return (f"curl -s localhost:8000/v1/{self.noun()}s?limit=100", "Query API",
                    self.minified_response(size))
        if k < 0.87:
            return (f"base64 < assets/{self.noun()}.png", "Encode asset",
                    self.base64_blob(size))
        if k < 0.9:
            return "pip install -e '.[dev]'", "Install deps", self.pip_log(size)
        if k < 0.93:
            return (r.choice(("kubectl get pods -n prod", "nvidia-smi", "tree -L 2")),
                    "Inspect environment", self.table_output())
        rel, lang = self.path()
        body = self.source(lang, size)
        if r.random() < 0.4:
            body = body.replace("\n", "\r\n")
        return f"cat {rel}", "Print file", body

    # ---- conversation pieces -----------------------------------------------------------

    def user_request(self) -> str:
        r = self.r
        rel = self.path()[0]
        ident = self.ident()
        templates = (
            f"Can you fix the failing test in {rel}? I don't think the {ident} change is right.",
            f"the {self.noun()} cache is returning stale results after a restart. pls look",
            f"WE'VE got a regression in `{ident}` since yesterday's merge, can you bisect it?",
            f"Add a --{self.kebab()} flag to the CLI and wire it through to {self.cls()}.",
            f"I'LL need a benchmark for {ident} before we merge this. Something like p50/p99 "
            f"over {r.randint(1, 50)}k calls.",
            f"Why does `{ident}` take {r.randint(2, 90)}s on a {r.randint(1, 8)}MB input? It "
            "shouldn't be quadratic.",
            f"Refactor {rel} so the {self.noun()} logic isn't duplicated. Keep the public API "
            "as-is, we've got callers outside this repo.",
            f"ok that works. now run the whole suite and commit if it's green {self.emoji()}",
            f"hmm no, that's wrong — the {self.noun()} must stay byte-identical. revert and try "
            "again",
            f"Write tests for the edge cases: empty input, CRLF, tabs, and '{self.literal()}'.",
            f"{self.foreign()} {self.foreign()}",
            f"The model keeps printing `{r.choice(_SPECIAL_LOOKALIKES)}` literally in its "
            f"output. Is our template escaping wrong? Here's the string: "
            f"`s = \"{r.choice(_SPECIAL_LOOKALIKES)}\"`",
            f"can u explain what {ident} does?? i didn't write it and the docstring's "
            "useless",
            "continue",
            f"Update the README table with the new numbers and don't forget the CHANGELOG "
            f"entry for {r.randint(0, 3)}.{r.randint(0, 40)}.{r.randint(0, 9)}.",
        )
        msg = r.choice(templates)
        if r.random() < 0.05:
            msg = msg.replace("'", "\u2019")
        return msg

    def user_message(self, budget: int, first: bool = False) -> str:
        r = self.r
        parts: list[str] = []
        if first or r.random() < 0.15:
            parts.append(
                "<system-reminder>\nAs you answer the user's questions, you can use the "
                "following context:\n# claudeMd\nContents of "
                f"{self.root}/CLAUDE.md (project instructions, checked into the codebase):\n\n"
                f"- Run `make test` before committing; don't push to main.\n"
                f"- Python 3.11, ruff + mypy --strict. Line length 100.\n"
                f"- {self.sentence()}\n\nIMPORTANT: this context may or may not be relevant "
                "to your tasks.\n</system-reminder>"
            )
        k = r.random()
        if not first and k < 0.02:
            return "[Request interrupted by user for tool use]"
        if not first and k < 0.05:
            cmd = r.choice(("review", "init", "compact", "cost"))
            parts.append(f"<command-message>{cmd} is running\u2026</command-message>\n"
                         f"<command-name>/{cmd}</command-name>")
        parts.append(self.user_request())
        used = sum(len(x) for x in parts)
        rest = budget - used
        if rest > 400 and r.random() < 0.6:
            paste = r.choice((self.traceback, lambda: self.log_lines(min(rest, 6000)),
                              lambda: self.source(self.path()[1], rest)))()
            if r.random() < 0.3:
                paste = paste.replace("\n", "\r\n")
            parts.append("```\n" + paste + "\n```")
        if r.random() < 0.1:
            parts.append(self.emoji() + " thx")
        return "\n\n".join(parts)

    def reasoning(self, cap: int) -> str:
        r = self.r
        target = min(int(r.lognormvariate(5.8, 0.7)), max(60, cap))
        rel = self.path()[0]
        opener = r.choice((
            f"The user wants me to look at {rel}.",
            "Okay, so the test output shows what's failing.",
            "Let me think about what's happening here.",
            f"Hmm, `{self.ident()}` returns the wrong {self.noun()} when the input is empty.",
            f"I need to check how {self.cls()} handles the {self.noun()} boundary first.",
        ))
        parts = [opener]
        total = len(opener)
        while total < target:
            k = r.random()
            if k < 0.5:
                s = self.sentence()
            elif k < 0.65:
                s = (f"Wait, actually {self.ident()} is called from {self.path()[0]}:"
                     f"{r.randint(1, 900)}, so changing it won't be enough.")
            elif k < 0.75:
                s = "\n\nPlan:\n" + "\n".join(
                    f"{i}. {r.choice(_VERBS).capitalize()} `{self.ident()}`"
                    for i in range(1, r.randint(3, 6))
                ) + "\n\n"
            elif k < 0.85:
                s = f"`{self.fill('«id1»(«w1», «x1») -> «C1»')}` should give {self.number()}."
            elif k < 0.9:
                s = self.foreign()
            else:
                s = "\n\n"
            parts.append(s)
            total += len(s) + 1
        return " ".join(parts)

    def pre_tool_prose(self) -> str:
        r = self.r
        if r.random() < 0.3:
            return ""
        return r.choice((
            f"I'll start by reading `{self.path()[0]}` to see how `{self.ident()}` works.",
            "Let me run the test suite to see what's failing.",
            f"Now let me check the {self.noun()} implementation.",
            f"The test's failing because `{self.ident()}` doesn't handle an empty "
            f"{self.noun()}. Let me fix that.",
            "Good, that's passing now. Let me also check the callers.",
            f"I'll search for every use of `{self.ident()}` first.",
            "Let me update the todo list.",
            f"That didn't work: the {self.noun()} is still stale. Let me look at the cache "
            "invalidation.",
            f"{self.foreign()}",
        ))

    def final_answer(self, budget: int) -> str:
        r = self.r
        target = max(40, min(budget, int(r.lognormvariate(6.2, 0.8))))
        parts = [r.choice((
            "Done.", "All tests pass now.", f"Fixed the {self.noun()} bug.",
            "Here's what I found:", "I couldn't reproduce the failure locally, but:",
            f"{self.foreign()}",
        ))]
        total = len(parts[0])
        while total < target:
            k = r.random()
            if k < 0.35:
                s = "\n".join(
                    f"- `{self.path()[0]}`: {self.sentence()}" for _ in range(r.randint(1, 4))
                )
            elif k < 0.5:
                s = (f"| Case | Before | After |\n|---|---:|---:|\n"
                     f"| {self.noun()} | {self.flt()} ms | {self.flt()} ms |\n"
                     f"| {self.noun()} | {self.flt()} ms | {self.flt()} ms |")
            elif k < 0.65:
                s = "```python\n" + self.fill(r.choice(_PY_BLOCKS)).rstrip() + "\n```"
            elif k < 0.75:
                s = f"## {r.choice(('Summary', 'Root cause', 'Next steps', 'Changes'))}"
            else:
                s = self.sentence() + " " + self.sentence()
            parts.append(s)
            total += len(s) + 2
        if r.random() < 0.3:
            parts.append("Let me know if you'd like me to commit this or open a PR.")
        return "\n\n".join(parts)

    def tool_call(self, payload: int) -> tuple[str, dict[str, Any], str]:
        """(tool name, arguments, result text) for a payload of roughly ``payload`` chars."""
        r = self.r
        if payload < 300:
            name = r.choices(("Edit", "Bash", "Glob", "TodoWrite", "Read", "Write"),
                             weights=(25, 30, 15, 15, 10, 5))[0]
        elif payload < 3000:
            name = r.choices(("Read", "Bash", "Grep", "Edit", "WebFetch"),
                             weights=(35, 35, 15, 10, 5))[0]
        else:
            name = r.choices(("Read", "Bash", "WebFetch", "Write", "Grep", "Task"),
                             weights=(35, 35, 10, 10, 5, 5))[0]
        rel, lang = self.path()
        ap = self.abspath(rel)
        if name == "Bash":
            cmd, desc, out = self.bash(payload)
            args: dict[str, Any] = {"command": cmd, "description": desc}
            if r.random() < 0.1:
                args["timeout"] = r.choice((120000, 300000, 600000))
            return name, args, out
        if name == "Read":
            args = {"file_path": ap}
            if r.random() < 0.15:
                args |= {"offset": r.randint(1, 900), "limit": r.choice((50, 100, 200, 400))}
            return name, args, self.read_output(rel, lang, payload)
        if name == "Edit":
            old = self.source(lang, r.randint(20, 200)).split("\n")
            old_s = "\n".join(old[: r.randint(1, 6)])
            new_s = "\n".join(self._mutate(x) for x in old_s.split("\n"))
            args = {"file_path": ap, "old_string": old_s, "new_string": new_s}
            if r.random() < 0.1:
                args["replace_all"] = True
            snippet = self.numbered(self.source(lang, max(60, payload - 150)),
                                    r.randint(1, 400))
            return name, args, (
                f"The file {ap} has been updated. Here's the result of running `cat -n` on a "
                f"snippet of the edited file:\n{snippet}"
            )
        if name == "Write":
            content = self.source(lang, max(40, payload - 60))
            return name, {"file_path": ap, "content": content}, (
                f"File created successfully at: {ap}"
            )
        if name == "Glob":
            pat = r.choice(("**/*.py", "**/*.{ts,tsx}", "src/**/*.rs", "**/test_*.py", "*.md"))
            n = r.randint(0, 6)
            out = "\n".join(self.abspath(self.path()[0]) for _ in range(n)) or "No files found"
            return name, {"pattern": pat}, out
        if name == "TodoWrite":
            todos = [
                {"content": f"{v.capitalize()} {self.ident()}",
                 "status": r.choice(("pending", "in_progress", "completed")),
                 "activeForm": f"{_gerund(v).capitalize()} {self.ident()}"}
                for v in (r.choice(_VERBS) for _ in range(r.randint(2, 6)))
            ]
            return name, {"todos": todos}, (
                "Todos have been modified successfully. Ensure that you continue to use the "
                "todo list to track your progress. Please proceed with the current tasks if "
                "applicable"
            )
        if name == "Grep":
            args = {"pattern": f"{self.ident()}\\(|{self.cls()}\\b", "path": self.root,
                    "output_mode": "content", "-n": True}
            if r.random() < 0.5:
                args["glob"] = r.choice(("*.py", "*.{ts,tsx}", "*.rs"))
            return name, args, self.grep_output(payload)
        if name == "WebFetch":
            host = r.choice(("docs.example.com", "github.com", "qiita.com", "habr.com",
                             "zhuanlan.zhihu.com"))
            url = (f"https://{host}"
                   f"/{self.kebab()}/{r.randint(1000, 99999)}?utm_source=agent&lang=ja#"
                   f"{self.noun()}")
            return name, {"url": url, "prompt": f"Summarise what it says about {self.noun()}"}, (
                self.web_page(payload)
            )
        # Task (sub-agent report)
        report = self.final_answer(payload) + "\n\n" + self.grep_output(max(0, payload // 3))
        return name, {
            "description": f"Investigate {self.noun()} {self.noun()}",
            "prompt": f"Find every place where {self.ident()} is called and report how the "
                      f"{self.noun()} is computed. {self.sentence()}",
            "subagent_type": "general-purpose",
        }, report

    # ---- system prompt -----------------------------------------------------------------

    def system_prompt(self, m: Markup) -> str:
        r = self.r
        keep = [s for s in _TOOL_SCHEMAS if r.random() < 0.9 or '"Bash"' in s[:60]]
        example = _format_call(m, "example_function", {"param": "value"})
        date = datetime.fromtimestamp(self.clock, UTC).strftime("%Y-%m-%d")
        model = r.choice(("Qwen3-32B", "Llama-3.3-70B", "DeepSeek-V3", "gpt-oss-120b"))
        return (
            "You are an interactive command-line coding agent. Use the instructions below and "
            "the tools available to you to help the user with software engineering tasks.\n\n"
            "IMPORTANT: Assist with defensive security tasks only. Refuse to create or improve "
            "code that may be used maliciously.\nIMPORTANT: Never guess URLs unless you're "
            "confident they help the user with programming.\n\n"
            "# Tone and style\n"
            "Be concise, direct and to the point. Your output is shown in a terminal and "
            "rendered as GitHub-flavoured Markdown in a monospace font. Don't add preamble "
            "like \"Here's what I'll do\" or postamble summaries unless asked. Answer in fewer "
            "than 4 lines when you can; one-word answers are best.\n"
            "<example>\nuser: 2 + 2\nassistant: 4\n</example>\n\n"
            "# Doing tasks\n"
            "- Use the TodoWrite tool to plan multi-step work.\n"
            "- Search the codebase before changing it; read files before editing them.\n"
            "- Follow the existing conventions: mimic code style, use existing libraries and "
            "utilities, and never assume a library is available.\n"
            "- After a change, run the project's lint and type-check commands (e.g. `ruff "
            "check`, `mypy`, `npm run lint`) if you know them.\n"
            "- NEVER commit unless the user explicitly asks you to.\n\n"
            "# Tool usage policy\n"
            "- When several independent pieces of information are needed, batch the tool "
            "calls in a single response.\n"
            "- Prefer the Task tool for open-ended searches to reduce context usage.\n\n"
            "Here is useful information about the environment you are running in:\n<env>\n"
            f"Working directory: {self.root}\nIs directory a git repo: Yes\n"
            f"Platform: linux\nOS Version: Linux 6.8.0-{r.randint(30, 60)}-generic\n"
            f"Today's date: {date}\n</env>\n"
            f"You are powered by the model named {model}.\n\n"
            f"gitStatus: This is the git status at the start of the conversation.\n"
            f"Current branch: {self.branch}\n\nMain branch (you will usually use this for PRs):"
            f" main\n\nStatus:\n{self.git_status()}\n\nRecent commits:\n"
            f"{self.git_log(400)}\n\n"
            "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            "<tools>\n" + "\n".join(keep) + "\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments "
            f"in this format:\n{example}"
        )


# --------------------------------------------------------------------------------------------
# Rendering helpers
# --------------------------------------------------------------------------------------------

_FMT_VAR = re.compile(r"\{(name|args|json)\}")


def _format_call(m: Markup, name: str, args: dict[str, Any]) -> str:
    args_json = json.dumps(args, ensure_ascii=False)
    full = json.dumps({"name": name, m.args_key: args}, ensure_ascii=False)
    vals = {"name": name, "args": args_json, "json": full}
    return _FMT_VAR.sub(lambda mm: vals[mm.group(1)], m.tool_call_fmt)


def _render_assistant(
    m: Markup, reasoning: str, prose: str, calls: Sequence[tuple[str, dict[str, Any]]]
) -> tuple[str, str]:
    """(rendering with the think block, rendering without it)."""
    body = prose
    if calls:
        rendered = m.tool_call_sep.join(_format_call(m, n, a) for n, a in calls)
        body = (prose + m.content_tool_sep if prose else "") + (
            m.tool_calls_open + rendered + m.tool_calls_close
        )
    start = m.start("assistant")
    end = m.end_for("assistant")
    without = start + body + end
    if not reasoning:
        return without, without
    with_think = (
        start + m.think_open + reasoning.strip("\n") + m.think_close + body.lstrip("\n") + end
    )
    return with_think, without


def _render_results(m: Markup, results: Sequence[str]) -> str:
    if m.group_tool_results:
        inner = m.tool_result_sep.join(
            m.tool_result_open + x + m.tool_result_close for x in results
        )
        return (m.start(m.tool_role) + m.tool_results_open + inner + m.tool_results_close
                + m.end_for(m.tool_role))
    return "".join(
        m.start(m.tool_role) + m.tool_results_open + m.tool_result_open + x
        + m.tool_result_close + m.tool_results_close + m.end_for(m.tool_role)
        for x in results
    )


def _render_user(m: Markup, text: str) -> str:
    return m.start("user") + text + m.end_for("user")


def _billing(version: str, cch: str) -> str:
    return f"x-anthropic-billing-header: cc_version={version}; cch={cch};\n"


def _draw_append(r: Random, mean: float) -> float:
    """Heavy-tailed append size: lognormal body plus ~2.5% of 7-21x spikes (mean ~= mean)."""
    if r.random() < 0.025:
        return mean * r.uniform(7.1, 21.4)
    return r.lognormvariate(0.0, 1.0) * mean * 0.40


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def session_calls(
    seed: int,
    markup: Markup,
    *,
    target_chars: int,
    append_chars: int = 1400,
    billing_line: bool = False,
    drop_thinking: bool = False,
    max_calls: int | None = None,
) -> Iterator[str]:
    """Yield the full transcript text of each successive model call of one agent session.

    Call k+1's text is call k's text minus the trailing generation prompt, plus the
    assistant's answer and the next tool result(s) or user message, plus the generation
    prompt -- except that with ``billing_line`` the ``cch`` value in the first system block
    changes every call, and with ``drop_thinking`` the think blocks of assistant turns before
    the latest user message are removed.  Stops after yielding the first call whose text has
    at least ``target_chars`` characters, or after ``max_calls`` calls.
    """
    if target_chars < 1:
        raise ValueError("target_chars must be >= 1")
    if append_chars < 1:
        raise ValueError("append_chars must be >= 1")
    if max_calls is not None and max_calls < 1:
        raise ValueError("max_calls must be >= 1")
    return _session(seed, markup, target_chars, append_chars, billing_line, drop_thinking,
                    max_calls)


def _session(
    seed: int,
    m: Markup,
    target_chars: int,
    append_chars: int,
    billing_line: bool,
    drop_thinking: bool,
    max_calls: int | None,
) -> Iterator[str]:
    _warm_allocator(4 * (target_chars + (1 << 18)))
    r = Random(seed)
    c = _Content(r)
    version = f"2.{r.randint(0, 1)}.{r.randint(10, 80)}.{c.hexs(3)}"
    cch = c.hexs(5)
    billing = _billing(version, cch) if billing_line else ""
    head = m.bos + m.start("system")
    # frozen: everything after the billing line that can no longer change (one cached str).
    # live: recent parts; with drop_thinking, the assistant turns since the latest user
    # message (whose think blocks a later user message will drop) live here.
    frozen = c.system_prompt(m) + m.end_for("system")
    live: list[str] = [_render_user(m, c.user_message(int(_draw_append(r, append_chars)),
                                                       first=True))]
    swaps: list[tuple[int, str]] = []  # (index in live, rendering without think)
    gen = m.generation_prompt
    loop_left = _loop_length(r)
    calls = 0
    appended = 0
    while True:
        text = "".join((head, billing, frozen, *live, gen))
        calls += 1
        yield text
        if len(text) >= target_chars or (max_calls is not None and calls >= max_calls):
            return
        if billing_line:
            new = c.hexs(5)
            while new == cch:
                new = c.hexs(5)
            cch = new
            billing = _billing(version, cch)
        # Nudge the running mean towards append_chars (slowly, so the spread stays intact).
        deficit = append_chars * (calls - 1) - appended
        factor = min(2.0, max(0.5, 1.0 + deficit / (append_chars * 200.0)))
        budget = int(_draw_append(r, append_chars) * factor)
        if loop_left > 0:
            loop_left -= 1
            reasoning = c.reasoning(budget // 2) if drop_thinking else ""
            prose = c.pre_tool_prose()
            payload = max(0, budget - len(reasoning) - len(prose) - 150)
            n = r.choices((1, 2, 3), weights=(85, 12, 3))[0]
            call_list: list[tuple[str, dict[str, Any]]] = []
            results: list[str] = []
            for _ in range(n):
                name, args, out = c.tool_call(payload // n)
                call_list.append((name, args))
                results.append(out)
            with_t, without_t = _render_assistant(m, reasoning, prose, call_list)
            if reasoning:
                swaps.append((len(live), without_t))
            new_parts = [with_t, _render_results(m, results)]
        else:
            answer = c.final_answer(budget // 3 + 40)
            user = c.user_message(max(0, budget - len(answer)))
            _, asst = _render_assistant(m, "", answer, ())
            for i, s in swaps:  # Qwen3: think blocks before the latest user message go
                live[i] = s
            swaps.clear()
            new_parts = [asst, _render_user(m, user)]
            loop_left = _loop_length(r)
        live.extend(new_parts)
        appended += sum(map(len, new_parts))
        if not swaps and len(live) >= 48:
            frozen += "".join(live)
            live.clear()


def _warm_allocator(nbytes: int) -> None:
    """Allocate and free one buffer as large as the biggest transcript we will yield.

    The yielded strings grow monotonically (UCS-4 once an emoji appears: 4 bytes a char).
    glibc serves each one with a fresh mmap, because every request is just above the
    dynamic mmap threshold set by the previous free, so every call page-faults the whole
    transcript in again (~5x slower than the copy itself).  Freeing one mmapped chunk of
    the final size first raises that threshold (glibc caps it at 32 MiB), after which the
    strings reuse heap memory.  Elsewhere this is just a short-lived allocation.
    """
    buf = bytearray(min(nbytes, 32 << 20))
    del buf


def _loop_length(r: Random) -> int:
    """Tool calls between two user messages: often a few, sometimes long."""
    return min(40, int(r.expovariate(1 / 5.0)))


def corpus(seed: int, chars: int) -> str:
    """One long mixed text of exactly ``chars`` characters from the session content pools."""
    if chars <= 0:
        return ""
    r = Random(seed)
    c = _Content(r)
    m = r.choice(list(MARKUPS.values()))
    pieces: list[str] = [c.system_prompt(m)[: max(0, min(chars, r.randint(500, 6000)))]]
    total = len(pieces[0])
    while total < chars:
        size = int(min(30_000.0, r.lognormvariate(6.5, 1.0)))
        k = r.randrange(12)
        if k == 0:
            s = c.user_message(size)
        elif k == 1:
            s = c.final_answer(size)
        elif k == 2:
            s = c.reasoning(size)
        elif k == 3:
            s = c.web_page(size)
        elif k == 4:
            s = c.base64_blob(min(size, 3000))
        elif k == 5:
            s = c.traceback()
        elif k == 6:
            rel, lang = c.path()
            s = c.read_output(rel, lang, size)
        elif k == 7:
            name, args, _ = c.tool_call(size)
            s = _format_call(m, name, args)
        else:
            s = c.bash(size)[2]
        if r.random() < 0.05:
            s = s.replace("\n", "\r\n")
        sep = r.choice(("\n\n", "\n", "\n\n\n\n", " ", "\t"))
        pieces.append(sep + s)
        total += len(sep) + len(s)
    return "".join(pieces)[:chars]
