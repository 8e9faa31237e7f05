#!/bin/sh
# The exporter's per-process metrics (eBPF) on a GPU machine, against a workload whose
# launches are known: tests/gpu/torch_work.py elementwise N launches its add kernel N
# times, plus one fill. Writes the scrape after the workload exited and the facts to $OUT.
#
#   OUT=dir sh bench/exporter_ebpf_gpu.sh [N] [GPUSCOPE]
set -u
N=${1:-5000}
G=${2:-.output/bundle/gpuscope}
PY=${PY:-/opt/torch/.venv/bin/python3}
PORT=19492
mkdir -p "$OUT"
mount | grep -q tracefs || mount -t tracefs none /sys/kernel/tracing
$G exporter --listen 127.0.0.1:$PORT --interval 1 --retain 120 2> "$OUT/exporter.log" &
AGENT=$!
sleep 3
$PY tests/gpu/torch_work.py elementwise "$N" --facts "$OUT/facts.json" > "$OUT/workload.out" 2>&1
echo "workload exit: $?" >> "$OUT/workload.out"
sleep 3
curl -s 127.0.0.1:$PORT/metrics > "$OUT/metrics.txt"
kill -TERM $AGENT
wait $AGENT
echo "exporter exit: $?" >> "$OUT/exporter.log"
