"""Reasoning and tool calls out of generated text, for token-in text-out upstreams.

llama.cpp, vLLM ``/v1/completions`` and SGLang ``/generate`` return the model's raw text; the
parser of the model's tool format (``output_parser``) turns it into OpenAI chat fields,
streaming (``feed``/``finish`` give ``ChatDelta``s whose ``to_openai()`` is a
``chat.completion.chunk`` delta) or at once (``parse`` gives a ``ParsedOutput``). One parser
per generated choice.

Adding a format (the contract, ``interface.py``):

- One module per format holds its ``FORMAT = Format(...)``, registered by one line in
  ``formats.FORMATS``. It declares the ``template_markers`` that identify it in a chat
  template (``--tool-format auto``), its family's ``reasoning`` markers (``Reasoning``, or
  None), its markers that may be ``special_tokens`` (the upstream must keep them in its
  text), and the ``stop`` tokens the upstream must stop at.
- A tag-delimited format sets ``calls=TagCalls(...)``: the markers that ``opens`` a block,
  its ``close`` marker (None: there is none, and the block ends where the scanner says, or
  at the end of the output), a ``block_end`` factory (a fresh ``BlockEnd`` scanner per
  block, which may skip a closing marker that sits inside a string or value) and
  ``decode(block, schemas)``: the block's calls as ``(name, arguments JSON)`` pairs (a
  section may hold several), or None when malformed; ``other_closes`` for variant closing
  markers. Building blocks: ``scanning.ValueSkippingEnd`` (the scanner of XML-like formats
  with bare-text values), ``invokes`` (sections of ``invoke`` elements:
  ``InvokeTags.tag_calls``), ``marker_sections`` (sections of marker tokens around JSON
  arguments: ``section_format`` builds the whole format).
  Values the format writes as raw text are typed with ``schema.convert_value``; arguments
  are serialised with ``schema.encode_call``, except where the model writes them as one JSON
  object: that text goes on as written (``json_args.json_object_text``), as vLLM passes it
  and the chat templates write it back. The shared ``OutputParser`` does the rest.
- A format that does not fit a tag state machine sets ``parser=`` a callable taking
  ``ParserOptions`` and returning a ``ChoiceParser`` (``feed``, ``finish``, ``parse``,
  ``finish_reason``) that keeps the rules below; ``stepping.SteppedParser`` gives it that
  lifecycle, text merging and call numbering, and it writes the steps.

The rules every parser keeps:

- Reasoning is the text between the family's markers, verbatim: vLLM's Qwen3 reasoning
  parser strips no newlines either (``"<think>\\nx\\n</think>\\n\\ny"`` gives reasoning
  ``"\\nx\\n"`` and content ``"\\n\\ny"``), and Qwen3's chat template strips them itself when
  the message comes back. ``starts_in_reasoning`` is for prompts that already opened the
  reasoning block; otherwise only a marker opening the output starts reasoning. Output cut
  off inside reasoning is all reasoning (as in vLLM). Where the format says so
  (``TagCalls.end_reasoning``), a call's opening marker ends the reasoning too: the model went
  on to the call without closing it (vLLM reads GLM, MiniMax, DSML, Gemma 4, Seed-OSS so).
- A tool call is emitted whole, one delta with id, name and complete arguments, when its
  block closes, or, in a section whose scanner finds each call's end
  (``BlockEnd``'s ``call_ends``: Kimi K2, DeepSeek V3.1, the invokes of MiniMax M2 and
  DSML), when its own end marker arrives:
  a malformed call must come back as text, and a delta once sent cannot be taken back (the
  first malformed call of such a section is text with the rest of it). Text that is not a
  well-formed tool call (bad JSON, unknown layout, cut off by ``max_tokens``) is content,
  markers and all: model output is never lost, and nothing raises on it. Only
  whitespace-only gaps that touch tool calls are dropped as layout.
- A closing marker inside a string or value (``</tool_call>`` in a Hermes JSON string or a
  Qwen3-Coder parameter value) is text.
- Every split of the same text into pieces folds to the same fields.
"""

from app.protocol.output.deltas import ChatDelta, ParsedOutput, ToolCall, ToolCallDelta
from app.protocol.output.formats import (
    FORMATS,
    detect,
    output_parser,
    reasoning_markers,
    resolve,
)
from app.protocol.output.interface import ChoiceParser, Format, Reasoning
from app.protocol.output.parser import OutputParser, new_tool_call_id

__all__ = [
    "FORMATS",
    "ChatDelta",
    "ChoiceParser",
    "Format",
    "OutputParser",
    "ParsedOutput",
    "Reasoning",
    "ToolCall",
    "ToolCallDelta",
    "detect",
    "new_tool_call_id",
    "output_parser",
    "reasoning_markers",
    "resolve",
]
