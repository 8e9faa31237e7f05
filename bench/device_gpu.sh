#!/bin/bash
# bpftime's ABI on a GPU (issue 21): tests/bpf/bpftime_abi.bpf.c (its map types 1501-1527,
# helpers 14, 25, 502-512, kprobe/ and kretprobe/ programs, a host uprobe program) probing
# bpftime's vec_add (bench/bpftime/vec_add.cu, built as bpftime builds it); the output with
# and without the probe, and the maps at the end (probe --json), checked against what the
# launches imply by bench/bpftime/check.py. From the repository root on the GPU machine,
# carrying .output/static and .output/bpftime (bash bench/device_gpu.sh prepare, here).
# Results in $OUT: machine.txt, check.json, probe.txt, abi.json.
set -u
if [ "${1:-}" = prepare ]; then
	mkdir -p .output/bpftime
	exec clang -O2 -g -target bpf -mcpu=v3 -c tests/bpf/bpftime_abi.bpf.c \
		-o .output/bpftime/bpftime_abi.bpf.o
fi
OUT=${OUT:-/tmp/gpuscope-device}
. bench/gpu_env.sh
w=$(mktemp -d)
nvcc -O2 -gencode 'arch=compute_90,code=[sm_90,compute_90]' -cudart shared \
	bench/bpftime/vec_add.cu -o "$w/vec_add" >"$OUT/probe.txt" 2>&1
LAUNCHES=${LAUNCHES:-10} GRID=${GRID:-4} BLOCK=${BLOCK:-256}
"$w/vec_add" "$LAUNCHES" "$GRID" "$BLOCK" >"$w/plain.out" 2>&1
"$GS" probe --threads 65536 --json "$OUT/abi.json" .output/bpftime/bpftime_abi.bpf.o -- \
	"$w/vec_add" "$LAUNCHES" "$GRID" "$BLOCK" >>"$OUT/probe.txt" 2>&1
echo "rc=$?" >>"$OUT/probe.txt"
python3 bench/bpftime/check.py "$OUT/abi.json" "$w/plain.out" "$OUT/probe.txt" \
	"$LAUNCHES" "$GRID" "$BLOCK" >"$OUT/check.json"
