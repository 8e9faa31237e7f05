#!/bin/sh
# The device code programs load, read in-process (run --inject --device-code), on a GPU
# machine: vector_add built with PTX only and with SASS only (nvcc there), PyTorch's matmul
# loop (stock PyTorch: SASS only), and a Triton kernel (a cubin through cuModuleLoadData).
# Writes each run's JSON report and text to $OUT.
#
#   OUT=dir sh bench/devcode_gpu.sh [GPUSCOPE]
set -u
G=${1:-.output/static/gpuscope}
PY=${PY:-/opt/torch/.venv/bin/python3}
mkdir -p "$OUT"
mount | grep -q tracefs || mount -t tracefs none /sys/kernel/tracing
nvcc -gencode arch=compute_90,code=compute_90 -o /tmp/va_ptx tests/gpu/vector_add.cu
nvcc -gencode arch=compute_90,code=sm_90 -o /tmp/va_sass tests/gpu/vector_add.cu
run() { # name, command...
	n=$1
	shift
	$G run --inject --device-code -o "/tmp/$n.gsrec" -- "$@" > "$OUT/$n.out" 2> "$OUT/$n.txt"
	echo "$n rc=$?" >> "$OUT/rc.txt"
	$G report "/tmp/$n.gsrec" --json="$OUT/$n.json" >> "$OUT/$n.txt" 2>&1
}
run va-ptx /tmp/va_ptx
run va-sass /tmp/va_sass
run torch-matmul $PY tests/gpu/torch_work.py matmul 20
run triton $PY tests/gpu/torch_work.py triton 5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
