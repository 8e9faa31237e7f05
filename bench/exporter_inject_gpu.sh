#!/bin/sh
# GPU time per kernel through the exporter's in-process plane (--inject-dir), on a GPU
# machine: tests/gpu/torch_work.py matmul N preloading the agent's library, then the same
# run under the PyTorch profiler (CUPTI) alone, for the kernels' durations to compare.
# Writes the scrape after the workload exited, the profile and the logs to $OUT.
#
#   OUT=dir sh bench/exporter_inject_gpu.sh [N] [GPUSCOPE]
set -u
N=${1:-300}
G=${2:-.output/static/gpuscope}
PY=${PY:-/opt/torch/.venv/bin/python3}
PORT=19493
DIR=/tmp/gpuscope-agent
mkdir -p "$OUT"
mount | grep -q tracefs || mount -t tracefs none /sys/kernel/tracing
$G exporter --no-nvml --listen 127.0.0.1:$PORT --retain 120 --inject-dir $DIR \
	2> "$OUT/exporter.log" &
AGENT=$!
sleep 2
LD_PRELOAD=$DIR/libgpuscope-inject.so GPUSCOPE_INJECT_DIR=$DIR \
	$PY tests/gpu/torch_work.py matmul "$N" --facts "$OUT/facts.json" > "$OUT/workload.out" 2>&1
echo "workload exit: $?" >> "$OUT/workload.out"
sleep 2
curl -s 127.0.0.1:$PORT/metrics > "$OUT/metrics.txt"
ls -la $DIR > "$OUT/dir.txt"
kill -TERM $AGENT
wait $AGENT
echo "exporter exit: $?" >> "$OUT/exporter.log"
$PY tests/gpu/torch_work.py matmul "$N" --profile "$OUT/profile.json" > "$OUT/profile.out" 2>&1
echo "profile exit: $?" >> "$OUT/profile.out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
