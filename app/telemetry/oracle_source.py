"""The shadow verifier's own view of a request's special-token text, apart from the proxy's.

The proxy masks special-token text in client data (``app.sessions.typed_specials``) and
sends the ids of the text rendered from the masked copy.  Checking those ids against that same
text would only check the encoder: a string the masking missed (an object key, say) would
be a control token in both.  So the verifier starts again from the client data as the proxy
received it, before masking: it finds special-token text in every string with a walk and a
pattern of its own (built from the tokenizer's added tokens), swaps each occurrence for a
marker character of its own (drawn, for this check only, from private-use characters that
neither the data nor the template's source holds, so none can be forged), renders that copy
with the model's template, and hands the text and the markers to the oracle, which splits at
the special tokens the template placed and encodes the pieces with the markers restored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tokenizers import Tokenizer

_MARKERS = range(0xE000, 0xF900)
"""The Basic Multilingual Plane's private use area, where the markers are drawn from."""


class Template(Protocol):
    """The chat template, as the verifier uses it (``app.rendering.ChatTemplate`` is one; the
    service hands it over, so telemetry does not import rendering).  It must pickle: the
    verifier's child process renders with it (``oracle_process``)."""

    def render(self, messages: Sequence[Any], **options: Any) -> str: ...

    def source(self, *, tools: bool = False) -> str: ...


@dataclass(frozen=True, slots=True)
class RenderSource:
    """A request's template inputs as the client sent them (read only, never mutated)."""

    template: Template
    messages: Sequence[Any]
    tools: Sequence[Any] | None
    template_kwargs: Mapping[str, Any] | None
    add_generation_prompt: bool

    def render(self, change: Callable[[str], str] | None = None) -> str:
        """The prompt, with ``change`` applied to every client string (keys included)."""
        data: list[Any] = [self.messages, self.tools, self.template_kwargs]
        messages, tools, kwargs = data if change is None else _mapped(data, change)
        return self.template.render(
            messages,
            tools=tools,
            add_generation_prompt=self.add_generation_prompt,
            chat_template_kwargs=kwargs,
        )


def special_pattern(tokenizer: Tokenizer) -> re.Pattern[str] | None:
    """Any of the tokenizer's special tokens, longest first; None when it has none."""
    tokens = sorted(
        (t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special),
        key=len,
        reverse=True,
    )
    return re.compile("|".join(map(re.escape, tokens))) if tokens else None


def oracle_prompt(
    source: RenderSource, specials: re.Pattern[str] | None
) -> tuple[str, dict[str, str]] | None:
    """(the text rendered with the client's special-token text swapped for markers, marker
    -> token) when some client string holds special-token text; else None."""
    if specials is None:
        return None
    data = (source.messages, source.tools, source.template_kwargs)
    strings = list(_strings(data))
    typed = sorted({m.group() for s in strings for m in specials.finditer(s)})
    if not typed:
        return None
    template = source.template
    taken = set().union(*map(set, strings), template.source(), template.source(tools=True))
    free = (chr(c) for c in _MARKERS if chr(c) not in taken)
    markers = dict(zip(typed, free, strict=False))
    if len(markers) < len(typed):
        raise RuntimeError("no free marker characters for the shadow check")
    text = source.render(lambda s: specials.sub(lambda m: markers[m.group()], s))
    return text, {marker: token for token, marker in markers.items()}


def _strings(value: Any) -> Iterator[str]:
    """Every string in JSON data: values and object keys, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str):
                yield k
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _mapped(value: Any, change: Callable[[str], str]) -> Any:
    """A copy of JSON data with ``change`` applied to every string, keys included (the
    verifier's own walk: sharing the proxy's would share its faults)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, Mapping):
        return {
            change(k) if isinstance(k, str) else k: _mapped(v, change) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_mapped(v, change) for v in value]
    return value
