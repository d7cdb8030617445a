"""Settings: one frozen object built from flags and ``TOKSPLICE_*`` environment variables.

Every field has a default a single-machine user can keep; ``Settings.from_env`` reads the
environment and command-line flags override it (see ``toksplice serve --help``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import httpx

from app.generation import ToolFormat
from app.tokenization.chunked import PARALLEL_CHUNK
from app.tokenization.native_route import CPU_ENCODERS, CpuEncoder

DIALECTS = (
    "llamacpp",
    "llamacpp-completion",
    "vllm-chat",
    "vllm-completions",
    "vllm-generate",
    "sglang",
)
"""Upstream dialects: how token ids are sent (see ``app.upstream``)."""

ENV_PREFIX = "TOKSPLICE_"
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Upstream timeouts in seconds; ``read`` bounds the wait for each chunk, so it also bounds
    time to first token."""

    connect: float = 5.0
    read: float = 600.0
    write: float = 60.0
    pool: float = 10.0

    def httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=self.read, write=self.write, pool=self.pool)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything ``create_app`` needs; see the field docstrings."""

    upstream: str = "http://127.0.0.1:8080"
    """Base URL of the model server (no trailing /v1)."""
    tokenizer: Path = Path("tokenizer.json")
    """A tokenizer.json, or a folder holding tokenizer.json (and tokenizer_config.json)."""
    chat_template: Path | None = None
    """tokenizer_config.json, a .jinja file or a .gguf; default: the tokenizer's folder."""
    dialect: str = "llamacpp"
    model: str | None = None
    """The model name clients use; default: the tokenizer folder's name."""
    upstream_model: str | None = None
    """The name sent upstream (vLLM/SGLang check it); default: ``model``."""
    upstream_api_key: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 64 << 20
    timeouts: Timeouts = field(default_factory=Timeouts)
    max_connections: int = 256
    store_bytes: int = 1 << 30
    """Byte budget of stored sessions (text, ids, offsets and cached id JSON)."""
    tool_format: ToolFormat | None = "hermes"
    """How the model writes tool calls: "hermes", "qwen3_coder" or none."""
    reasoning: bool = True
    """Split ``<think>...</think>`` from the answer into ``reasoning_content``."""
    strip_billing_line: bool = False
    """Drop Claude Code's per-call ``x-anthropic-billing-header`` line from the system prompt
    (it changes every call; repair handles it, stripping saves even that)."""
    alignment_check: bool = True
    """At start, compare our ids with the upstream's /tokenize; forward text on mismatch."""
    store: str = "memory"
    """Where session state lives: "memory" (this process) or a Redis URL (``redis://host:6379/0``,
    ``rediss://``, ``unix://``) shared by replicas, with this process's memory in front."""
    store_ttl: float = 86400.0
    """Seconds a session's shared state outlives its last call (Redis only)."""
    redis_timeout: float = 0.1
    """Seconds to wait on Redis before serving from memory / encoding in full instead."""
    api_keys_file: Path | None = None
    """JSON object mapping each API key of the proxy to its tenant's name; when set, calls
    without one of these keys get 401 (the upstream's key is ``upstream_api_key``)."""
    client_timeout: float = 60.0
    """Seconds a client may take to send its request body (then 408)."""
    header_timeout: float = 10.0
    """Seconds a connection may take, from opening or its last answer, to send a complete
    request head; then it is closed (slow or silent clients cannot hold sockets)."""
    keep_alive_timeout: float = 5.0
    """Seconds an idle keep-alive connection stays open after its last answer."""
    tracing: bool = True
    """Build an OpenTelemetry trace per request (ring buffer for /debug/traces; OTLP when
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set)."""
    trace_console: bool = False
    """Also print every span to stdout (OpenTelemetry's console exporter)."""
    trace_ring: int = 512
    """Recent requests kept for /debug/traces."""
    shadow_rate: float = 0.05
    """Fraction of requests whose ids the shadow verifier re-encodes in the background."""
    shadow_cpu: float = 0.25
    """Share of one core the shadow verifier uses at most, on average: after a check of t
    seconds it rests t * (1 / shadow_cpu - 1) (1: no rest).  Its checks run at idle CPU
    priority besides, so they never take a core the request path wants."""
    shadow_queue: int = 4
    """Pending shadow checks, each holding a copy of its prompt (in a buffer reused from check
    to check); requests sampled while all are taken are dropped (and counted)."""
    shadow_repro_dir: Path = Path("toksplice-repro")
    """Where a divergence's reproduction (text and ids: user content) is written."""
    shadow_disable_on_divergence: bool = False
    """After a divergence, encode every text in full (no repair) until restart."""
    gpu_cold_start: int = 64 << 10
    """Cold starts (no stored transcript to repair from) of at least this many bytes are
    tokenized on the GPU when one can run the kernels (CuPy, CUDA, a covered family); 0: never."""
    parallel_chunk: int = PARALLEL_CHUNK
    """Texts encoded whole on the CPU (cold starts, long new stretches) are cut at proven stable
    cuts into chunks of about this many bytes, encoded in parallel on every core; 0: in one
    piece."""
    cpu_encoder: CpuEncoder = "native"
    """Engine of the CPU's whole-text encodes (cold starts, fallbacks, new stretches):
    "native" (exact, in C, for the families it covers; the reference for the others and for
    text its normalizer changes) or "reference" (Hugging Face ``tokenizers`` always)."""
    admin_key: str | None = None
    """Key for /metrics and /debug/* when not bound to a loopback host (``Authorization:
    Bearer <key>`` or ``x-admin-key``)."""

    @property
    def tokenizer_file(self) -> Path:
        return self.tokenizer / "tokenizer.json" if self.tokenizer.is_dir() else self.tokenizer

    @property
    def template_source(self) -> Path:
        if self.chat_template is not None:
            return self.chat_template
        folder = self.tokenizer if self.tokenizer.is_dir() else self.tokenizer.parent
        return folder / "tokenizer_config.json"

    @property
    def served_model(self) -> str:
        if self.model:
            return self.model
        folder = self.tokenizer if self.tokenizer.is_dir() else self.tokenizer.parent
        return folder.resolve().name or "default"

    @classmethod
    def from_env(
        cls, overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> Settings:
        """Defaults, then ``TOKSPLICE_<FIELD>`` variables, then ``overrides`` (None skipped)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is not None and f.name != "timeouts":
                values[f.name] = _convert(f.name, raw)
        timeout = env.get(ENV_PREFIX + "READ_TIMEOUT")
        if timeout is not None:
            values["timeouts"] = Timeouts(read=float(timeout))
        for name, value in (overrides or {}).items():
            if value is not None:
                values[name] = _convert(name, value) if isinstance(value, str) else value
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {self.dialect!r}; one of {', '.join(DIALECTS)}")
        if self.tool_format not in (None, "hermes", "qwen3_coder"):
            raise ValueError(f"unknown tool format {self.tool_format!r}")
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be at least 1024")
        if self.store != "memory" and not self.store.startswith(_REDIS_SCHEMES):
            raise ValueError(f"store must be 'memory' or a Redis URL, not {self.store!r}")
        if not 0.0 <= self.shadow_rate <= 1.0:
            raise ValueError("shadow_rate must be between 0 and 1")
        if self.gpu_cold_start < 0:
            raise ValueError("gpu_cold_start must be 0 (off) or a byte count")
        if self.parallel_chunk < 0:
            raise ValueError("parallel_chunk must be 0 (one piece) or a byte count")
        if self.cpu_encoder not in CPU_ENCODERS:
            raise ValueError(f"cpu_encoder must be one of {', '.join(CPU_ENCODERS)}")
        if not 0.0 < self.shadow_cpu <= 1.0:
            raise ValueError("shadow_cpu must be above 0 and at most 1")
        if self.shadow_queue < 1 or self.trace_ring < 1:
            raise ValueError("shadow_queue and trace_ring must be at least 1")


def _convert(name: str, raw: str) -> Any:
    if name in ("tokenizer", "chat_template", "api_keys_file", "shadow_repro_dir"):
        return Path(raw)
    if name in (
        "port",
        "max_body_bytes",
        "max_connections",
        "store_bytes",
        "shadow_queue",
        "trace_ring",
        "gpu_cold_start",
        "parallel_chunk",
    ):
        return int(raw)
    if name in (
        "store_ttl",
        "redis_timeout",
        "client_timeout",
        "header_timeout",
        "keep_alive_timeout",
        "shadow_rate",
        "shadow_cpu",
    ):
        return float(raw)
    if name in (
        "reasoning",
        "alignment_check",
        "strip_billing_line",
        "tracing",
        "trace_console",
        "shadow_disable_on_divergence",
    ):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if name == "tool_format" and raw.strip().lower() in ("", "none", "off"):
        return None
    return raw
