#!/bin/bash
# The GPU suite, on a GPU machine, from the repository root, with the static gpuscope
# built here (make static) carried in .output/static. Results go to $OUT (default
# /tmp/gpuscope-gpu): gpu/gpu-results.json (kernel probes) and gpu-inject/gpu-results.json
# (the in-process plane, with GPU times against CUPTI), reports and logs of every run.
set -u
OUT=${OUT:-/tmp/gpuscope-gpu}
GS=${GPUSCOPE:-.output/static/gpuscope}
mkdir -p "$OUT/gpu"
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
{
	date -u +%Y-%m-%dT%H:%MZ
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	uname -r
	python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
	nvcc --version | tail -1
	ldd --version | head -1
	"$GS" --version
} | tee "$OUT/machine.txt"
python3 tests/gpu/check.py --gpuscope "$GS" --out "$OUT/gpu"
rc=$?
python3 tests/gpu/check.py --gpuscope "$GS" --plane inject --out "$OUT/gpu-inject" || rc=1
exit $rc
