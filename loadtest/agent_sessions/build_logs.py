"""Output of test runners, installers and running programs: logs and stack traces."""

from __future__ import annotations

import json

from .atoms import ContentAtoms

_BAR = "\u2501" * 40


def _center(title: str, ch: str = "=", width: int = 80) -> str:
    return f" {title} ".center(width, ch)


class BuildLogs(ContentAtoms):
    """pytest/cargo/jest/pip output, application logs and tracebacks."""

    def pytest_log(self, size: int) -> str:
        r = self.r
        color = r.random() < 0.15
        n_files = max(1, size // 900)
        collected = r.randint(20, 60) * n_files
        lines = [
            _center("test session starts"),
            f"platform linux -- Python 3.11.{r.randint(4, 11)}, pytest-8.{r.randint(0, 3)}."
            f"{r.randint(0, 5)}, pluggy-1.5.0",
            f"rootdir: {self.root}",
            "configfile: pyproject.toml",
            f"plugins: hypothesis-6.{r.randint(90, 130)}.{r.randint(0, 9)}, anyio-4.4.0",
            f"collected {collected} items",
            "",
        ]
        done = 0
        failures: list[str] = []
        per = collected // n_files
        for _ in range(n_files):
            name = f"tests/test_{self.ident()}.py"
            marks = "".join(
                r.choices((".", "F", "s", "x", "E"), weights=(90, 3, 3, 2, 1))[0]
                for _ in range(per)
            )
            done += per
            pct = min(100, done * 100 // collected)
            lines.append(f"{name} {marks}".ljust(73) + f" [{pct:3d}%]")
            failures += [name] * marks.count("F")
        n_fail = len(failures)
        if n_fail:
            lines += ["", _center("FAILURES")]
            for name in failures[:6]:
                t = f"test_{self.ident()}"
                a, b = r.randint(0, 99), r.randint(0, 99)
                lines += [
                    _center(f"{t}[{self.noun()}-{r.randint(0, 9)}]", "_"),
                    "",
                    f"    def {t}({self.noun()}: {self.cls()}) -> None:",
                    f'        out = {self.ident()}({self.noun()}, "{self.literal()}")',
                    f">       assert len(out) == {b}",
                    f"E       AssertionError: assert {a} == {b}",
                    f"E        +  where {a} = len([{r.randint(0, 151_000)}, "
                    f"{r.randint(0, 151_000)}, ...])",
                    "",
                    f"{name}:{r.randint(10, 900)}: AssertionError",
                    _center("Captured stdout call", "-"),
                    f"{self.ts()} DEBUG {self.sentence()}",
                ]
            lines += ["", _center("short test summary info")]
            lines += [f"FAILED {n}::test_{self.ident()} - AssertionError" for n in failures[:10]]
        summary = f"{collected - n_fail} passed"
        if n_fail:
            summary = f"{n_fail} failed, " + summary
        summary += f", {r.randint(0, 5)} skipped in {r.uniform(0.5, 90):.2f}s"
        if color:
            summary = ("\x1b[31m" if n_fail else "\x1b[32m") + summary + "\x1b[0m"
        lines.append(_center(summary))
        return "\n".join(lines)

    def cargo_log(self, size: int) -> str:
        r = self.r
        crate = self.project.replace("_", "-")
        lines = [
            f"   Compiling {self.kebab()} v0.{r.randint(1, 9)}.{r.randint(0, 20)}",
            f"   Compiling {crate} v0.1.0 ({self.root})",
        ]
        if r.random() < 0.3:
            v = self.ident()
            lines += [
                f"warning: unused variable: `{v}`",
                f"  --> src/{self.noun()}.rs:{r.randint(5, 400)}:{r.randint(5, 30)}",
                "   |",
                f"{r.randint(5, 400):>3} |     let {v} = {self.ident()}(&input)?;",
                f"    |         {'^' * len(v)} help: if this is intentional, prefix it with an "
                f"underscore: `_{v}`",
                "   |",
                "   = note: `#[warn(unused_variables)]` on by default",
                "",
            ]
        lines += [
            f"    Finished `test` profile [unoptimized + debuginfo] target(s) in "
            f"{r.uniform(0.5, 60):.2f}s",
            f"     Running unittests src/lib.rs (target/debug/deps/{crate}-{self.hexs(16)})",
            "",
        ]
        n = max(3, size // 60)
        lines.append(f"running {n} tests")
        failed: list[str] = []
        for _ in range(n):
            t = f"{self.noun()}::tests::{self.ident()}"
            ok = r.random() > 0.04
            lines.append(f"test {t} ... {'ok' if ok else 'FAILED'}")
            if not ok:
                failed.append(t)
        if failed:
            lines += ["", "failures:", ""]
            for t in failed[:4]:
                lines += [
                    f"---- {t} stdout ----",
                    f"thread '{t}' panicked at src/{self.noun()}.rs:{r.randint(5, 500)}:"
                    f"{r.randint(1, 40)}:",
                    "assertion `left == right` failed",
                    f"  left: [{r.randint(0, 99999)}, {r.randint(0, 99999)}]",
                    f" right: [{r.randint(0, 99999)}]",
                    "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
                    "",
                ]
        res = "FAILED" if failed else "ok"
        lines += [
            "",
            f"test result: {res}. {n - len(failed)} passed; {len(failed)} failed; 0 ignored; "
            f"0 measured; 0 filtered out; finished in {r.uniform(0, 5):.2f}s",
        ]
        return "\n".join(lines)

    def jest_log(self, size: int) -> str:
        r = self.r
        lines: list[str] = []
        total_tests = 0
        failed = 0
        while len(lines) * 60 < size:
            f = f"src/{self.noun()}/{self.cls()}.test.tsx"
            ok = r.random() > 0.15
            lines.append(f"{' PASS ' if ok else ' FAIL '} {f} ({r.uniform(0.2, 9):.3f} s)")
            total_tests += r.randint(2, 20)
            if not ok:
                failed += 1
                ln = r.randint(10, 200)
                lines += [
                    f"  \u25cf {self.cls()} \u203a renders {self.noun()} when {self.literal()}",
                    "",
                    "    expect(received).toBe(expected) // Object.is equality",
                    "",
                    f"    Expected: {r.randint(0, 9)}",
                    f"    Received: {r.randint(0, 9)}",
                    "",
                    f'      {ln - 1} |   it("renders", async () => {{',
                    f"    > {ln} |     expect(count).toBe(3);",
                    f"      {' ' * len(str(ln))} |                   ^",
                    f"      {ln + 1} |   }});",
                    "",
                    f"      at Object.<anonymous> ({f}:{ln}:19)",
                    "",
                ]
        lines += [
            f"Test Suites: {failed} failed, {r.randint(5, 40)} passed",
            f"Tests:       {failed} failed, {total_tests} passed, {total_tests + failed} total",
            "Snapshots:   0 total",
            f"Time:        {r.uniform(1, 30):.3f} s",
            "Ran all test suites.",
        ]
        return "\n".join(lines)

    def traceback(self) -> str:
        r = self.r
        k = r.random()
        if k < 0.55:
            lines = ["Traceback (most recent call last):"]
            for _ in range(r.randint(2, 7)):
                rel = f"{self.pkg}/{self.noun()}/{self.ident()}.py"
                call = f"{self.ident()}({self.noun()}, offset={self.noun()}_offset)"
                lines += [
                    f'  File "{self.abspath(rel)}", line {r.randint(1, 2000)}, in {self.ident()}',
                    f"    result = self.{call}",
                    "             " + "^" * (len(call) + 5),
                ]
            exc = r.choice(
                (
                    "IndexError",
                    "KeyError",
                    "ValueError",
                    "UnicodeDecodeError",
                    "AssertionError",
                    "RuntimeError",
                    "TypeError",
                )
            )
            if exc == "UnicodeDecodeError":
                msg = (
                    "'utf-8' codec can't decode byte 0xe2 in position "
                    f"{r.randint(0, 9999)}: unexpected end of data"
                )
            else:
                msg = f"{self.noun()} {r.randint(0, 99999)} out of range ({self.literal()})"
            lines.append(f"{exc}: {msg}")
            return "\n".join(lines)
        if k < 0.75:
            lines = [f"TypeError: Cannot read properties of undefined (reading '{self.camel()}')"]
            for _ in range(r.randint(3, 8)):
                lines.append(
                    f"    at {self.cls()}.{self.camel()} (file://{self.root}/web/src/"
                    f"{self.noun()}.ts:{r.randint(1, 400)}:{r.randint(1, 80)})"
                )
            lines.append(
                "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)"
            )
            return "\n".join(lines)
        if k < 0.9:
            lines = [
                f"thread 'main' panicked at src/{self.noun()}.rs:{r.randint(1, 900)}:"
                f"{r.randint(1, 60)}:",
                "called `Option::unwrap()` on a `None` value",
                "stack backtrace:",
            ]
            rc = self.hexs(40)
            for i in range(r.randint(3, 9)):
                lines += [
                    f"  {i:>2}: {self.pkg}::{self.noun()}::{self.ident()}",
                    f"             at /rustc/{rc}/library/core/src/{self.noun()}.rs:"
                    f"{r.randint(1, 3000)}:{r.randint(1, 60)}",
                ]
            return "\n".join(lines)
        lines = [f'Exception in thread "main" java.lang.IllegalStateException: {self.sentence()}']
        for _ in range(r.randint(3, 10)):
            c = self.cls()
            lines.append(
                f"\tat com.example.{self.noun()}.{c}.{self.camel()}({c}.java:{r.randint(1, 999)})"
            )
        lines.append(f"\t... {r.randint(3, 40)} more")
        return "\n".join(lines)

    def log_lines(self, size: int) -> str:
        r = self.r
        lines = []
        total = 0
        as_json = r.random() < 0.35
        while total < size:
            lvl = r.choices(("INFO", "DEBUG", "WARN", "ERROR"), weights=(60, 25, 10, 5))[0]
            if as_json:
                obj = {
                    "ts": self.ts(),
                    "level": lvl.lower(),
                    "msg": self.sentence(),
                    "request_id": self.uuid(),
                    "latency_ms": round(r.lognormvariate(2, 1), 3),
                    "tokens": r.randrange(1, 200_000),
                    "session": self.hexs(16),
                }
                s = json.dumps(obj, ensure_ascii=r.random() < 0.5)
            else:
                s = (
                    f"{self.ts()} {lvl:<5} [{self.noun()}] request_id={self.uuid()} "
                    f"latency_ms={r.lognormvariate(2, 1):.3f} bytes={r.randrange(10**8)} "
                    f"sha256={self.hexs(64)} client=10.{r.randint(0, 255)}."
                    f"{r.randint(0, 255)}.{r.randint(1, 254)}"
                )
                if lvl == "ERROR" and r.random() < 0.5:
                    s += "\n" + self.traceback()
            lines.append(s)
            total += len(s) + 1
        return "\n".join(lines)

    def pip_log(self, size: int) -> str:
        r = self.r
        lines: list[str] = []
        while len(lines) * 110 < size:
            pkg = r.choice(
                (
                    "numpy",
                    "tokenizers",
                    "httpx",
                    "pydantic",
                    "torch",
                    "uvloop",
                    "orjson",
                    "safetensors",
                    "regex",
                )
            )
            ver = f"{r.randint(0, 3)}.{r.randint(0, 30)}.{r.randint(0, 9)}"
            mb = r.uniform(0.1, 900)
            lines += [
                f"Collecting {pkg}>={ver}",
                f"  Downloading {pkg}-{ver}-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_"
                f"x86_64.whl.metadata ({r.randint(1, 90)} kB)",
                f"     {_BAR} {mb:.1f}/{mb:.1f} MB {r.uniform(1, 90):.1f} MB/s eta 0:00:00",
            ]
            if r.random() < 0.2:
                lines.append("\r".join(f"Progress {p}%" for p in range(0, 101, 25)))
        lines.append(f"Successfully installed {' '.join(f'{self.noun()}-1.{i}' for i in range(4))}")
        return "\n".join(lines)
