"""Output of shell commands, and the Bash tool call that picks one by output size."""

from __future__ import annotations

import base64
import json

from .build_logs import BuildLogs
from .git_outputs import GitOutputs
from .templates import PY_BLOCKS
from .vocabulary import MONTHS


class ShellOutputs(GitOutputs, BuildLogs):
    """Listings, searches, tables, fetched pages, blobs, and ``bash`` to choose among all."""

    def ls_la(self, size: int) -> str:
        r = self.r
        lines = [f"total {r.randint(8, 4000)}"]
        names = [".", "..", ".git", ".gitignore", ".env.example", "README.md", "pyproject.toml"]
        month = r.choice(MONTHS)
        while len(lines) * 62 < size:
            if len(names) <= len(lines) - 1:
                k = r.random()
                if k < 0.05:
                    names.append(
                        r.choice(
                            ("résumé.pdf", "データ.csv", "отчёт.txt", "my file (1).txt", "ملف.json")
                        )
                    )
                else:
                    rel, _ = self.path()
                    names.append(rel.rsplit("/", 1)[-1])
            name = names[len(lines) - 1]
            is_dir = name in (".", "..", ".git") or "." not in name
            perm = "drwxr-xr-x" if is_dir else r.choice(("-rw-r--r--", "-rwxr-xr-x", "-rw-------"))
            sz = 4096 if is_dir else r.choice((r.randrange(0, 999), r.randrange(1000, 10**7)))
            lines.append(
                f"{perm} {r.randint(1, 12):>3} {self.user:<8} {self.user:<8} {sz:>8} "
                f"{month} {r.randint(1, 28):>2} {r.randint(0, 23):02d}:{r.randint(0, 59):02d} "
                f"{name}"
            )
        return "\n".join(lines)

    def base64_blob(self, size: int) -> str:
        r = self.r
        raw = r.randbytes(max(3, size * 3 // 4))
        enc = base64.b64encode(raw).decode("ascii")
        k = r.random()
        if k < 0.35:
            return "\n".join(enc[i : i + 76] for i in range(0, len(enc), 76))
        if k < 0.6:
            body = "\n".join(enc[i : i + 64] for i in range(0, len(enc), 64))
            return f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----"
        if k < 0.8:
            return f"data:image/png;base64,{enc}"
        head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
        body = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        return f"{head}.{body}.{base64.urlsafe_b64encode(r.randbytes(32)).decode().rstrip('=')}"

    def table_output(self) -> str:
        r = self.r
        k = r.random()
        if k < 0.4:
            rows = [f"{'NAME':<36}{'READY':<8}{'STATUS':<20}{'RESTARTS':<10}AGE"]
            for _ in range(r.randint(3, 12)):
                rows.append(
                    f"{self.kebab() + '-' + self.hexs(10)[:10]:<36}"
                    f"{r.randint(0, 1)}/1     "
                    f"{r.choice(('Running', 'CrashLoopBackOff', 'Pending')):<20}"
                    f"{r.randint(0, 40):<10}{r.randint(1, 90)}m"
                )
            return "\n".join(rows)
        if k < 0.7:
            rows = [
                "+-----------------------------------------------------------------------------+",
                f"| NVIDIA-SMI 550.{r.randint(10, 99)}.{r.randint(1, 9):02d}    "
                f"Driver Version: 550.{r.randint(10, 99)}    CUDA Version: 12.4     |",
                "|-------------------------------+----------------------+----------------------+",
                "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |",
                "|===============================+======================+======================|",
            ]
            for g in range(r.randint(1, 8)):
                rows.append(
                    f"|   {g}  NVIDIA H100 80GB    On | 00000000:{r.randint(10, 99)}:00.0 Off |"
                    f"                    0 |"
                )
                rows.append(
                    f"| N/A   {r.randint(30, 80)}C    P0   {r.randint(60, 700):>3}W / 700W | "
                    f"{r.randint(0, 81000):>5}MiB / 81559MiB | {r.randint(0, 100):>3}%      "
                    "Default |"
                )
            rows.append(rows[0])
            return "\n".join(rows)
        rows = [f"{self.project}/"]
        for i in range(r.randint(4, 14)):
            last = i == 13
            rows.append(
                ("\u2514\u2500\u2500 " if last else "\u251c\u2500\u2500 ")
                + self.path()[0].split("/")[0]
            )
            if r.random() < 0.5:
                rows.append("\u2502   \u2514\u2500\u2500 " + self.path()[0].rsplit("/", 1)[-1])
        rows.append(f"\n{r.randint(3, 40)} directories, {r.randint(10, 400)} files")
        return "\n".join(rows)

    def web_page(self, size: int) -> str:
        r = self.r
        parts = [f"# {self.foreign()}\n"]
        total = len(parts[0])
        while total < size:
            k = r.random()
            if k < 0.45:
                s = " ".join(self.foreign() for _ in range(r.randint(2, 6)))
            elif k < 0.6:
                s = " ".join(self.sentence() for _ in range(r.randint(2, 5)))
            elif k < 0.75:
                s = "| " + " | ".join(self.foreign()[:8] for _ in range(3)) + " |\n|---|---|---|"
                for _ in range(r.randint(2, 6)):
                    s += f"\n| {self.noun()} | {self.flt()} | {self.emoji()} |"
            elif k < 0.85:
                s = " ".join(self.emoji() for _ in range(r.randint(3, 12)))
            else:
                s = "```python\n" + self.fill(r.choice(PY_BLOCKS)) + "```"
            s += "\n\n"
            if r.random() < 0.1:
                s += "\n\n\n"
            parts.append(s)
            total += len(s)
        return "".join(parts)

    def grep_output(self, size: int) -> str:
        r = self.r
        lines = []
        total = 0
        pat = self.ident()
        while total < size:
            rel, lang = self.path()
            src = [x for x in self.source(lang, 300).split("\n") if x.strip()]
            for x in r.sample(src, min(len(src), r.randint(1, 4))):
                s = f"{rel}:{r.randint(1, 1500)}:{x}"
                lines.append(s)
                total += len(s) + 1
        if r.random() < 0.2:
            lines.append(f"{self.path()[0]}:{r.randint(1, 99)}:    # TODO: rename {pat}")
        return "\n".join(lines)

    def minified_response(self, size: int) -> str:
        r = self.r
        items = []
        total = 0
        while total < size:
            o = self.json_obj(r.randint(1, 3))
            s = json.dumps(o, separators=(",", ":"), ensure_ascii=r.random() < 0.4)
            items.append(o)
            total += len(s) + 1
        return json.dumps(
            {"object": "list", "data": items, "has_more": r.random() < 0.5},
            separators=(",", ":"),
            ensure_ascii=r.random() < 0.4,
        )

    def bash(self, size: int) -> tuple[str, str, str]:
        """(command, description, output) with output of roughly ``size`` characters."""
        r = self.r
        if size < 200:
            j = r.randrange(7)
            if j == 0:
                return (
                    "git status --short",
                    "Show short git status",
                    "\n".join(
                        f"{r.choice((' M', 'M ', '??', 'A ', ' D'))} {self.path()[0]}"
                        for _ in range(r.randint(1, 4))
                    ),
                )
            if j == 1:
                rel = self.path()[0]
                return f"wc -l {rel}", "Count lines", f"{r.randint(1, 4000)} {rel}"
            if j == 2:
                return f"mkdir -p {self.path()[0].rsplit('/', 1)[0]}", "Create directory", ""
            if j == 3:
                msg = self.sentence().replace('"', "")
                return (
                    f'git commit -am "{msg}"',
                    "Commit changes",
                    f"[{self.branch} {self.hexs(7)}] {msg}\n {r.randint(1, 9)} files changed,"
                    f" {r.randint(1, 300)} insertions(+), {r.randint(0, 99)} deletions(-)",
                )
            if j == 4:
                return (
                    f"python -c 'import {self.pkg}; print({self.pkg}.__version__)'",
                    "Print version",
                    f"0.{r.randint(1, 30)}.{r.randint(0, 9)}.dev{r.randint(0, 9)}",
                )
            if j == 5:
                return (
                    "echo $? && which python",
                    "Check exit code",
                    (f"{r.choice((0, 1, 2, 127))}\n/home/{self.user}/.venv/bin/python"),
                )
            return (
                f"ls {self.path()[0].split('/')[0]}",
                "List directory",
                "  ".join(self.path()[0].rsplit("/", 1)[-1] for _ in range(r.randint(2, 8))),
            )
        k = r.random()
        if k < 0.2:
            return (
                f"python -m pytest -q tests/ -x --color={'yes' if r.random() < 0.2 else 'no'}",
                "Run the test suite",
                self.pytest_log(size),
            )
        if k < 0.3:
            return "cargo test --all-features 2>&1", "Run Rust tests", self.cargo_log(size)
        if k < 0.37:
            return "npx jest --ci", "Run JS tests", self.jest_log(size)
        if k < 0.5:
            return (
                "git diff" + r.choice(("", " HEAD~1", " --stat=0 main...")),
                "Show diff",
                self.git_diff(size),
            )
        if k < 0.56:
            return (
                f"git log -n {r.randint(5, 50)}" + r.choice(("", " --oneline")),
                "Show recent commits",
                self.git_log(size),
            )
        if k < 0.62:
            return (
                f"ls -la {r.choice(('', 'src/', self.pkg + '/'))}",
                "List files",
                self.ls_la(size),
            )
        if k < 0.7:
            return (
                f"tail -n {r.randint(50, 2000)} logs/{self.noun()}.log",
                "Show log tail",
                self.log_lines(size),
            )
        if k < 0.75:
            out = self.traceback() + "\n"
            out = self.log_lines(max(0, size - len(out))) + "\n" + out
            return f"python -m {self.pkg}.{self.noun()} --debug", "Run module", out
        if k < 0.8:
            return (
                f'grep -rn "{self.ident()}" {self.pkg}/ tests/',
                "Search code",
                self.grep_output(size),
            )
        if k < 0.84:
            return (
                f"curl -s localhost:8000/v1/{self.noun()}s?limit=100",
                "Query API",
                self.minified_response(size),
            )
        if k < 0.87:
            return (f"base64 < assets/{self.noun()}.png", "Encode asset", self.base64_blob(size))
        if k < 0.9:
            return "pip install -e '.[dev]'", "Install deps", self.pip_log(size)
        if k < 0.93:
            return (
                r.choice(("kubectl get pods -n prod", "nvidia-smi", "tree -L 2")),
                "Inspect environment",
                self.table_output(),
            )
        rel, lang = self.path()
        body = self.source(lang, size)
        if r.random() < 0.4:
            body = body.replace("\n", "\r\n")
        return f"cat {rel}", "Print file", body
