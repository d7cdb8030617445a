#!/usr/bin/env bash
set -euo pipefail
IFS=$'\n\t'

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${«K1»:=«x1»}"

for f in "$ROOT"/data/*.jsonl; do
  [[ -s "$f" ]] || continue
  echo ">> $(basename "$f"): $(wc -l < "$f") lines"
done

