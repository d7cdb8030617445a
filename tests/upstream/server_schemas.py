"""vLLM's request and response models read from its released source with ``ast`` (importing
them needs torch and a GPU build), and a checker of JSON values against what was read.

``python -m tests.upstream.server_schemas`` rewrites the checked-in fixture from the pinned
wheel (``app.tools.assets.SERVER_SOURCES``); the contract tests compare the two, so a new pinned
version that changes a field we send fails until the fixture (and the dialect) follow.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

from app.tools import assets

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_schema.json"
CLASSES = {
    "vllm_completion": ("CompletionRequest", "CompletionResponse", "CompletionResponseChoice",
                        "CompletionStreamResponse", "CompletionResponseStreamChoice",
                        "CompletionLogProbs"),
    "vllm_chat": ("ChatCompletionRequest",),
    "vllm_generate": ("GenerateRequest", "GenerateTokensResponse", "GenerateTokensChoice",
                      "GenerateTokensStreamResponse", "GenerateTokensStreamChoice",
                      "GenerateLogProbs", "GenerateLogProbsContent", "GenerateLogProb"),
    "vllm_generate_base": ("StreamOptions",),
    "vllm_engine": ("UsageInfo", "PromptTokenUsageInfo", "ModelCard", "ModelList"),
    "vllm_tokenize": ("TokenizeCompletionRequest", "TokenizeResponse"),
    "vllm_sampling": ("SamplingParams", "StructuredOutputsParams"),
}
"""The models of what the vLLM dialects send and parse, by the source file they are in."""
Schema = dict[str, dict[str, dict[str, Any]]]
"""class -> field -> {"type": annotation source, "default": JSON value or a description}."""


def extract(sources: dict[str, Path]) -> Schema:
    schema: Schema = {}
    for key, names in CLASSES.items():
        tree = ast.parse(sources[key].read_text(encoding="utf-8"))
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        for name in names:
            schema[name] = _fields(classes, name)
    return schema


def _fields(classes: dict[str, ast.ClassDef], name: str) -> dict[str, dict[str, Any]]:
    """The public annotated fields of class ``name``, its bases in the same file first."""
    node = classes[name]
    fields: dict[str, dict[str, Any]] = {}
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            fields |= _fields(classes, base.id)
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        annotation = ast.unparse(stmt.annotation)
        if stmt.target.id.startswith("_") or annotation.startswith("ClassVar"):
            continue
        fields[stmt.target.id] = {"type": annotation, "default": _default(stmt.value)}
    return fields


def _default(value: ast.expr | None) -> Any:
    if value is None:
        return "<required>"
    if isinstance(value, ast.Call) and ast.unparse(value.func) in ("Field", "msgspec.field"):
        for kw in value.keywords:
            if kw.arg == "default":
                return _default(kw.value)
            if kw.arg == "default_factory":
                return f"<factory {ast.unparse(kw.value)}>"
        return "<required>"
    try:
        return ast.literal_eval(value)
    except ValueError:
        return f"<{ast.unparse(value)}>"


def errors(schema: Schema, cls: str, value: Any, where: str = "") -> list[str]:
    """Why ``value`` (parsed JSON) is not an instance of model ``cls``: every key must be a
    declared field, of a compatible type."""
    if not isinstance(value, dict):
        return [f"{where or cls}: {type(value).__name__}, expected an object"]
    found = []
    for key, item in value.items():
        field = schema[cls].get(key)
        if field is None:
            found.append(f"{where}{key}: not a field of {cls}")
        else:
            found += _check(schema, ast.parse(field["type"], mode="eval").body, item,
                            f"{where}{key}")
    return found


_SCALARS: dict[str, tuple[type, ...]] = {
    "int": (int,), "NonNegativeInt": (int,), "float": (int, float), "str": (str,),
    "bool": (bool,)}


def _check(schema: Schema, t: ast.expr, value: Any, where: str) -> list[str]:
    """Errors of ``value`` against annotation ``t``; names outside the schema are not checked."""
    if isinstance(t, ast.BinOp):  # X | Y
        left, right = _check(schema, t.left, value, where), _check(schema, t.right, value, where)
        return left if left and right else []
    if isinstance(t, ast.Constant) and t.value is None:
        return [] if value is None else [f"{where}: {value!r} is not null"]
    if isinstance(t, ast.Name):
        if t.id in _SCALARS:
            kinds = _SCALARS[t.id]
            ok = isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))
            return [] if ok else [f"{where}: {value!r} is not {t.id}"]
        if t.id in schema:
            return errors(schema, t.id, value, where + ".")
        return []  # Any, JsonValue, enums: not checked
    if isinstance(t, ast.Subscript):
        head, args = ast.unparse(t.value), t.slice
        items = list(args.elts) if isinstance(args, ast.Tuple) else [args]
        if head in ("list", "List", "set", "Set", "Sequence"):
            if not isinstance(value, list):
                return [f"{where}: {value!r} is not a list"]
            return [e for v in value for e in _check(schema, items[0], v, where + "[]")]
        if head in ("dict", "Dict"):
            if not isinstance(value, dict):
                return [f"{where}: {value!r} is not an object"]
            key_ok = ast.unparse(items[0]) != "int" or all(k.lstrip("-").isdigit() for k in value)
            found = [] if key_ok else [f"{where}: keys {list(value)} are not integers"]
            return found + [e for v in value.values() for e in _check(schema, items[1], v, where)]
        if head == "Literal":
            allowed = [ast.literal_eval(i) for i in items]
            return [] if value in allowed else [f"{where}: {value!r} not in {allowed}"]
        if head == "Annotated":
            return _check(schema, items[0], value, where)
        if head in ("Optional", "Union"):
            options = [*items, ast.Constant(None)] if head == "Optional" else items
            failures = [_check(schema, o, value, where) for o in options]
            return [] if any(not f for f in failures) else failures[0]
    return []


def main() -> int:
    sources = {key: path for key, path in assets.servers().items() if key in CLASSES}
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(extract(sources), indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE} from {assets.VLLM}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
