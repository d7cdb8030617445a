"""The building blocks of generated text: one session's names, numbers and phrases."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from random import Random

from .templates import TEMPLATE_VAR
from .vocabulary import (
    ADJS,
    EMOJI,
    FOREIGN,
    FULLNAMES,
    NOUNS,
    ODD_SPACES,
    PROJECT_PREFIXES,
    PROJECT_SUFFIXES,
    SENTENCES,
    SPECIAL_LOOKALIKES,
    USERS,
    VERBS,
)


class ContentAtoms:
    """A session's identity (user, project, files, clock) and its small text pieces.

    All randomness comes from the one seeded ``Random`` given to the constructor, so the
    order of calls decides the output.
    """

    def __init__(self, rng: Random) -> None:
        r = self.r = rng
        self.user = r.choice(USERS)
        self.fullname = r.choice(FULLNAMES)
        self.project = (
            f"{r.choice(PROJECT_PREFIXES)}{r.choice(('-', '_', ''))}{r.choice(PROJECT_SUFFIXES)}"
        )
        self.pkg = self.project.replace("-", "_")
        self.root = f"/home/{self.user}/src/{self.project}"
        self.clock = 1_700_000_000 + r.randrange(60_000_000)
        self._idents = [self._new_ident() for _ in range(48)]
        self._classes = [self._new_class() for _ in range(16)]
        self.files = [self._new_path() for _ in range(36)]
        self.branch = f"{r.choice(('feat', 'fix', 'chore', 'perf'))}/{self.kebab()}"
        # What fills a template placeholder «kindN», by kind (see ``templates``).
        kinds: dict[str, Callable[[], str]] = {
            "id": self.ident,
            "C": self.cls,
            "cc": self.camel,
            "K": self.const,
            "w": self.noun,
            "x": self.small,
            "n": self.number,
            "fl": self.flt,
            "s": self.literal,
            "doc": self.sentence,
            "cm": self.comment,
            "h": lambda: self.hexs(r.choice((7, 12, 16, 40))),
            "u": self.uuid,
            "p": lambda: self.path()[0],
            "user": lambda: self.user,
            "kb": self.kebab,
            "e": self.emoji,
            "ts": self.date,
        }
        self._kinds = kinds

    # ---- atoms -------------------------------------------------------------------------

    def _new_ident(self) -> str:
        r = self.r
        k = r.random()
        if k < 0.45:
            return f"{r.choice(VERBS)}_{r.choice(NOUNS)}"
        if k < 0.7:
            return f"{r.choice(ADJS)}_{r.choice(NOUNS)}"
        if k < 0.92:
            return f"{r.choice(VERBS)}_{r.choice(ADJS)}_{r.choice(NOUNS)}"
        return f"{r.choice(NOUNS)}{r.randint(2, 64)}"

    def _new_class(self) -> str:
        r = self.r
        words = [r.choice(ADJS)] if r.random() < 0.3 else []
        words += [r.choice(NOUNS), r.choice(NOUNS)]
        return "".join(w.capitalize() for w in words)

    def _new_path(self) -> tuple[str, str]:
        r = self.r
        lang = r.choices(
            ("py", "ts", "js", "rs", "go", "yaml", "toml", "md", "json", "sql", "sh", "mk", "csv"),
            weights=(30, 10, 4, 10, 5, 5, 3, 6, 5, 2, 2, 1, 2),
        )[0]
        n1, n2 = r.choice(NOUNS), r.choice(NOUNS)
        if lang == "py":
            if r.random() < 0.35:
                return f"tests/test_{self.ident()}.py", lang
            return f"{self.pkg}/{n1}/{self.ident()}.py", lang
        if lang == "ts":
            return r.choice(
                (f"web/src/components/{self.cls()}.tsx", f"web/src/lib/{self.camel()}.ts")
            ), lang
        if lang == "js":
            return f"scripts/{self.kebab()}.js", lang
        if lang == "rs":
            return r.choice((f"crates/{n1}-{n2}/src/{n1}.rs", "src/lib.rs", "src/main.rs")), lang
        if lang == "go":
            return f"internal/{n1}/{n2}.go", lang
        if lang == "yaml":
            return r.choice(
                (".github/workflows/ci.yml", f"deploy/k8s/{n1}.yaml", "docker-compose.yml")
            ), lang
        if lang == "toml":
            return r.choice(("pyproject.toml", "Cargo.toml", f"crates/{n1}/Cargo.toml")), lang
        if lang == "md":
            return r.choice(("README.md", "CHANGELOG.md", f"docs/{n1}.md", "CLAUDE.md")), lang
        if lang == "json":
            return r.choice(
                (
                    "package.json",
                    f"config/{n1}.json",
                    "tokenizer_config.json",
                    ".vscode/settings.json",
                )
            ), lang
        if lang == "sql":
            return f"migrations/{r.randint(1, 120):04d}_{r.choice(VERBS)}_{n1}.sql", lang
        if lang == "sh":
            return f"scripts/{r.choice(VERBS)}-{n1}.sh", lang
        if lang == "csv":
            return f"data/{n1}_{r.choice(('2023', '2024', 'eval', 'raw'))}.csv", lang
        return "Makefile", lang

    def noun(self) -> str:
        return self.r.choice(NOUNS)

    def ident(self) -> str:
        if self.r.random() < 0.8:
            return self.r.choice(self._idents)
        return self._new_ident()

    def cls(self) -> str:
        if self.r.random() < 0.75:
            return self.r.choice(self._classes)
        return self._new_class()

    def camel(self) -> str:
        head, *rest = self.ident().lstrip("_").split("_")
        return head + "".join(p.capitalize() for p in rest)

    def const(self) -> str:
        return self.ident().upper().lstrip("_")

    def kebab(self) -> str:
        return self.ident().strip("_").replace("_", "-")

    def path(self) -> tuple[str, str]:
        return self.r.choice(self.files)

    def abspath(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def hexs(self, n: int) -> str:
        return f"{self.r.getrandbits(4 * n):0{n}x}"

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.r.getrandbits(128), version=4))

    def small(self) -> str:
        return str(self.r.choice((0, 1, 2, 3, 4, 5, 7, 8, 10, 12, 16, 32, 64, 100, 128, 256)))

    def number(self) -> str:
        r = self.r
        k = r.randrange(9)
        if k == 0:
            return f"{r.randrange(1, 10**7):_}"
        if k == 1:
            return f"0x{r.getrandbits(32):08X}"
        if k == 2:
            return str(r.choice((18446744073709551615, 4294967295, 9007199254740993, 65535)))
        if k == 3:
            return f"{r.uniform(-1e6, 1e6):.6f}"
        if k == 4:
            return f"{r.uniform(1, 9):.3f}e-{r.randint(3, 12)}"
        if k == 5:
            return str(-r.randrange(1, 100000))
        return str(r.randrange(10, 1_000_000))

    def flt(self) -> str:
        return f"{self.r.lognormvariate(2, 1.5):.{self.r.randint(1, 4)}f}"

    def date(self) -> str:
        self.clock += self.r.randrange(1, 90_000)
        return datetime.fromtimestamp(self.clock, UTC).strftime("%Y-%m-%d")

    def ts(self) -> str:
        self.clock += self.r.randrange(0, 5)
        us = self.r.randrange(1_000_000)
        return datetime.fromtimestamp(self.clock, UTC).strftime("%Y-%m-%dT%H:%M:%S") + (
            f".{us:06d}Z"
        )

    def emoji(self) -> str:
        return self.r.choice(EMOJI)

    def foreign(self) -> str:
        return self.r.choice(FOREIGN)

    def sentence(self) -> str:
        r = self.r
        s = r.choice(SENTENCES).format(
            noun=r.choice(NOUNS),
            noun2=r.choice(NOUNS),
            adj=r.choice(ADJS),
            verb=r.choice(VERBS),
            n=f"{r.randrange(100, 10**6):,}",
            ident=self.ident(),
            pct=r.randint(60, 99),
        )
        if r.random() < 0.05:
            s = s.replace("'", "\u2019")
        return s

    def comment(self) -> str:
        k = self.r.random()
        if k < 0.2:
            return self.foreign()
        if k < 0.25:
            return f"{self.sentence()} {self.emoji()}"
        return self.sentence()

    def literal(self) -> str:
        """Body of a double-quoted string literal (valid in Python/JS/Rust/Go)."""
        r = self.r
        k = r.randrange(12)
        if k == 0:
            return r.choice(SPECIAL_LOOKALIKES)
        if k == 1:
            return self.foreign()
        if k == 2:
            return f"{self.noun()} {self.emoji()} ready"
        if k == 3:
            return r.choice(("\\t", "\\n", "\\r\\n", "\\x00", "\\u00e9", "\\\\")) + self.noun()
        if k == 4:
            return f"/api/v{r.randint(1, 3)}/{self.kebab()}/{{id}}"
        if k == 5:
            return self.hexs(r.choice((8, 16, 32)))
        if k == 6:
            return f"{self.noun()} missing for %s (code=%d)"
        if k == 7:
            return f"h\u00e9llo w\u00f6rld \u2014 {self.noun()}"
        if k == 8:
            return f"{self.noun()}{r.choice(ODD_SPACES)}{self.noun()}"
        if k == 9:
            return f"it's {r.choice(ADJS)}, don't {r.choice(VERBS)} it"
        return f"{self.noun()}_{self.noun()}"

    def fill(self, tpl: str) -> str:
        vals: dict[str, str] = {}
        kinds = self._kinds

        def sub(m: re.Match[str]) -> str:
            key = m.group(0)
            v = vals.get(key)
            if v is None:
                v = vals[key] = kinds[m.group(1)]()
            return v

        return TEMPLATE_VAR.sub(sub, tpl)

    # ---- whitespace / line-ending roughening --------------------------------------------

    def roughen(self, text: str, p: float = 0.04) -> str:
        """Trailing whitespace on some lines and an occasional run of blank lines."""
        r = self.r
        lines = text.split("\n")
        for i in range(len(lines)):
            if r.random() < p:
                lines[i] += r.choice((" ", "  ", "\t", "    ", " \t"))
            elif r.random() < p / 4:
                lines[i] += "\n" * r.randint(2, 5)
        return "\n".join(lines)
