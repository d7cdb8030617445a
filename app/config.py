"""Settings: one declaration per setting, read from flags, ``TOKSPLICE_*`` variables, defaults.

Each field of ``Settings`` carries its type, default, validation and help; pydantic-settings
reads the environment variable ``TOKSPLICE_<FIELD>`` and ``toksplice serve`` generates one flag
per field from the same declaration (``--<field-with-dashes>``; booleans also as
``--no-<field>``).  Flags win over the environment, the environment over defaults.
Constructing ``Settings(...)`` reads the environment too; keyword arguments win over it.
The other subcommands' options are declared the same way (``cli_config``, ``app.__main__``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import httpx
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.generation import ToolFormat
from app.tokenization.chunked import PARALLEL_CHUNK
from app.tokenization.native_route import CpuEncoder

Dialect = Literal[
    "llamacpp",
    "llamacpp-completion",
    "vllm-chat",
    "vllm-completions",
    "vllm-generate",
    "sglang",
]
DIALECTS: tuple[str, ...] = get_args(Dialect)
"""Upstream dialects: how token ids are sent (see ``app.upstream``)."""

ENV_PREFIX = "TOKSPLICE_"
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
_NONE = ("", "none", "off")
_ON_OFF = {"1": "on", "true": "on", "0": "off", "false": "off"}


def cli_config(prog: str, env_prefix: str) -> SettingsConfigDict:
    """How a command's options are read, for every ``toksplice`` subcommand alike: each field
    is a ``--kebab-case`` flag (a boolean also ``--no-<flag>``; ``none`` for None) and the
    variable ``<env_prefix><FIELD>``, its docstring is its ``--help`` line."""
    return SettingsConfigDict(
        env_prefix=env_prefix,
        frozen=True,
        extra="forbid",
        use_attribute_docstrings=True,
        cli_prog_name=prog,
        cli_kebab_case=True,
        cli_implicit_flags=True,
        cli_hide_none_type=True,
        cli_parse_none_str="none",
        cli_show_env_vars=True,
    )


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Upstream timeouts in seconds; ``read`` (the ``read_timeout`` setting) bounds the wait for
    each chunk, so it also bounds time to first token."""

    read: float
    connect: float = 5.0
    write: float = 60.0
    pool: float = 10.0

    def httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=self.read, write=self.write, pool=self.pool)


