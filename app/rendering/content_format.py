"""Which content format a chat template takes, found as vLLM (0.33) finds it in the Jinja AST.

"openai" (each message's content a list of parts) when the template loops over a message's
content, else "string". A message is a loop variable over ``messages`` or over a name bound
from it (``set``, ``namespace(x=messages)``, ``ns.x = messages``, transitively, ignoring
scopes); its content is looped over when a loop runs over ``message.content`` /
``message['content']`` (through filters, tests or a slice), over a macro parameter that some
call of the macro passes a message's content, or over a bare ``content`` outside macros.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from jinja2 import nodes

ContentFormat = Literal["string", "openai"]


def detect_content_format(root: nodes.Template) -> ContentFormat:
    """ "openai" if the template iterates over some message's ``content``, else "string"."""
    messages = {name for _, name in _loops_over(root, _aliases(root, "messages"), None)}
    macro_params = _macro_content_params(root, messages)
    in_macros = {
        id(loop) for macro in root.find_all(nodes.Macro) for loop in macro.find_all(nodes.For)
    }
    for loop in root.find_all(nodes.For):
        if any(_reads(loop.iter, name, "content") for name in messages):
            return "openai"
        if isinstance(loop.iter, nodes.Name):
            if loop.iter.name in macro_params.get(id(loop), ()):
                return "openai"
            if id(loop) not in in_macros and loop.iter.name == "content":
                return "openai"
    return "string"


def _reads(node: nodes.Node, var: str, key: str | None) -> bool:
    """Whether ``node`` is ``var`` (or ``var[key]``/``var.key``), possibly under filters,
    tests or a slice; ``var`` may be dotted (``ns.rest``)."""
    while (inner := _unwrapped(node)) is not None:
        node = inner
    if key is not None:
        if isinstance(node, nodes.Getitem):
            named = isinstance(node.arg, nodes.Const) and node.arg.value == key
        elif isinstance(node, nodes.Getattr):
            named = node.attr == key
        else:
            return False
        return named and _is_name(node.node, var)
    return _is_name(node, var)


def _unwrapped(node: nodes.Node) -> nodes.Node | None:
    if isinstance(node, nodes.Filter | nodes.Test) and node.node is not None:
        return node.node
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice):
        return node.node
    return None


def _is_name(node: nodes.Node, var: str) -> bool:
    if isinstance(node, nodes.Name):
        return node.ctx == "load" and node.name == var
    if isinstance(node, nodes.Getattr) and "." in var:
        base, _, attr = var.rpartition(".")
        return node.attr == attr and _is_name(node.node, base)
    return False


def _dotted(node: nodes.Node) -> str | None:
    """``ns.rest`` for an attribute target (``{% set ns.rest = ... %}``)."""
    if isinstance(node, nodes.NSRef):
        return f"{node.name}.{node.attr}"
    attrs = []
    while isinstance(node, nodes.Getattr):
        attrs.append(node.attr)
        node = node.node
    return ".".join([node.name, *reversed(attrs)]) if isinstance(node, nodes.Name) else None


def _aliases(root: nodes.Template, var: str) -> set[str]:
    """``var`` and every name bound from it (transitively)."""
    found = {var}
    pending = [var]
    while pending:
        current = pending.pop()
        for assign in root.find_all(nodes.Assign):
            for name in _bound_from(assign, current):
                if name not in found:
                    found.add(name)
                    pending.append(name)
    return found


def _bound_from(assign: nodes.Assign, var: str) -> Iterator[str]:
    target, value = assign.target, assign.node
    if isinstance(target, nodes.Name):
        if _reads(value, var, None):
            yield target.name
        elif (
            isinstance(value, nodes.Call)
            and isinstance(value.node, nodes.Name)
            and value.node.name == "namespace"
        ):
            for kwarg in value.kwargs:
                if _reads(kwarg.value, var, None):
                    yield f"{target.name}.{kwarg.key}"
    elif _reads(value, var, None) and (dotted := _dotted(target)) is not None:
        yield dotted


def _loops_over(
    root: nodes.Template, names: set[str], key: str | None
) -> Iterator[tuple[nodes.For, str]]:
    for loop in root.find_all(nodes.For):
        if isinstance(loop.target, nodes.Name) and any(
            _reads(loop.iter, name, key) for name in names
        ):
            yield loop, loop.target.name


def _macro_content_params(root: nodes.Template, messages: set[str]) -> dict[int, set[str]]:
    """Loop id -> the parameters of its macro that some call passes a message's content."""

    def passes_content(node: nodes.Node) -> bool:
        return any(_reads(node, name, "content") for name in messages)

    found: dict[int, set[str]] = {}
    for macro in root.find_all(nodes.Macro):
        params = [arg.name for arg in macro.args]
        bound: set[str] = set()
        for call in root.find_all(nodes.Call):
            if not (isinstance(call.node, nodes.Name) and call.node.name == macro.name):
                continue
            bound.update(
                p for p, arg in zip(params, call.args, strict=False) if passes_content(arg)
            )
            bound.update(k.key for k in call.kwargs if k.key in params and passes_content(k.value))
        if bound:
            for loop in macro.find_all(nodes.For):
                found[id(loop)] = bound
    return found
