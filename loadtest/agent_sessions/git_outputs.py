"""Output of git commands: status, log and unified diffs of the session's files."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from .source_files import SourceFiles
from .vocabulary import FULLNAMES


class GitOutputs(SourceFiles):
    """``git status``, ``git log`` and ``git diff`` output."""

    def git_status(self) -> str:
        r = self.r
        lines = [f"On branch {self.branch}"]
        if r.random() < 0.5:
            lines += [
                f"Your branch is ahead of 'origin/main' by {r.randint(1, 9)} commits.",
                '  (use "git push" to publish your local commits)',
            ]
        lines += [
            "",
            "Changes not staged for commit:",
            '  (use "git add <file>..." to update what will be committed)',
            '  (use "git restore <file>..." to discard changes in working directory)',
        ]
        for _ in range(r.randint(1, 6)):
            lines.append(f"\tmodified:   {self.path()[0]}")
        if r.random() < 0.5:
            lines += [
                "",
                "Untracked files:",
                '  (use "git add <file>..." to include in what will be committed)',
                f"\t{self.path()[0]}",
            ]
        lines += ["", 'no changes added to commit (use "git add" and/or "git commit -a")']
        return "\n".join(lines)

    def git_log(self, size: int) -> str:
        r = self.r
        parts = []
        total = 0
        oneline = r.random() < 0.4
        while total < size:
            h = self.hexs(40)
            msg = f"{r.choice(('fix', 'feat', 'perf', 'refactor', 'test'))}: {self.sentence()}"
            if oneline:
                s = f"{h[:7]} {msg}"
            else:
                self.clock += r.randrange(100, 90_000)
                d = datetime.fromtimestamp(self.clock, UTC)
                s = (
                    f"commit {h}\nAuthor: {r.choice(FULLNAMES)} <{self.user}@example.com>\n"
                    f"Date:   {d.strftime('%a %b %d %H:%M:%S %Y')} +0{r.randint(0, 9)}00\n\n"
                    f"    {msg}\n"
                )
                if r.random() < 0.3:
                    s += f"\n    {self.sentence()}\n\n    Co-Authored-By: {r.choice(FULLNAMES)}\n"
            parts.append(s)
            total += len(s) + 1
        return "\n".join(parts)

    def git_diff(self, size: int) -> str:
        r = self.r
        out: list[str] = []
        total = 0
        while total < size:
            rel, lang = self.path()
            if lang not in ("py", "ts", "js", "rs", "go", "yaml", "toml", "md", "sql"):
                rel, lang = f"{self.pkg}/{self.ident()}.py", "py"
            src = self.source(lang, r.randint(600, 2500)).split("\n")
            hdr = (
                f"diff --git a/{rel} b/{rel}\nindex {self.hexs(7)}..{self.hexs(7)} 100644\n"
                f"--- a/{rel}\n+++ b/{rel}"
            )
            chunk = [hdr]
            pos = 0
            for _ in range(r.randint(1, 3)):
                if pos >= len(src) - 4:
                    break
                a = r.randint(pos, len(src) - 4)
                ctx1 = src[max(0, a - 3) : a]
                old = src[a : a + r.randint(1, 4)]
                new = [self._mutate(x) for x in old]
                if r.random() < 0.4:
                    new += self.source(lang, 120).split("\n")[: r.randint(1, 5)]
                b = a + len(old)
                ctx2 = src[b : b + 3]
                old_start = max(0, a - 3) + 1
                func = f" def {self.ident()}(" if lang == "py" else ""
                chunk.append(
                    f"@@ -{old_start},{len(ctx1) + len(old) + len(ctx2)} "
                    f"+{old_start},{len(ctx1) + len(new) + len(ctx2)} @@{func}"
                )
                chunk += [" " + x for x in ctx1] + ["-" + x for x in old]
                chunk += ["+" + x for x in new] + [" " + x for x in ctx2]
                pos = b + 3
            s = "\n".join(chunk)
            out.append(s)
            total += len(s) + 1
        return "\n".join(out)

    def _mutate(self, line: str) -> str:
        r = self.r
        k = r.random()
        if k < 0.4 and line.strip():
            words = re.findall(r"[A-Za-z_]{4,}", line)
            if words:
                return line.replace(r.choice(words), self.ident(), 1)
        if k < 0.6:
            return re.sub(r"\d+", lambda _m: str(r.randrange(1000)), line, count=1)
        if k < 0.8:
            return line.rstrip() + f"  # {self.comment()}"
        return line
