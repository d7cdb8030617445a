"""``ChatTemplate``: a model's chat template, rendered as transformers' ``apply_chat_template``
renders it behind vLLM's chat endpoint (see ``messages`` for what vLLM does first)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import nodes

from app.errors import BadRequestError, TemplateError
from app.pieced_text import PiecedText
from app.rendering import loading, scan, windows
from app.rendering.content_format import ContentFormat, detect_content_format
from app.rendering.environment import RESERVED_NAMES, TemplateRaised, make_environment
from app.rendering.loops import RUNNER, plan_loops
from app.rendering.memo import RenderCache, SessionMemo
from app.rendering.messages import (
    PARTS_OBJECT,
    as_vllm_roles,
    prepare_message,
    prepare_messages,
    prepare_tools,
)

Message = Mapping[str, Any]

_PROBE_TOOL = "toksplice_probe_tool"
_PROBE: dict[str, Any] = {
    "type": "function",
    "function": {"name": _PROBE_TOOL, "description": "A probe.",
                 "parameters": {"type": "object", "properties": {}}},
}  # fmt: skip

# Names ``chat_template_kwargs`` may not bind: what the renderer binds itself, what
# transformers consumes rather than passes on, and the environment's globals.
_CONSUMED = frozenset({"chat_template", "tokenize", "continue_final_message"})


class _Variant:
    """One compiled template text."""

    def __init__(
        self, name: str, source: str, env: jinja2.Environment, scans: dict[str, bool]
    ) -> None:
        self.name = name
        self.source = source
        try:
            self.template = env.from_string(source)
            root = env.parse(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(
                f"chat template {name!r} does not compile (line {exc.lineno}): {exc.message}"
            ) from None
        self.content_format: ContentFormat = detect_content_format(root)
        body, self.scanned = scan.rewrite(root.body, scans)
        body, windowed = windows.rewrite(env, body)
        body, self.plans = plan_loops(env, body)
        self.memo_template = None
        if self.scanned or windowed or self.plans:
            rewritten = nodes.Template(body)
            rewritten.set_environment(env)
            self.memo_template = env.template_class.from_code(
                env, env.compile(rewritten), env.make_globals(None)
            )


class ChatTemplate:
    """A chat template (or a set of named ones) with the special tokens it is rendered with.

    ``templates`` is one template text, or texts by name; like transformers, a set of named
    templates renders "tool_use" when ``tools`` are given and it has one, else "default",
    unless ``name`` pins one. ``special_tokens`` (``bos_token``, ``eos_token`` ...) are
    template variables, overridable by ``chat_template_kwargs`` as in transformers.
    """

    def __init__(
        self,
        templates: str | Mapping[str, str],
        *,
        special_tokens: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> None:
        texts = {"default": templates} if isinstance(templates, str) else dict(templates)
        if name is not None and name not in texts:
            raise TemplateError(f"no chat template named {name!r}; have {sorted(texts)}")
        if name is None and "default" not in texts and len(texts) != 1:
            raise TemplateError(f"several chat templates and none named 'default': {sorted(texts)}")
        self._env = make_environment()
        scans = scan.shapes(self._env)
        self._variants = {key: _Variant(key, text, self._env, scans) for key, text in texts.items()}
        self._pinned = (
            name if name is not None else (None if "default" in texts else next(iter(texts)))
        )
        self._special_tokens = dict(special_tokens or {})
        self._reserved = RESERVED_NAMES | _CONSUMED | frozenset(self._env.globals)
        self._made_from = (texts, self._special_tokens, name)

    def __reduce__(self) -> tuple[Callable[..., ChatTemplate], tuple[Any, ...]]:
        """Pickled as what it was made from (the shadow verifier's child renders with it)."""
        return _chat_template, self._made_from

    @classmethod
    def from_tokenizer_config(
        cls, config: Mapping[str, Any] | str | Path, *, name: str | None = None
    ) -> ChatTemplate:
        """From a ``tokenizer_config.json`` (path or parsed)."""
        source = loading.from_tokenizer_config(config)
        return cls(source.templates, special_tokens=source.special_tokens, name=name)

    @classmethod
    def load(cls, path: str | Path, *, tokenizer_file: str | Path | None = None) -> ChatTemplate:
        """From a tokenizer_config.json (or its folder), a GGUF file or a template file,
        rendered with the special tokens of the tokenizer beside ``tokenizer_file``
        (``loading.from_path``)."""
        source = loading.from_path(path, tokenizer_file)
        return cls(source.templates, special_tokens=source.special_tokens)

    @classmethod
    def from_jinja_file(
        cls, path: str | Path, *, special_tokens: Mapping[str, str] | None = None
    ) -> ChatTemplate:
        return cls(loading.from_jinja_file(path), special_tokens=special_tokens)

    @classmethod
    def from_gguf(cls, path: str | Path, *, name: str | None = None) -> ChatTemplate:
        """From a GGUF model file's ``tokenizer.chat_template`` metadata."""
        source = loading.from_gguf(path)
        return cls(source.templates, special_tokens=source.special_tokens, name=name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._variants)

    @property
    def special_tokens(self) -> dict[str, str]:
        return dict(self._special_tokens)

    def source(self, *, tools: bool = False) -> str:
        """The template text ``render`` uses with (``tools=True``) or without tools."""
        return self._variant(tools).source

    def content_format(self, *, tools: bool = False) -> ContentFormat:
        return self._variant(tools).content_format

    def _variant(self, tools: bool) -> _Variant:
        if self._pinned is not None:
            return self._variants[self._pinned]
        if tools and "tool_use" in self._variants:
            return self._variants["tool_use"]
        return self._variants["default"]

    def drops_tools(self) -> bool:
        """Whether the template renders nothing of a request's ``tools`` (SmolLM2's has no
        tool syntax): a one-tool probe conversation whose rendering does not name the tool.
        A template that raises on it is not silent about tools: False."""
        try:
            text = self.render([{"role": "user", "content": "probe"}], tools=[_PROBE])
        except (TemplateError, BadRequestError):
            return False
        return _PROBE_TOOL not in text

    def render(self, messages: Sequence[Message], **options: Any) -> str:
        """``render_pieces`` joined into one ``str``."""
        text = self.render_pieces(messages, **options).text()
        cache = options.get("cache")
        if cache is not None:
            cache.make_room(text)
        return text

    def render_pieces(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        cache: RenderCache | None = None,
        session: str | None = None,
        frozen: bool = False,
    ) -> PiecedText:
        """The prompt text for OpenAI-style ``messages``, in the pieces it was rendered in.

        With a ``cache`` and a ``session`` key (the conversation id), unchanged messages and
        runs of loop iterations are reused from that session's previous call; the result is
        identical to a fresh render (see ``app.rendering.memo`` and ``replay``).  ``frozen``
        promises that message objects are never mutated once passed (the proxy's own parsed
        requests), so one that is last call's object is taken as unchanged.

        ``chat_template_kwargs`` are extra template variables (``enable_thinking`` ...); one
        that would rebind ``messages``, ``tools``, ``documents``, ``add_generation_prompt``,
        a name transformers consumes (``chat_template``, ``tokenize``,
        ``continue_final_message``) or a template global (``raise_exception``,
        ``namespace`` ...) is a ``BadRequestError``. Malformed messages are a
        ``BadRequestError``; a template that raises, or fails on these inputs, a
        ``TemplateError``. Inputs must be plain JSON data (as parsed from a request body).
        """
        variant = self._variant(tools is not None)
        inputs = (messages, tools, add_generation_prompt, chat_template_kwargs, documents)
        if cache is None or session is None or variant.memo_template is None:
            context = self._context(variant, *inputs, None)
            return PiecedText(_run(variant, variant.template, context))
        memo = cache.session(session, f"{id(self)}:{variant.name}")
        with memo.lock:
            context = self._context(variant, *inputs, memo, frozen)
            try:
                return PiecedText(_run(variant, variant.memo_template, context, memo))
            except windows.Unprovable:
                memo.runs.clear()
            finally:
                cache.account(session, memo)
        return PiecedText(_run(variant, variant.template, self._context(variant, *inputs, None)))

    def _context(
        self,
        variant: _Variant,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        add_generation_prompt: bool,
        kwargs: Mapping[str, Any] | None,
        documents: Sequence[Mapping[str, Any]] | None,
        memo: SessionMemo | None,
        frozen: bool = False,
    ) -> dict[str, Any]:
        kwargs = kwargs or {}
        clash = sorted(key for key in kwargs if key in self._reserved)
        if clash:
            raise BadRequestError(
                f"chat_template_kwargs may not set {', '.join(clash)}",
                param="chat_template_kwargs",
            )
        fmt = variant.content_format
        if memo is None or not messages:
            prepared = prepare_messages(messages, fmt)
        else:
            prepared = memo.prepare(
                messages, fmt, lambda i, m: prepare_message(i, m, fmt), frozen=frozen
            )
        return {
            **self._special_tokens,
            **kwargs,
            "messages": as_vllm_roles(prepared, variant.source),
            "tools": None if tools is None else prepare_tools(tools),
            "documents": None if documents is None else list(documents),
            "add_generation_prompt": add_generation_prompt,
        }


def _run(
    variant: _Variant,
    template: jinja2.Template,
    context: dict[str, Any],
    memo: SessionMemo | None = None,
) -> list[str]:
    try:
        if memo is None:
            return [template.render(context)]
        return _render_memo(variant, template, context, memo)
    except TemplateRaised as exc:
        raise TemplateError(str(exc.message)) from None
    except windows.Unprovable:
        raise
    except Exception as exc:
        raise template_error(variant.name, exc) from None


def _render_memo(
    variant: _Variant, template: jinja2.Template, context: dict[str, Any], memo: SessionMemo
) -> list[str]:
    """``template.render``'s pieces with the memo's callables bound: each planned loop's call
    yields a fresh marker string, replaced here by the loop's pieces, so that the output is
    never joined here (the pieces of unchanged iterations are last call's objects)."""
    spliced: dict[int, tuple[str, list[str]]] = {}

    def run_loop(k: int, items: Any, values: dict[str, Any]) -> str:
        pieces = memo.render_loop(k, variant.plans[k], items, values)
        marker = f"<loop {len(spliced)}>"
        spliced[id(marker)] = (marker, pieces)
        return marker

    context[RUNNER] = run_loop
    context[scan.SCANNER] = scan.scan
    context.update(windows.helpers())
    out: list[str] = []
    ctx = template.new_context(context)
    try:
        for piece in template.root_render_func(ctx):
            found = spliced.get(id(piece))
            if found is not None and found[0] is piece:
                out += found[1]
            else:
                out.append(piece)
    except Exception:
        template.environment.handle_exception()
    return out


def template_error(name: str, exc: BaseException) -> TemplateError:
    """A ``TemplateError`` saying what failed where in template ``name``."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    where = f"chat template {name!r}" + (f", line {line}" if line is not None else "")
    if isinstance(exc, jinja2.TemplateError):
        what = exc.message or type(exc).__name__
    else:
        what = f"{type(exc).__name__}: {exc}"
    return TemplateError(f"{where}: {what.replace(PARTS_OBJECT, 'list object')}")


def _chat_template(
    texts: Mapping[str, str], special_tokens: Mapping[str, str], name: str | None
) -> ChatTemplate:
    return ChatTemplate(texts, special_tokens=special_tokens, name=name)
