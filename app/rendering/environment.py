"""The sandboxed Jinja environment chat templates run in, with transformers' semantics.

Mirrors what ``transformers.utils.chat_template_utils`` sets up for ``apply_chat_template``:
an ``ImmutableSandboxedEnvironment`` with ``trim_blocks``/``lstrip_blocks``, the
``loopcontrols`` extension and a ``{% generation %}`` tag, a ``tojson`` filter that does not
HTML-escape, and the globals ``raise_exception``, ``strftime_now``, ``dict`` and a
``namespace`` that refuses underscore-prefixed attributes.

The one departure is speed: the sandbox's safety decision for an attribute depends only on
the object's type, the attribute name and (for callables) the attribute's type, so
``FastSandbox`` caches it per such triple instead of re-deriving it on every access.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from types import BuiltinMethodType
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Names the template context always binds; ``chat_template_kwargs`` may not rebind them.
RESERVED_NAMES = frozenset({"messages", "tools", "documents", "add_generation_prompt"})


class TemplateRaised(jinja2.exceptions.TemplateError):
    """What ``raise_exception`` raises: the template refused the input, in its own words."""


def _raise_exception(message: str) -> None:
    raise TemplateRaised(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


class _TemplateDict:
    """``dict`` for templates: builds dicts, but exposes no attributes of the ``dict`` type."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


class TemplateNamespace(jinja2.utils.Namespace):
    """A ``namespace()`` that refuses underscore-prefixed attribute names (as transformers')."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: object) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                "Chat templates cannot store underscore-prefixed attributes on a namespace, "
                f"but got {name!r}. Please rename the attribute."
            )


class GenerationTag(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}``: renders its body (transformers marks the
    span for assistant-token masks, which a proxy never asks for). Like transformers, the
    body runs as a call block, so ``set`` inside it stays local to it."""

    tags = {"generation"}  # noqa: RUF012 - jinja2's declared class attribute

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_render_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller: Callable[[], str]) -> str:
        return caller()


class FastSandbox(ImmutableSandboxedEnvironment):
    """``ImmutableSandboxedEnvironment`` with its per-access safety checks cached.

    The immutable sandbox decides whether an attribute is safe from the object's type and the
    attribute's name alone (``is_internal_attribute`` and ``modifies_known_mutable`` test
    ``isinstance`` and the name), so the decision is memoized per ``(type, name)``. Builtin
    methods can carry no ``unsafe_callable``/``alters_data`` markers, so calling them needs no
    check. A dict's keys are looked up directly when the name is not a ``dict`` attribute,
    which is the order the sandbox's ``getattr`` takes anyway, minus its ``AttributeError``.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._safe_attribute: dict[tuple[type, str], bool] = {}

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        key = (type(obj), attr)
        known = self._safe_attribute.get(key)
        if known is None:
            known = self._safe_attribute[key] = super().is_safe_attribute(obj, attr, value)
        return known

    def is_safe_callable(self, obj: Any) -> bool:
        return type(obj) is BuiltinMethodType or super().is_safe_callable(obj)

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)


_DICT_ATTRIBUTES = frozenset(dir(dict))


def make_environment() -> FastSandbox:
    """A fresh environment with transformers' chat-template setup."""
    env = FastSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[GenerationTag, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


def global_names() -> frozenset[str]:
    """Names bound by the environment's globals (jinja's defaults plus transformers')."""
    return frozenset(make_environment().globals)
