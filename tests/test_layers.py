"""Imports run one way: each layer imports only the layers below it.

From the top::

    composition root   app.main, app.serve, app.__main__, app.http_guard (the server), app.tools
                       (assets, converters, the demo: never imported by the server)
    api                app.api: HTTP routers
    service            app.service: the request path, the startup checks
    middle             app.protocol, app.rendering, app.sessions, app.upstream, app.telemetry:
                       none of the five imports another, and only sessions and telemetry
                       import tokenization (the others handle text and ids they are given)
    config             app.config: the settings (its defaults name tokenization's choices)
    tokenization       app.tokenization
    gpu_kernels        gpu_kernels: only lazily (see below)

Leaf modules (``LEAVES``) sit beside the stack: any module may import them, and they import
only each other.  They hold what two layers share without either owning it: the typed
errors, pieced text, the terms of a generation (``app.generation``: sampling, usage, the tool
call layouts), the GGUF file reader, and the tokenizer rules both tokenization and the kernels
read (``app.tokenizer_spec``, ``app.byte_level``), and what a per-session memo needs of its
keeper (``app.memos``), the process's own memory (``app.process_memory``: RSS, trims), and
JSON parsed in bounded pieces (``app.bounded_json`` and its C scan, ``app._json_spans``).

An import inside a function counts like any other, and so does one under ``TYPE_CHECKING``.
Tokenization reaches gpu_kernels only lazily: from inside a function, or from a module that
is itself only ever imported that way (the native encoder), so that importing the server
never imports the kernels.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO_ROOT

MIDDLE = ("protocol", "rendering", "sessions", "upstream", "telemetry")
ROOT = ("main", "serve", "__main__", "tools", "http_guard")
LEAVES = (
    "errors", "pieced_text", "generation", "gguf_file", "tokenizer_spec", "byte_level", "memos",
    "process_memory", "bounded_json", "_json_spans", "stdio_child",
)  # fmt: skip
UNTOKENIZED = ("protocol", "rendering", "upstream")
RANKS = {"root": 6, "api": 5, "service": 4, **dict.fromkeys(MIDDLE, 3), "config": 2,
         "tokenization": 1, "gpu_kernels": 0}  # fmt: skip

@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    lazy: bool
    """Inside a function."""
    line: int

    def __str__(self) -> str:
        where = " (in a function)" if self.lazy else ""
        return f"{self.source}:{self.line} -> {self.target}{where}"


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for top in ("app", "gpu_kernels"):
        for path in sorted((REPO_ROOT / top).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _edges(modules: dict[str, Path]) -> list[Edge]:
    edges = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lazy = {
            id(node)
            for scope in ast.walk(tree)
            if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            for node in ast.walk(scope)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                # ``from app import errors`` imports the module app.errors
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
            else:
                continue
            edges += [
                Edge(name, target, id(node) in lazy, node.lineno)
                for target in dict.fromkeys(targets)
                if target.split(".")[0] in ("app", "gpu_kernels")
            ]
    return edges


def _unit(module: str) -> str:
    """The package or leaf a module belongs to: "protocol", "errors", "gpu_kernels", ..."""
    parts = module.split(".")
    if parts[0] == "gpu_kernels":
        return "gpu_kernels"
    return "root" if len(parts) == 1 or parts[1] in ROOT else parts[1]


def _lazily_loaded(edges: list[Edge]) -> set[str]:
    """Modules imported only from functions, or only by modules that are."""
    loaded = {e.target for e in edges}
    while True:
        eager = {e.target for e in edges if not e.lazy and e.source not in loaded}
        if not loaded & eager:
            return loaded
        loaded -= eager


def _break(edge: Edge, lazily_loaded: set[str]) -> str | None:
    """Why ``edge`` runs against the layers, or None."""
    source, target = _unit(edge.source), _unit(edge.target)
    if target in LEAVES or source == target:
        return None
    if source in LEAVES:
        return "a leaf imports only leaves"
    if source not in RANKS or target not in RANKS:
        return f"{source if source not in RANKS else target} is in no layer: add it to the rule"
    if RANKS[source] <= RANKS[target]:
        return "imports sideways" if RANKS[source] == RANKS[target] else "imports upwards"
    if source in UNTOKENIZED and target == "tokenization":
        return f"{source} does not tokenize"
    if target == "gpu_kernels" and not (
        source == "tokenization" and (edge.lazy or edge.source in lazily_loaded)
    ):
        return "gpu_kernels is imported lazily, and by tokenization only"
    return None


def test_imports_run_down_the_layers() -> None:
    edges = _edges(_modules())
    lazily_loaded = _lazily_loaded(edges)
    breaks = [
        f"{edge}: {why}"
        for edge in edges
        if (why := _break(edge, lazily_loaded)) is not None
    ]
    assert not breaks, "\n".join(breaks)


def test_the_rule_sees_breaks() -> None:
    """The checker itself: a sideways, an upward and an eager kernel import are each caught."""
    assert _break(Edge("app.protocol.x", "app.upstream.y", False, 1), set())
    assert _break(Edge("gpu_kernels.x", "app.tokenization.y", True, 1), set())
    assert _break(Edge("app.tokenization.x", "gpu_kernels", False, 1), set())
    assert _break(Edge("app.tokenization.x", "gpu_kernels", True, 1), set()) is None
    assert _break(Edge("app.errors", "app.config", False, 1), set())
    assert _break(Edge("app.rendering.x", "app.tokenization", True, 1), set())
    assert _break(Edge("app.api.x", "app.telemetry.y", False, 1), set()) is None
