"""Text templates: source/config file blocks per language and the agent's tool schemas.

Block templates hold placeholders ``«kindN»`` that ``ContentAtoms.fill`` replaces, one value
per distinct placeholder:
  id: snake identifier   C: class   cc: camelCase   K: CONST   w: noun   x: small int
  n: numeric literal     fl: float  s: string-literal body   doc: sentence   cm: comment
  h: hex hash   u: uuid   p: path   user: user name   kb: kebab   e: emoji   ts: date
"""

from __future__ import annotations

import json
import re
from typing import Any

from .pool_files import json_data, snippets

TEMPLATE_VAR = re.compile(r"«([A-Za-z]+)(\d*)»")

PY_BLOCKS = snippets("templates/py")
JS_BLOCKS = snippets("templates/js")  # also used for TypeScript
RS_BLOCKS = snippets("templates/rs")
GO_BLOCKS = snippets("templates/go")  # indented with spaces; tabified when used
YAML_BLOCKS = snippets("templates/yaml")
TOML_BLOCKS = snippets("templates/toml")
SQL_BLOCKS = snippets("templates/sql")
SH_BLOCKS = snippets("templates/sh")
MK_BLOCKS = snippets("templates/mk")  # indented with spaces; tabified when used
MD_BLOCKS = snippets("templates/md")

CSV_HEADER = "id,name,score,created_at,comment\n"


def _tool_schema_json(name: str, desc: str, props: dict[str, Any], req: list[str]) -> str:
    params = {
        "type": "object",
        "properties": props,
        "required": req,
        "additionalProperties": False,
        "$schema": "http://json-schema.org/draft-07/schema#",
    }
    obj = {
        "type": "function",
        "function": {"name": name, "description": desc, "parameters": params},
    }
    return json.dumps(obj, ensure_ascii=False)


# One JSON function schema per tool, as listed in the system prompt.
TOOL_SCHEMAS = tuple(
    _tool_schema_json(t["name"], t["description"], t["properties"], t["required"])
    for t in json_data("tools.json")
)
