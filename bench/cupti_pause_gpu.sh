#!/bin/bash
# Issue 22, the default mode (--gpu-time=all) where graph launches and kernel launches meet
# (CUPTI's kind off around each graph launch's call), on the GPU:
#  1. JAX's training loop (bench/workload.py jax) under the default with the plane's debug
#     lines (GPUSCOPE_INJECT_DEBUG: records no launch matched, launches left, names) and
#     the first 2,000 launches and records (GPUSCOPE_CUPTI_DUMP) in $OUT/jax;
#  2. the default against CUPTI (bench/cupti_fidelity.py, FID_GPU_TIME=all) for FID
#     (default: torch.compile's reduce-overhead mode, its graphs replayed from the main and
#     autograd threads, and JAX), FID_S seconds each;
#  3. with AB_WORKLOADS set (e.g. "tinyops cloop graphs"), what MODES cost inside one
#     process (bench/inject_ab.sh, AB_S seconds).
# From the repository root, carrying .output/static; root.
#   OUT=/tmp/cp bash bench/cupti_pause_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-cupti-pause}
. bench/gpu_env.sh
export ROUNDS
mkdir -p "$OUT/jax"
GPUSCOPE_INJECT_DEBUG=1 GPUSCOPE_CUPTI_DUMP="$OUT/jax/dump.txt" timeout "${JAX_S:-150}" \
	"$GS" run -q --no-os --inject --json="$OUT/jax/report.json" -- \
	python3 bench/workload.py jax >"$OUT/jax/out.txt" 2>"$OUT/jax/log.txt"
grep -h "gpuscope cupti" "$OUT/jax/log.txt" | grep -v "launch name" | head -40
for w in ${FID:-compile_ro jax}; do
	FID_GPU_TIME=all timeout "${FID_S:-240}" python3 bench/cupti_fidelity.py run "$GS" \
		"$OUT/fid" "$w" >/dev/null
	grep -h "gpuscope cupti" "$OUT/fid/$w/gs/log.txt" | grep -v "launch name"
	cp "$OUT/fid/$w/gs/log.txt" "$OUT/fid-$w-log.txt"
done
python3 bench/cupti_fidelity.py table "$OUT/fid"
rm -f "$OUT"/fid/*/gs/run.gsrec
if [ -n "${AB_WORKLOADS:-}" ]; then
	OUT=$OUT/ab WORKLOADS=$AB_WORKLOADS MODES=${MODES:-pass,off,pairs,all} GPU_TIME=pairs \
		PROCS=1 timeout "${AB_S:-200}" bash bench/inject_ab.sh >/dev/null 2>&1
	cat "$OUT"/ab/ab.txt
fi
