#!/usr/bin/env bash
# Every GPU test and the device benchmark, for a session that has a GPU (well under 5 minutes).
#   gpu_kernels/device_check.sh            (PYTHON=... to pick the interpreter)
# Needs CuPy (pip install -e '.[gpu]') and the tokenizer assets (TOKSPLICE_ASSETS_DIR or
# .assets, e.g. carried to the device machine: it has no network to fetch them).
# On the device today: the cl100k-family predicate and the thread-per-piece BPE; the rest of
# device_encoder runs on the host (README, "GPU cold starts"). Nothing here has run on a GPU yet.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
"$PY" -c "import sys, gpu_kernels as g; r = g.unavailable_reason(); print('GPU path:', r or 'ok'); sys.exit(bool(r))"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -m pytest -q -rs -p no:cacheprovider -m gpu tests/gpu_kernels
"$PY" loadtest/bench_gpu.py --chars 1000000,4000000 --tokenizer llama3
"$PY" loadtest/bench_gpu.py --chars 4000000 --tokenizer qwen3
