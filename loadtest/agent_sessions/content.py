"""The content generator: every piece of text of one agent session."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .markup import Markup
from .rendering import format_call
from .shell_outputs import ShellOutputs
from .templates import PY_BLOCKS, TOOL_SCHEMAS
from .vocabulary import SPECIAL_LOOKALIKES, VERBS


def _gerund(verb: str) -> str:
    if verb in ("get", "set", "split", "emit", "commit", "scan"):
        return verb + verb[-1] + "ing"
    if verb.endswith("e") and not verb.endswith("ee"):
        return verb[:-1] + "ing"
    return verb + "ing"


class Content(ShellOutputs):
    """Draws every piece of text for one session from a single seeded Random."""

    # ---- conversation pieces -----------------------------------------------------------

    def user_request(self) -> str:
        r = self.r
        rel = self.path()[0]
        ident = self.ident()
        templates = (
            f"Can you fix the failing test in {rel}? I don't think the {ident} change is right.",
            f"the {self.noun()} cache is returning stale results after a restart. pls look",
            f"WE'VE got a regression in `{ident}` since yesterday's merge, can you bisect it?",
            f"Add a --{self.kebab()} flag to the CLI and wire it through to {self.cls()}.",
            f"I'LL need a benchmark for {ident} before we merge this. Something like p50/p99 "
            f"over {r.randint(1, 50)}k calls.",
            f"Why does `{ident}` take {r.randint(2, 90)}s on a {r.randint(1, 8)}MB input? It "
            "shouldn't be quadratic.",
            f"Refactor {rel} so the {self.noun()} logic isn't duplicated. Keep the public API "
            "as-is, we've got callers outside this repo.",
            f"ok that works. now run the whole suite and commit if it's green {self.emoji()}",
            f"hmm no, that's wrong — the {self.noun()} must stay byte-identical. revert and try "
            "again",
            f"Write tests for the edge cases: empty input, CRLF, tabs, and '{self.literal()}'.",
            f"{self.foreign()} {self.foreign()}",
            f"The model keeps printing `{r.choice(SPECIAL_LOOKALIKES)}` literally in its "
            f"output. Is our template escaping wrong? Here's the string: "
            f'`s = "{r.choice(SPECIAL_LOOKALIKES)}"`',
            f"can u explain what {ident} does?? i didn't write it and the docstring's useless",
            "continue",
            f"Update the README table with the new numbers and don't forget the CHANGELOG "
            f"entry for {r.randint(0, 3)}.{r.randint(0, 40)}.{r.randint(0, 9)}.",
        )
        msg = r.choice(templates)
        if r.random() < 0.05:
            msg = msg.replace("'", "\u2019")
        return msg

    def user_message(self, budget: int, first: bool = False) -> str:
        r = self.r
        parts: list[str] = []
        if first or r.random() < 0.15:
            parts.append(
                "<system-reminder>\nAs you answer the user's questions, you can use the "
                "following context:\n# claudeMd\nContents of "
                f"{self.root}/CLAUDE.md (project instructions, checked into the codebase):\n\n"
                f"- Run `make test` before committing; don't push to main.\n"
                f"- Python 3.11, ruff + mypy --strict. Line length 100.\n"
                f"- {self.sentence()}\n\nIMPORTANT: this context may or may not be relevant "
                "to your tasks.\n</system-reminder>"
            )
        k = r.random()
        if not first and k < 0.02:
            return "[Request interrupted by user for tool use]"
        if not first and k < 0.05:
            cmd = r.choice(("review", "init", "compact", "cost"))
            parts.append(
                f"<command-message>{cmd} is running\u2026</command-message>\n"
                f"<command-name>/{cmd}</command-name>"
            )
        parts.append(self.user_request())
        used = sum(len(x) for x in parts)
        rest = budget - used
        if rest > 400 and r.random() < 0.6:
            paste = r.choice(
                (
                    self.traceback,
                    lambda: self.log_lines(min(rest, 6000)),
                    lambda: self.source(self.path()[1], rest),
                )
            )()
            if r.random() < 0.3:
                paste = paste.replace("\n", "\r\n")
            parts.append("```\n" + paste + "\n```")
        if r.random() < 0.1:
            parts.append(self.emoji() + " thx")
        return "\n\n".join(parts)

    def reasoning(self, cap: int) -> str:
        r = self.r
        target = min(int(r.lognormvariate(5.8, 0.7)), max(60, cap))
        rel = self.path()[0]
        opener = r.choice(
            (
                f"The user wants me to look at {rel}.",
                "Okay, so the test output shows what's failing.",
                "Let me think about what's happening here.",
                f"Hmm, `{self.ident()}` returns the wrong {self.noun()} when the input is empty.",
                f"I need to check how {self.cls()} handles the {self.noun()} boundary first.",
            )
        )
        parts = [opener]
        total = len(opener)
        while total < target:
            k = r.random()
            if k < 0.5:
                s = self.sentence()
            elif k < 0.65:
                s = (
                    f"Wait, actually {self.ident()} is called from {self.path()[0]}:"
                    f"{r.randint(1, 900)}, so changing it won't be enough."
                )
            elif k < 0.75:
                s = (
                    "\n\nPlan:\n"
                    + "\n".join(
                        f"{i}. {r.choice(VERBS).capitalize()} `{self.ident()}`"
                        for i in range(1, r.randint(3, 6))
                    )
                    + "\n\n"
                )
            elif k < 0.85:
                s = f"`{self.fill('«id1»(«w1», «x1») -> «C1»')}` should give {self.number()}."
            elif k < 0.9:
                s = self.foreign()
            else:
                s = "\n\n"
            parts.append(s)
            total += len(s) + 1
        return " ".join(parts)

    def pre_tool_prose(self) -> str:
        r = self.r
        if r.random() < 0.3:
            return ""
        return r.choice(
            (
                f"I'll start by reading `{self.path()[0]}` to see how `{self.ident()}` works.",
                "Let me run the test suite to see what's failing.",
                f"Now let me check the {self.noun()} implementation.",
                f"The test's failing because `{self.ident()}` doesn't handle an empty "
                f"{self.noun()}. Let me fix that.",
                "Good, that's passing now. Let me also check the callers.",
                f"I'll search for every use of `{self.ident()}` first.",
                "Let me update the todo list.",
                f"That didn't work: the {self.noun()} is still stale. Let me look at the cache "
                "invalidation.",
                f"{self.foreign()}",
            )
        )

    def final_answer(self, budget: int) -> str:
        r = self.r
        target = max(40, min(budget, int(r.lognormvariate(6.2, 0.8))))
        parts = [
            r.choice(
                (
                    "Done.",
                    "All tests pass now.",
                    f"Fixed the {self.noun()} bug.",
                    "Here's what I found:",
                    "I couldn't reproduce the failure locally, but:",
                    f"{self.foreign()}",
                )
            )
        ]
        total = len(parts[0])
        while total < target:
            k = r.random()
            if k < 0.35:
                s = "\n".join(
                    f"- `{self.path()[0]}`: {self.sentence()}" for _ in range(r.randint(1, 4))
                )
            elif k < 0.5:
                s = (
                    f"| Case | Before | After |\n|---|---:|---:|\n"
                    f"| {self.noun()} | {self.flt()} ms | {self.flt()} ms |\n"
                    f"| {self.noun()} | {self.flt()} ms | {self.flt()} ms |"
                )
            elif k < 0.65:
                s = "```python\n" + self.fill(r.choice(PY_BLOCKS)).rstrip() + "\n```"
            elif k < 0.75:
                s = f"## {r.choice(('Summary', 'Root cause', 'Next steps', 'Changes'))}"
            else:
                s = self.sentence() + " " + self.sentence()
            parts.append(s)
            total += len(s) + 2
        if r.random() < 0.3:
            parts.append("Let me know if you'd like me to commit this or open a PR.")
        return "\n\n".join(parts)

    def tool_call(self, payload: int) -> tuple[str, dict[str, Any], str]:
        """(tool name, arguments, result text) for a payload of roughly ``payload`` chars."""
        r = self.r
        if payload < 300:
            name = r.choices(
                ("Edit", "Bash", "Glob", "TodoWrite", "Read", "Write"),
                weights=(25, 30, 15, 15, 10, 5),
            )[0]
        elif payload < 3000:
            name = r.choices(
                ("Read", "Bash", "Grep", "Edit", "WebFetch"), weights=(35, 35, 15, 10, 5)
            )[0]
        else:
            name = r.choices(
                ("Read", "Bash", "WebFetch", "Write", "Grep", "Task"),
                weights=(35, 35, 10, 10, 5, 5),
            )[0]
        rel, lang = self.path()
        ap = self.abspath(rel)
        if name == "Bash":
            cmd, desc, out = self.bash(payload)
            args: dict[str, Any] = {"command": cmd, "description": desc}
            if r.random() < 0.1:
                args["timeout"] = r.choice((120000, 300000, 600000))
            return name, args, out
        if name == "Read":
            args = {"file_path": ap}
            if r.random() < 0.15:
                args |= {"offset": r.randint(1, 900), "limit": r.choice((50, 100, 200, 400))}
            return name, args, self.read_output(rel, lang, payload)
        if name == "Edit":
            old = self.source(lang, r.randint(20, 200)).split("\n")
            old_s = "\n".join(old[: r.randint(1, 6)])
            new_s = "\n".join(self._mutate(x) for x in old_s.split("\n"))
            args = {"file_path": ap, "old_string": old_s, "new_string": new_s}
            if r.random() < 0.1:
                args["replace_all"] = True
            snippet = self.numbered(self.source(lang, max(60, payload - 150)), r.randint(1, 400))
            return (
                name,
                args,
                (
                    f"The file {ap} has been updated. Here's the result of running `cat -n` on a "
                    f"snippet of the edited file:\n{snippet}"
                ),
            )
        if name == "Write":
            content = self.source(lang, max(40, payload - 60))
            args = {"file_path": ap, "content": content}
            return name, args, f"File created successfully at: {ap}"
        if name == "Glob":
            pat = r.choice(("**/*.py", "**/*.{ts,tsx}", "src/**/*.rs", "**/test_*.py", "*.md"))
            n = r.randint(0, 6)
            out = "\n".join(self.abspath(self.path()[0]) for _ in range(n)) or "No files found"
            return name, {"pattern": pat}, out
        if name == "TodoWrite":
            todos = [
                {
                    "content": f"{v.capitalize()} {self.ident()}",
                    "status": r.choice(("pending", "in_progress", "completed")),
                    "activeForm": f"{_gerund(v).capitalize()} {self.ident()}",
                }
                for v in (r.choice(VERBS) for _ in range(r.randint(2, 6)))
            ]
            return (
                name,
                {"todos": todos},
                (
                    "Todos have been modified successfully. Ensure that you continue to use the "
                    "todo list to track your progress. Please proceed with the current tasks if "
                    "applicable"
                ),
            )
        if name == "Grep":
            args = {
                "pattern": f"{self.ident()}\\(|{self.cls()}\\b",
                "path": self.root,
                "output_mode": "content",
                "-n": True,
            }
            if r.random() < 0.5:
                args["glob"] = r.choice(("*.py", "*.{ts,tsx}", "*.rs"))
            return name, args, self.grep_output(payload)
        if name == "WebFetch":
            host = r.choice(
                ("docs.example.com", "github.com", "qiita.com", "habr.com", "zhuanlan.zhihu.com")
            )
            url = (
                f"https://{host}"
                f"/{self.kebab()}/{r.randint(1000, 99999)}?utm_source=agent&lang=ja#"
                f"{self.noun()}"
            )
            return (
                name,
                {"url": url, "prompt": f"Summarise what it says about {self.noun()}"},
                self.web_page(payload),
            )
        # Task (sub-agent report)
        report = self.final_answer(payload) + "\n\n" + self.grep_output(max(0, payload // 3))
        return (
            name,
            {
                "description": f"Investigate {self.noun()} {self.noun()}",
                "prompt": (
                    f"Find every place where {self.ident()} is called and report how the "
                    f"{self.noun()} is computed. {self.sentence()}"
                ),
                "subagent_type": "general-purpose",
            },
            report,
        )

    # ---- system prompt -----------------------------------------------------------------

    def system_prompt(self, m: Markup) -> str:
        """The agent's instructions followed by its tool schemas, listed as text."""
        r = self.r
        keep = [s for s in TOOL_SCHEMAS if r.random() < 0.9 or '"Bash"' in s[:60]]
        example = format_call(m, "example_function", {"param": "value"})
        return (
            self.agent_instructions()
            + "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            "<tools>\n" + "\n".join(keep) + "\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments "
            f"in this format:\n{example}"
        )

    def agent_instructions(self) -> str:
        """The system prompt without tools: role, rules, environment and git state."""
        r = self.r
        date = datetime.fromtimestamp(self.clock, UTC).strftime("%Y-%m-%d")
        model = r.choice(("Qwen3-32B", "Llama-3.3-70B", "DeepSeek-V3", "gpt-oss-120b"))
        return (
            "You are an interactive command-line coding agent. Use the instructions below and "
            "the tools available to you to help the user with software engineering tasks.\n\n"
            "IMPORTANT: Assist with defensive security tasks only. Refuse to create or improve "
            "code that may be used maliciously.\nIMPORTANT: Never guess URLs unless you're "
            "confident they help the user with programming.\n\n"
            "# Tone and style\n"
            "Be concise, direct and to the point. Your output is shown in a terminal and "
            "rendered as GitHub-flavoured Markdown in a monospace font. Don't add preamble "
            "like \"Here's what I'll do\" or postamble summaries unless asked. Answer in fewer "
            "than 4 lines when you can; one-word answers are best.\n"
            "<example>\nuser: 2 + 2\nassistant: 4\n</example>\n\n"
            "# Doing tasks\n"
            "- Use the TodoWrite tool to plan multi-step work.\n"
            "- Search the codebase before changing it; read files before editing them.\n"
            "- Follow the existing conventions: mimic code style, use existing libraries and "
            "utilities, and never assume a library is available.\n"
            "- After a change, run the project's lint and type-check commands (e.g. `ruff "
            "check`, `mypy`, `npm run lint`) if you know them.\n"
            "- NEVER commit unless the user explicitly asks you to.\n\n"
            "# Tool usage policy\n"
            "- When several independent pieces of information are needed, batch the tool "
            "calls in a single response.\n"
            "- Prefer the Task tool for open-ended searches to reduce context usage.\n\n"
            "Here is useful information about the environment you are running in:\n<env>\n"
            f"Working directory: {self.root}\nIs directory a git repo: Yes\n"
            f"Platform: linux\nOS Version: Linux 6.8.0-{r.randint(30, 60)}-generic\n"
            f"Today's date: {date}\n</env>\n"
            f"You are powered by the model named {model}.\n\n"
            f"gitStatus: This is the git status at the start of the conversation.\n"
            f"Current branch: {self.branch}\n\nMain branch (you will usually use this for PRs):"
            f" main\n\nStatus:\n{self.git_status()}\n\nRecent commits:\n"
            f"{self.git_log(400)}\n\n"
        )
