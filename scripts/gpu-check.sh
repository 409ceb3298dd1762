#!/usr/bin/env bash
# PPO with vLLM on a GPU, measured: served rollouts, recomputed old log-probs, weight pushes over
# nccl (benchmarks/gpu_ppo.py: tokens generated and trained per second, peak memory, the
# rollout/trainer log-prob gap). On a machine without a CUDA GPU or without vLLM it says so and
# exits 0: nothing is measured, nothing is pretended.
#   bash scripts/gpu-check.sh MODEL_DIR [gpu_ppo.py options, e.g. --iterations 5 --out gpu.json]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu-check: no CUDA device here (torch.cuda.is_available() is False, or torch is missing): nothing measured"
    exit 0
fi
if ! "$PY" -c 'import vllm' 2>/dev/null; then
    echo "gpu-check: vLLM is not installed beside this torch (pip install vllm): nothing measured"
    exit 0
fi
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
    echo "usage: bash scripts/gpu-check.sh MODEL_DIR [options]   (a local Hugging Face causal LM directory)" >&2
    exit 2
fi
model="$1"
shift
exec "$PY" benchmarks/gpu_ppo.py --model "$model" "$@"
