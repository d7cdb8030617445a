"""Per-call cost against transcript size, as an SVG plot (docs/per_call_cost.svg).

    python loadtest/plot_per_call.py [--tokenizer qwen3] [--sizes 10000,100000,1000000,4000000]
                                     [--calls 10] [--out docs/per_call_cost.svg]

For each size, one run of ``bench_tokenize.timed_calls`` (plain appends, ~1.4K-character median;
the last timed call's ids checked against the reference): the median ``SessionTokenizer.encode``
of an append, and the reference's full encode of the same transcript (what a proxy without
session state pays per call); beside them the native encoder's full encode of that transcript
(median of 3).  toktier 0.3.0's session encode is drawn from the figures recorded in
docs/benchmarks.md (dashed, labelled "recorded"), not measured here.  Log-log axes; the SVG is
written by hand (no plotting dependency).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

Series = tuple[str, str, bool, list[tuple[float, float]]]
"""(label, colour, dashed, [(transcript characters, ms per call)])."""

RECORDED_TOKTIER = [(100_000.0, 1.0), (1_000_000.0, 9.9), (4_000_000.0, 38.0)]
"""toktier 0.3.0's session encode per call, Qwen3 (docs/benchmarks.md, commit aaacd89)."""

_W, _H = 720, 460
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 200, 30, 50


def measure(name: str, sizes: Sequence[int], calls: int) -> list[Series]:
    """The three measured series, one run per size."""
    from app.tokenization.native.encoder import NativeEncoder
    from app.tokenization.reference import ReferenceEncoder
    from app.tools import assets
    from loadtest.agent_sessions import MARKUPS, session_calls
    from loadtest.bench_tokenize import _MEAN_APPEND, timed_calls

    path = assets.fetch()[name]
    native = NativeEncoder(ReferenceEncoder.from_file(path))
    session: list[tuple[float, float]] = []
    full: list[tuple[float, float]] = []
    cold: list[tuple[float, float]] = []
    for size in sizes:
        *_, row = timed_calls(name, path, size, calls, edits=False, verify=False)
        if row["divergent"]:
            raise SystemExit(f"ids differ from the reference at {size} characters")
        chars = float(row["chars"])
        session.append((chars, row["median_ms"]))
        full.append((chars, row["full_ms"]))
        stream = session_calls(
            size, MARKUPS[name], target_chars=size * 2 + 10**6, append_chars=_MEAN_APPEND
        )  # the session timed_calls fed, at the size it timed
        text = next(t for t in stream if len(t) >= chars)
        runs = []
        for _ in range(3):
            started = time.perf_counter()
            native.encode(text)
            runs.append((time.perf_counter() - started) * 1e3)
        cold.append((float(len(text)), statistics.median(runs)))
        print(
            f"| {chars:,.0f} | {row['median_ms']:.2f} | {row['full_ms']:.0f} "
            f"| {cold[-1][1]:.1f} |",
            flush=True,
        )
    return [
        ("toksplice session encode (append)", "#1f77b4", False, session),
        ("reference full encode", "#d62728", False, full),
        ("native full encode", "#2ca02c", False, cold),
    ]


def svg(series: Sequence[Series], title: str) -> str:
    """A log-log line plot of ``series`` with decade ticks and a legend."""
    xs = [x for *_, points in series for x, _ in points]
    ys = [y for *_, points in series for _, y in points]
    x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def at(x: float, y: float) -> tuple[float, float]:
        px = _LEFT + (math.log10(x) - x0) / (x1 - x0) * width
        py = _TOP + height - (math.log10(y) - y0) / (y1 - y0) * height
        return px, py

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" font-family="sans-serif" font-size="12">',
        f'<rect width="{_W}" height="{_H}" fill="white"/>',
        f'<text x="{_LEFT}" y="18" font-size="14">{_escape(title)}</text>',
    ]
    for e in range(x0, x1 + 1):
        px, _ = at(10.0**e, 10.0**y0)
        out.append(f'<line x1="{px:.1f}" y1="{_TOP}" x2="{px:.1f}" y2="{_TOP + height}" '
                   'stroke="#ddd"/>')  # fmt: skip
        out.append(f'<text x="{px:.1f}" y="{_TOP + height + 16}" text-anchor="middle">'
                   f"{_decade(e)}</text>")  # fmt: skip
    for e in range(y0, y1 + 1):
        _, py = at(10.0**x0, 10.0**e)
        out.append(f'<line x1="{_LEFT}" y1="{py:.1f}" x2="{_LEFT + width}" y2="{py:.1f}" '
                   'stroke="#ddd"/>')  # fmt: skip
        out.append(f'<text x="{_LEFT - 6}" y="{py + 4:.1f}" text-anchor="end">'
                   f"{_decade(e)}</text>")  # fmt: skip
    out.append(f'<rect x="{_LEFT}" y="{_TOP}" width="{width}" height="{height}" '
               'fill="none" stroke="black"/>')  # fmt: skip
    out.append(f'<text x="{_LEFT + width / 2}" y="{_H - 12}" text-anchor="middle">'
               "transcript characters</text>")  # fmt: skip
    out.append(f'<text transform="translate(16 {_TOP + height / 2}) rotate(-90)" '
               'text-anchor="middle">ms per call</text>')  # fmt: skip
    for k, (label, colour, dashed, points) in enumerate(series):
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in (at(x, y) for x, y in points))
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                   f'stroke-width="2"{dash}/>')  # fmt: skip
        for x, y in points:
            px, py = at(x, y)
            out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"/>')
        ly = _TOP + 14 + 34 * k
        lx = _LEFT + width + 12
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 22}" y2="{ly}" stroke="{colour}" '
                   f'stroke-width="2"{dash}/>')  # fmt: skip
        for i, line in enumerate(_wrapped(label, 24)):
            out.append(f'<text x="{lx + 28}" y="{ly + 4 + 14 * i}">{_escape(line)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _decade(e: int) -> str:
    """10^e as a short label: 0.1, 1, 10, 1K, 1M, ..."""
    if e < 0:
        return f"{10.0**e:g}"
    for power, suffix in ((9, "G"), (6, "M"), (3, "K")):
        if e >= power:
            return f"{10 ** (e - power)}{suffix}"
    return str(10**e)


def _wrapped(label: str, width: int) -> list[str]:
    lines: list[str] = []
    for word in label.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokenizer", default="qwen3")
    parser.add_argument("--sizes", default="10000,100000,1000000,4000000")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "per_call_cost.svg")
    args = parser.parse_args()
    print("| transcript chars | session encode ms | reference full ms | native full ms |")
    print("|---|---|---|---|")
    series = measure(args.tokenizer, [int(s) for s in args.sizes.split(",")], args.calls)
    if args.tokenizer == "qwen3":
        series.append(("toktier 0.3.0 session encode (recorded)", "#ff7f0e", True,
                       RECORDED_TOKTIER))  # fmt: skip
    title = f"Per-call cost of a ~1.4K-character append, {args.tokenizer}"
    args.out.write_text(svg(series, title), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
