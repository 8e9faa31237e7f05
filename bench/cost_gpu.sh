#!/bin/bash
# Issue 22's cost benchmark on a GPU machine: untraced, each gpuscope mode and the PyTorch
# profiler, interleaved (each round rotates the order), ROUNDS rounds (default 7), on the
# workloads named (default all: tinyops, cloop, resnet50, gpt2, cupy), by bench/overhead.py.
# From the repository root, carrying .output/static. Results in $OUT: machine.txt,
# overhead.json, cost.txt (the table). Usage: bash bench/cost_gpu.sh [WORKLOADS] [MODES]
# BASE=PATH: another gpuscope build, for modes base:MODE (compared in the same rounds).
set -u
OUT=${OUT:-/tmp/gpuscope-cost}
. bench/gpu_env.sh
w=$(mktemp -d)
nvcc -O2 -arch=sm_90 bench/cloop.cu -o "$w/cloop" >>"$OUT/machine.txt" 2>&1
python3 -c 'import cupy; print("cupy", cupy.__version__)' >>"$OUT/machine.txt" 2>&1
python3 bench/overhead.py --gpuscope "$GS" --out "$OUT" --reps "$ROUNDS" --cloop "$w/cloop" \
	${BASE:+--baseline "$BASE"} \
	--workloads "${1:-tinyops,cloop,resnet50,gpt2,cupy}" \
	--modes "${2:-untraced,uprobe,inject-off,inject-10,inject-all,torch-profiler}" \
	>"$OUT/cost.txt" 2>&1
echo "rc=$?" >>"$OUT/cost.txt"
rm -f "$OUT"/gs-*.json
