#!/usr/bin/env bash
# Every GPU test and the device benchmark, for a session that has a GPU (well under 5 minutes).
#   gpu_kernels/device_check.sh            (PYTHON=... to pick the interpreter)
# Needs CuPy (pip install -e '.[gpu]') and the tokenizer assets (TOKSPLICE_ASSETS_DIR or
# .assets, e.g. carried to the device machine: it has no network to fetch them).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
"$PY" -c "import sys, gpu_kernels as g; r = g.unavailable_reason(); print('GPU path:', r or 'ok'); sys.exit(bool(r))" || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -m pytest -q -rs -p no:cacheprovider -n 0 -m gpu tests/gpu_kernels
tests=$?
"$PY" loadtest/bench_gpu.py --chars 1000000,4000000 --tokenizers llama3,qwen3,gpt2,o200k,deepseek_v3
bench=$?
# Where the 4M llama3 encode's time goes (kernels vs CuPy's array operations, copies, host).
"$PY" loadtest/bench_gpu.py --chars 4000000 --tokenizers llama3 --repeat 1 --profile
exit $(( tests || bench || $? ))