class Settings(BaseSettings):
    """Everything ``create_app`` needs; each field's docstring is its ``--help`` text (the
    keys are left out of ``repr``)."""

    model_config = cli_config("toksplice serve", ENV_PREFIX)

    upstream: str = "http://127.0.0.1:8080"
    """Model server base URL (no trailing /v1)."""
    tokenizer: Path = Path("tokenizer.json")
    """tokenizer.json, or a folder with tokenizer.json and tokenizer_config.json (the model's
    own files)."""
    chat_template: Path | None = None
    """tokenizer_config.json, .jinja or .gguf with the chat template (none: tokenizer_config.json
    beside the tokenizer)."""
    dialect: Dialect = "llamacpp"
    """How ids are sent: llamacpp (/v1/completions), llamacpp-completion (/completion),
    vllm-chat (kv_transfer_params), vllm-completions, vllm-generate, sglang (/generate)."""
    model: str | None = None
    """Model name clients ask for (none: the tokenizer folder's name)."""
    upstream_model: str | None = None
    """Model name sent upstream, which vLLM and SGLang check (none: --model)."""
    upstream_api_key: str | None = Field(default=None, repr=False)
    """Bearer key for the upstream."""
    host: str = "127.0.0.1"
    """Listen address."""
    port: int = Field(default=8000, ge=0, le=65535)
    """Listen port."""
    max_body_bytes: int = Field(default=64 << 20, ge=1024)
    """Largest request body accepted, in bytes."""
    read_timeout: float = Field(default=600.0, gt=0)
    """Seconds to wait for each upstream chunk (so also for the first token)."""
    max_connections: int = Field(default=256, ge=1)
    """Connections to the upstream, at most."""
    upstream_max_body_bytes: int = Field(default=64 << 20, ge=1024)
    """Largest non-streamed upstream answer read, in bytes (then 502)."""
    upstream_max_line_bytes: int = Field(default=16 << 20, ge=1024)
    """Longest line of an upstream stream read, in bytes (then 502, or an error event)."""
    store_bytes: int = Field(default=1 << 30, ge=0)
    """Memory for session state in bytes (text, ids, offsets, cached id JSON, memos)."""
    tool_format: ToolFormat | Literal["auto"] | None = "auto"
    """How the model writes tool calls and reasoning, for text-out dialects: auto (read from
    the chat template's markers; hermes when it shows none), a format, or none (not parsed)."""
    reasoning: bool = True
    """Split the model's reasoning (<think>...</think> or its family's markers) from the
    answer into reasoning_content."""
    strip_billing_line: Literal["auto", "on", "off"] = "auto"
    """Drop Claude Code's per-call x-anthropic-billing-header line from system turns as vLLM
    0.33 does: auto (on for the vllm-* dialects, whose server drops it; off for the others),
    on or off (also 1 or 0)."""
    alignment_check: bool = True
    """Compare our ids with the upstream's /tokenize (at start, before the next call after its
    connection broke, and every --alignment-recheck-s); forward text on mismatch."""
    alignment_recheck_s: float = Field(default=300.0, ge=0)
    """Seconds between alignment checks while serving (0: none but those after a break)."""
    store: str = "memory"
    """Session state: memory (this process) or a Redis URL (redis://host:6379/0, rediss://,
    unix://) shared by replicas, with this process's memory in front."""
    store_ttl: float = Field(default=86400.0, gt=0)
    """Seconds a session's shared state outlives its last call (Redis only)."""
    redis_timeout: float = Field(default=0.1, gt=0)
    """Seconds to wait on Redis before serving from memory / encoding in full instead."""
    api_keys_file: Path | None = None
    """JSON {key: tenant}: the proxy's own API keys; calls without one get 401 (none: open)."""
    client_timeout: float = Field(default=60.0, gt=0)
    """Seconds a client may take to send its request body (then 408)."""
    header_timeout: float = Field(default=10.0, gt=0)
    """Seconds a connection may take, from opening or its last answer, to send a complete
    request head; then it is closed."""
    keep_alive_timeout: float = Field(default=5.0, gt=0)
    """Seconds an idle keep-alive connection stays open after its last answer."""
    tracing: bool = True
    """Build an OpenTelemetry trace per request (ring buffer for /debug/traces; OTLP when
    OTEL_EXPORTER_OTLP_ENDPOINT is set)."""
    trace_console: bool = False
    """Also print every span to stdout."""
    trace_ring: int = Field(default=512, ge=1)
    """Recent requests kept for /debug/traces."""
    shadow_rate: float = Field(default=0.05, ge=0.0, le=1.0)
    """Fraction of requests whose ids the shadow verifier re-encodes in the background."""
    shadow_cpu: float = Field(default=0.25, gt=0.0, le=1.0)
    """Share of one core the shadow verifier uses at most, on average: after a check of t
    seconds it rests t * (1 / shadow_cpu - 1); its checks also run at idle CPU priority."""
    shadow_queue: int = Field(default=4, ge=1)
    """Pending shadow checks, each holding a copy of its prompt; requests sampled while all are
    taken are dropped (and counted)."""
    shadow_repro_dir: Path = Path("toksplice-repro")
    """Where a divergence's reproduction (prompt text and ids: user content) is written."""
    shadow_disable_on_divergence: bool = False
    """After a shadow divergence, encode every prompt in full (no repair) until restart."""
    gpu_cold_start: int = Field(default=0, ge=0)
    """Cold starts (no stored transcript to repair from) of at least this many bytes are
    tokenized on the GPU when CuPy, a CUDA device and a covered family are there; 0 (the
    default): never, the CPU's cold start being the faster on every figure measured
    (docs/gpu.md, "When the GPU pays")."""
    parallel_chunk: int = Field(default=PARALLEL_CHUNK, ge=0)
    """Texts encoded whole on the CPU are cut at proven stable cuts into chunks of about this
    many bytes, encoded in parallel on every core; 0: in one piece."""
    cpu_encoder: CpuEncoder = "native"
    """Engine of whole-text encodes on the CPU: native (exact, in C, for the families it
    covers; the reference for the others) or reference (Hugging Face tokenizers always)."""
    admin_key: str | None = Field(default=None, repr=False)
    """Key for /metrics and /debug/* when not bound to a loopback host (Authorization: Bearer
    <key> or x-admin-key)."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """Log level of the proxy and uvicorn."""

    @field_validator("tool_format", mode="before")
    @classmethod
    def _no_tool_format(cls, value: Any) -> Any:
        return None if isinstance(value, str) and value.strip().lower() in _NONE else value

    @field_validator("strip_billing_line", mode="before")
    @classmethod
    def _on_off(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, str):
            value = value.strip().lower()
            return _ON_OFF.get(value, value)
        return value

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str) -> str:
        if value != "memory" and not value.startswith(_REDIS_SCHEMES):
            raise ValueError(f"store must be 'memory' or a Redis URL, not {value!r}")
        return value

    @property
    def timeouts(self) -> Timeouts:
        return Timeouts(read=self.read_timeout)

    def strips_billing_line(self, tool_format: str | None) -> bool:
        """``strip_billing_line`` resolved: ``auto`` is on where vLLM's chat parsing takes the
        line off, its own dialects, but for a harmony model (gpt-oss), which vLLM renders with
        openai-harmony, keeping the line."""
        if self.strip_billing_line == "auto":
            return self.dialect.startswith("vllm-") and tool_format != "harmony"
        return self.strip_billing_line == "on"

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
