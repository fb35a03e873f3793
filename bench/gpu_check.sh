#!/usr/bin/env bash
# The one check to run where a GPU is lent (see bench/gpu_check.py): build, trace, generate,
# train and the head map on CUDA in float32 and bfloat16, each against the CPU.
# The device's image has torch, numpy, tiktoken and safetensors; the core needs no more.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
PYTHONUNBUFFERED=1 python3 bench/gpu_check.py "$@"
# The rates of the placement policy's GPU row (explorer/runtime/placement.py), measured.
PYTHONUNBUFFERED=1 python3 bench/placement_rates.py --device cuda
