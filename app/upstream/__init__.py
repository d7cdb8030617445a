"""Upstream model servers: dialects (how ids are sent), the HTTP client, readiness."""

from __future__ import annotations

from app.upstream.dialect import Dialect, Generated, Prompt, UpstreamCall
from app.upstream.llamacpp import LlamaCppCompletions, LlamaCppNative
from app.upstream.sglang import SglangGenerate
from app.upstream.vllm import VllmChat, VllmCompletions, VllmGenerate

__all__ = [
    "Dialect",
    "Generated",
    "Prompt",
    "UpstreamCall",
    "dialect_named",
]


def dialect_named(name: str) -> Dialect:
    """The dialect for a ``--dialect`` value (see ``app.config.DIALECTS``)."""
    dialects: tuple[type[Dialect], ...] = (
        LlamaCppCompletions,
        LlamaCppNative,
        VllmChat,
        VllmCompletions,
        VllmGenerate,
        SglangGenerate,
    )
    for dialect in dialects:
        if dialect.name == name:
            return dialect()
    raise ValueError(f"unknown dialect {name!r}")
