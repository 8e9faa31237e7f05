#!/bin/bash
# --gpu-time=cupti on the GPU (issue 22): what it costs, inside one process
# (bench/inject_ab.sh: untraced "pass", "off", every kernel timed with pairs "all", and
# "cupti"; tinyops and the CUDA C loop; the PyTorch profiler in a process of its own, since
# a profiler takes CUPTI over), and whether its records are matched to their launches:
# tinyops, ResNet-50, GPT-2 and CUDA graphs run under `gpuscope run --inject
# --gpu-time=cupti -o`, and ResNet-50 once more with pairs, then bench/cupti_check.py on
# the recordings (records by the driver against launches, unmatched and lost, kernels
# starting before their call, per-kernel medians against the pairs'). About 5 minutes;
# NO_AB=1: the recordings only (about 2); CHECK="cupy jax": those workloads recorded instead.
# From the repository root, carrying .output/static; root.
#   OUT=/tmp/cupti bash bench/cupti_plane_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-cupti-plane}
. bench/gpu_env.sh
export ROUNDS
if [ -z "${NO_AB:-}" ]; then
	OUT=$OUT/ab WORKLOADS="tinyops cloop" MODES=pass,off,pairs,all PROCS=1 \
		timeout 200 bash bench/inject_ab.sh >/dev/null 2>&1
	OUT=$OUT/prof WORKLOADS=tinyops MODES=pass,profiler,profcuda PROCS=1 \
		timeout 100 bash bench/inject_ab.sh >/dev/null 2>&1
	cat "$OUT"/ab/ab.txt "$OUT"/prof/ab.txt
	# (the program's profiler must still work through our CUPTI entry points)
	echo "profiler process, lines about CUPTI on stderr: $(grep -ci cupti "$OUT"/prof/*.err)"
	grep -i cupti "$OUT"/prof/*.err | head -3
fi
# (GPUSCOPE_INJECT_DEBUG: the plane's own count of how records were matched, in .out)
for w in ${CHECK:-tinyops resnet50 gpt2 graphs}; do
	GPUSCOPE_CUPTI_DUMP=$OUT/$w-dump.txt GPUSCOPE_INJECT_DEBUG=1 \
		timeout 150 "$GS" run -q --inject --gpu-time=cupti \
		-o "$OUT/$w-cupti.gsrec" --json="$OUT/$w-cupti.json" -- \
		python3 bench/workload.py "$w" >"$OUT/$w-cupti.out" 2>&1
	grep "gpuscope cupti" "$OUT/$w-cupti.out"
done
[ -n "${CHECK:-}" ] ||
	timeout 150 "$GS" run -q --inject -o "$OUT/resnet50-pairs.gsrec" \
		--json="$OUT/resnet50-pairs.json" -- python3 bench/workload.py resnet50 \
		>"$OUT/resnet50-pairs.out" 2>&1
python3 bench/cupti_check.py "$OUT" | tee "$OUT/check.txt"
rm -f "$OUT"/*.gsrec
