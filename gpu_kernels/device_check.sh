#!/usr/bin/env bash
# Every GPU test and the device benchmark, for a session that has a GPU (well under 5 minutes).
#   gpu_kernels/device_check.sh            (PYTHON=... to pick the interpreter)
# Needs CuPy (pip install -e '.[gpu]') and the tokenizer assets (TOKSPLICE_ASSETS_DIR or
# .assets, e.g. carried to the device machine: it has no network to fetch them).
# Today only the piece-start predicate runs on the device; the BPE kernels are missing, so the
# table holds stage figures, not end-to-end ids per second.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
"$PY" -c "import sys, gpu_kernels as g; r = g.unavailable_reason(); print('GPU path:', r or 'ok'); sys.exit(bool(r))"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -m pytest -q -rs -p no:cacheprovider -m gpu tests/gpu_kernels
"$PY" loadtest/bench_gpu_predicate.py --chars 1000000,4000000
