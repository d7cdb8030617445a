"""Generated source and config files, and the Read tool's view of them."""

from __future__ import annotations

import json
from collections.abc import Callable
from random import Random
from typing import Any

from .atoms import ContentAtoms
from .templates import (
    CSV_HEADER,
    GO_BLOCKS,
    JS_BLOCKS,
    MD_BLOCKS,
    MK_BLOCKS,
    PY_BLOCKS,
    RS_BLOCKS,
    SH_BLOCKS,
    SQL_BLOCKS,
    TOML_BLOCKS,
    YAML_BLOCKS,
)
from .vocabulary import PY_STDLIB


def _tabify(text: str) -> str:
    out = []
    for line in text.split("\n"):
        stripped = line.lstrip(" ")
        n = (len(line) - len(stripped)) // 4
        out.append("\t" * n + line[4 * n :] if n else line)
    return "\n".join(out)


class SourceFiles(ContentAtoms):
    """Source/config files of any size in the session's languages."""

    def __init__(self, rng: Random) -> None:
        super().__init__(rng)
        r = self.r
        self._sources: dict[str, Callable[[], str]] = {
            "py": lambda: self.fill(r.choice(PY_BLOCKS)),
            "ts": lambda: self.fill(r.choice(JS_BLOCKS)),
            "js": lambda: self.fill(r.choice(JS_BLOCKS)),
            "rs": lambda: self.fill(r.choice(RS_BLOCKS)),
            "go": lambda: _tabify(self.fill(r.choice(GO_BLOCKS))),
            "yaml": lambda: self.fill(r.choice(YAML_BLOCKS)),
            "toml": lambda: self.fill(r.choice(TOML_BLOCKS)),
            "sql": lambda: self.fill(r.choice(SQL_BLOCKS)),
            "sh": lambda: self.fill(r.choice(SH_BLOCKS)),
            "mk": lambda: _tabify(self.fill(r.choice(MK_BLOCKS))),
            "md": self._md_block,
            "json": self._json_block,
            "csv": self._csv_block,
        }

    # ---- source files ------------------------------------------------------------------

    def _md_block(self) -> str:
        r = self.r
        if r.random() < 0.2:
            lines = [f"## {self.foreign()[:12]}", ""]
            lines += [self.foreign() for _ in range(r.randint(2, 5))]
            return "\n".join(lines) + "\n\n"
        return self.fill(r.choice(MD_BLOCKS))

    def _json_block(self) -> str:
        r = self.r
        obj = self.json_obj(r.randint(2, 4))
        if r.random() < 0.5:
            return json.dumps(obj, indent=2, ensure_ascii=r.random() < 0.3) + "\n"
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=r.random() < 0.3) + "\n"

    def _csv_block(self) -> str:
        r = self.r
        rows = []
        sep = "\t" if r.random() < 0.3 else ","
        for i in range(r.randint(5, 25)):
            name = self.foreign()[:10] if r.random() < 0.2 else self.ident()
            note = '"' + self.sentence().replace('"', '""') + '"'
            rows.append(sep.join((str(r.randrange(10**6) + i), name, self.flt(), self.ts(), note)))
        return "\n".join(rows) + "\n"

    def json_obj(self, depth: int) -> Any:
        r = self.r
        if depth <= 0:
            k = r.randrange(8)
            if k == 0:
                return r.randrange(-(10**9), 10**12)
            if k == 1:
                return round(r.uniform(-100, 100), r.randint(1, 9))
            if k == 2:
                return r.choice((True, False, None))
            if k == 3:
                return self.uuid()
            if k == 4:
                return [r.randrange(200_000) for _ in range(r.randint(3, 24))]
            if k == 5:
                return self.foreign()
            if k == 6:
                return self.ts()
            return self.literal()
        out: dict[str, Any] = {}
        for _ in range(r.randint(2, 6)):
            key = r.choice((self.ident(), self.camel(), self.noun(), "id", "type", "data"))
            out[key] = self.json_obj(depth - r.randint(1, 2))
        if r.random() < 0.3:
            out["items"] = [self.json_obj(depth - 2) for _ in range(r.randint(1, 4))]
        return out

    def source(self, lang: str, size: int) -> str:
        """A source/config file of roughly ``size`` characters (at least one block)."""
        r = self.r
        gen = self._sources.get(lang, self._sources["py"])
        parts: list[str] = []
        total = 0
        if lang == "py":
            head = self._py_header()
            parts.append(head)
            total += len(head)
        elif lang == "csv":
            parts.append(CSV_HEADER)
        while total < size:
            b = self._py_id_list() if lang == "py" and r.random() < 0.08 else gen()
            parts.append(b)
            total += len(b)
        text = "".join(parts)
        if len(text) > size * 1.3 + 200:
            cut = text.rfind("\n", 0, max(size, 80))
            text = text[: cut + 1] if cut > 0 else text[:size]
        return self.roughen(text, 0.02)

    def _py_header(self) -> str:
        r = self.r
        mods = sorted(r.sample(PY_STDLIB, r.randint(2, 6)))
        lines = ['"""' + self.sentence() + '"""', "", "from __future__ import annotations", ""]
        lines += [f"import {m}" for m in mods]
        lines += [
            "from dataclasses import dataclass, field",
            "from typing import Any, Final, Sequence",
            "",
        ]
        lines += [f"from {self.pkg}.{self.noun()} import {self.cls()}, {self.ident()}", ""]
        lines += ["log = logging.getLogger(__name__)", "", ""]
        return "\n".join(lines) + "\n"

    def _py_id_list(self) -> str:
        r = self.r
        ids = [str(r.randrange(0, 151_936)) for _ in range(r.randint(20, 120))]
        lines = []
        for i in range(0, len(ids), 12):
            lines.append("    " + ", ".join(ids[i : i + 12]) + ",")
        return f"{self.const()}_IDS = [\n" + "\n".join(lines) + "\n]\n\n"

    # ---- the Read tool's view ----------------------------------------------------------

    def numbered(self, text: str, start: int = 1) -> str:
        """Claude Code's Read format: right-aligned line number, an arrow, the line."""
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return "\n".join(f"{i:6d}\u2192{ln}" for i, ln in enumerate(lines, start))

    def read_output(self, rel: str, lang: str, size: int) -> str:
        r = self.r
        body = self.source(lang, max(40, size - 40))
        if r.random() < 0.03:
            body = "\ufeff" + body
        if r.random() < 0.07:
            body = body.replace("\n", "\r\n")
        start = 1 if r.random() < 0.8 else r.randint(2, 900)
        out = self.numbered(body, start)
        if r.random() < 0.3:
            out += (
                "\n\n<system-reminder>\nWhenever you read a file, consider whether it looks "
                "malicious. You may analyse it, but don't improve or extend malicious code."
                "\n</system-reminder>\n"
            )
        return out
