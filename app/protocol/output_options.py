"""What a client asks of the output's form: a format (JSON, a JSON schema, a regex, a choice,
a grammar) and log probabilities, read from each client API's own fields.

* chat completions: ``response_format`` (``text``, ``json_object``, ``json_schema``), vLLM's
  ``structured_outputs`` (one of ``json``, ``json_object``, ``regex``, ``choice``,
  ``grammar``), ``logprobs`` / ``top_logprobs``;
* Responses: ``text.format`` (the same types, the schema inline), ``top_logprobs``;
* Anthropic Messages: ``output_format`` and ``output_config.format`` (``json_schema``);
  its API has no log probabilities.

Each dialect sends them under its server's own fields, or refuses the request naming the
client's field where the server has none (``app.upstream.output_fields``).
"""

from __future__ import annotations

from typing import Any

import orjson

from app.errors import BadRequestError
from app.generation import OutputFormat

MAX_TOP_LOGPROBS = 20
"""OpenAI's bound on ``top_logprobs``."""
RESPONSES_FORMAT = "text.format"
"""The Responses API's field for the output format."""
_STRUCTURED = ("json", "json_object", "regex", "choice", "grammar")


def output_format(body: dict[str, Any], param: str = "response_format") -> OutputFormat | None:
    """The chat completions body's output format (``response_format`` or
    ``structured_outputs``, not both); ``param`` names the client's field that
    ``response_format`` stands for (``text.format`` in a translated Responses body)."""
    response_format = body.get("response_format")
    structured = body.get("structured_outputs")
    if response_format is not None and structured is not None:
        raise BadRequestError(
            "set either 'response_format' or 'structured_outputs', not both",
            param="structured_outputs",
        )
    if structured is not None:
        return _structured(structured)
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise BadRequestError(f"'{param}' must be an object", param=param)
    schema = response_format.get("json_schema")
    inner = schema.get("schema") if isinstance(schema, dict) else None
    return format_of(response_format.get("type"), inner, param)


def format_of(kind: Any, schema: Any, param: str) -> OutputFormat | None:
    """An OpenAI-style format's constraint: ``text`` none, ``json_object`` any JSON object,
    ``json_schema`` the ``schema`` (an object)."""
    if kind == "text":
        return None
    if kind == "json_object":
        return OutputFormat("json", None, param)
    if kind == "json_schema":
        if not isinstance(schema, dict):
            raise BadRequestError(
                f"{param}: a json_schema format needs its schema as an object", param=param
            )
        return OutputFormat("json", schema, param)
    raise BadRequestError(
        f"{param}.type must be 'text', 'json_object' or 'json_schema'", param=param
    )


def _structured(value: Any) -> OutputFormat:
    param = "structured_outputs"
    if not isinstance(value, dict):
        raise BadRequestError(f"'{param}' must be an object", param=param)
    for key in value:
        if key not in _STRUCTURED:
            raise BadRequestError(
                f"{param}.{key} is not supported (one of {', '.join(_STRUCTURED)})",
                param=f"{param}.{key}",
            )
    set_keys = [k for k in _STRUCTURED if value.get(k) not in (None, False)]
    if len(set_keys) != 1:
        raise BadRequestError(
            f"{param} must set exactly one of {', '.join(_STRUCTURED)}", param=param
        )
    key = set_keys[0]
    item, where = value[key], f"{param}.{key}"
    if key == "json_object":
        return OutputFormat("json", None, where)
    if key == "json":
        schema = _json_object(item, where) if isinstance(item, str) else item
        if not isinstance(schema, dict):
            raise BadRequestError(f"{where} must be a JSON schema", param=where)
        return OutputFormat("json", schema, where)
    if key == "choice":
        if not isinstance(item, list) or not item or not all(isinstance(c, str) for c in item):
            raise BadRequestError(f"{where} must be a non-empty array of strings", param=where)
        return OutputFormat("choice", item, where)
    if not isinstance(item, str) or not item:
        raise BadRequestError(f"{where} must be a non-empty string", param=where)
    return OutputFormat("regex" if key == "regex" else "grammar", item, where)


def _json_object(text: str, where: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        raise BadRequestError(f"{where} is not valid JSON", param=where) from None


def logprobs_asked(body: dict[str, Any]) -> int | None:
    """Chat completions' ``logprobs`` (a bool) and ``top_logprobs`` (0 to 20, needs it)."""
    wanted = body.get("logprobs")
    if wanted is not None and not isinstance(wanted, bool):
        raise BadRequestError("'logprobs' must be a boolean", param="logprobs")
    top = top_logprobs(body.get("top_logprobs"), "top_logprobs")
    if not wanted:
        if top:
            raise BadRequestError("'top_logprobs' needs 'logprobs': true", param="top_logprobs")
        return None
    return top or 0


def top_logprobs(value: Any, param: str) -> int | None:
    """A ``top_logprobs`` count: an integer from 0 to ``MAX_TOP_LOGPROBS``, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOP_LOGPROBS:
        raise BadRequestError(
            f"'{param}' must be an integer from 0 to {MAX_TOP_LOGPROBS}", param=param
        )
    return value


def responses_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The chat fields of a Responses body's ``text.format``; its log probabilities
    (``top_logprobs``, ``include`` of ``message.output_text.logprobs``) are a 400: this proxy
    does not carry them into Responses' output."""
    if body.get("top_logprobs") is not None:
        raise BadRequestError(
            "'top_logprobs' is not supported on the Responses API by this proxy; the chat "
            "completions API carries log probabilities",
            param="top_logprobs",
        )
    include = body.get("include")
    if isinstance(include, list) and "message.output_text.logprobs" in include:
        raise BadRequestError(
            "include 'message.output_text.logprobs' is not supported on the Responses API by "
            "this proxy; the chat completions API carries log probabilities",
            param="include",
        )
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if fmt is None:
        return {}
    if not isinstance(fmt, dict):
        raise BadRequestError(f"'{RESPONSES_FORMAT}' must be an object", param=RESPONSES_FORMAT)
    return _chat_format(format_of(fmt.get("type"), fmt.get("schema"), RESPONSES_FORMAT))


def anthropic_format_param(body: dict[str, Any]) -> str:
    """The field an Anthropic body's structured output is read from: ``output_config.format``
    where set, else the earlier beta's ``output_format``."""
    config = body.get("output_config")
    if isinstance(config, dict) and config.get("format") is not None:
        return "output_config.format"
    return "output_format"


def anthropic_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The chat fields of an Anthropic body's structured output (``anthropic_format_param``),
    ``{"type": "json_schema", "schema": ...}``."""
    param = anthropic_format_param(body)
    fmt = body["output_config"]["format"] if param == "output_config.format" else body.get(param)
    if fmt is None:
        return {}
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        raise BadRequestError(f"{param}: the type must be 'json_schema'", param=param)
    return _chat_format(format_of("json_schema", fmt.get("schema"), param))


def _chat_format(fmt: OutputFormat | None) -> dict[str, Any]:
    """``fmt`` as a chat completions ``response_format``."""
    if fmt is None:
        return {}
    if fmt.value is None:
        return {"response_format": {"type": "json_object"}}
    schema = {"name": "output", "schema": fmt.value}
    return {"response_format": {"type": "json_schema", "json_schema": schema}}
