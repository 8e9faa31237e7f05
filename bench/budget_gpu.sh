#!/bin/bash
# Issue 22, where sampled timing and the kernel plane cost on training steps. 1. The kernel
# plane's BPF programs a step (bench/attach_ab.py with BPFSTATS=1: runs a step and ns a run
# of each, BPF_ROUNDS attached periods of BPF_SECS seconds) on BPF_WORKLOADS. 2. The
# in-process plane's modes inside one process (bench/inject_ab.sh, PHASES=1): by default
# --gpu-time=10 without its time budget (+budget=0) and with it, beside pass, a second
# untraced control and off. From the repository root, carrying .output/static; root.
#   OUT=/tmp/budget ROUNDS=15 bash bench/budget_gpu.sh
# Writes $OUT/bpf-WORKLOAD.txt, $OUT/ab.txt, $OUT/phases.txt.
set -u
OUT=${OUT:-/tmp/gpuscope-budget}
. bench/gpu_env.sh
for w in ${BPF_WORKLOADS-resnet50 gpt2}; do
	BPFSTATS=1 python3 bench/attach_ab.py run "$GS" "$OUT/attach" "$w" "${BPF_ROUNDS:-3}" \
		"${BPF_SECS:-6}" >"$OUT/bpf-$w.txt" 2>&1
done
OUT=$OUT/ab PHASES=1 MODES=${MODES:-pass,pass2,off,10+budget=0,10} PROCS=${PROCS:-1} \
	WORKLOADS=${WORKLOADS:-resnet50 gpt2 tinyops cupy} bash bench/inject_ab.sh >/dev/null 2>&1
cp "$OUT/ab/ab.txt" "$OUT/ab/phases.txt" "$OUT/" 2>/dev/null
cat "$OUT"/bpf-*.txt "$OUT/ab.txt" "$OUT/phases.txt" 2>/dev/null
