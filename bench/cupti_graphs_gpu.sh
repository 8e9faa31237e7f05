#!/bin/bash
# --gpu-time=cupti with kernels in graphs (issue 22), on the GPU: what it costs on the CUDA
# graph training step (bench/workload.py graphs) inside one process against untimed
# ("pass") and every kernel timed with pairs and twins ("pairs": the process starts so, to
# have its twins), ROUNDS interleaved rounds;
# then bench/cupti_fidelity.py (each workload under the profiler, and under
# --gpu-time=cupti without it) for FID (default: graphs jax eager cupy compile), in that
# order, each with its own time limit (FID_S seconds). About 8 minutes. AB_WORKLOADS,
# MODES and AB_S (its time limit) change the first part. From the repository root,
# carrying .output/static; root.
#   OUT=/tmp/cg bash bench/cupti_graphs_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-cupti-graphs}
. bench/gpu_env.sh
export ROUNDS
OUT=$OUT/ab WORKLOADS=${AB_WORKLOADS:-graphs} MODES=${MODES:-pass,pairs,all} GPU_TIME=pairs \
	PROCS=1 timeout "${AB_S:-150}" bash bench/inject_ab.sh >/dev/null 2>&1
cat "$OUT"/ab/ab.txt
for w in ${FID:-graphs jax eager cupy compile}; do
	timeout "${FID_S:-200}" python3 bench/cupti_fidelity.py run "$GS" "$OUT/fid" "$w" >/dev/null
	grep -h "gpuscope cupti" "$OUT/fid/$w/gs/log.txt"
done
python3 bench/cupti_fidelity.py table "$OUT/fid"
rm -f "$OUT"/fid/*/gs/run.gsrec
