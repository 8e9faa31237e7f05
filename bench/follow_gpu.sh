#!/bin/bash
# Follows (a busy stream's launch timed from the end event of the launch before it) on a
# GPU machine: durations against CUPTI of kernels launched onto a busy stream
# (bench/busy_bias.py), with follows and without (GPUSCOPE_NO_FOLLOW=1), PROCS processes
# each, interleaved; then, unless COST=0, the cost of MODES on WORKLOADS (bench/overhead.py,
# ROUNDS interleaved rounds). From the repository root, carrying .output/static.
#   OUT=/tmp/follow PROCS=2 WORKLOADS=resnet50 bash bench/follow_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-follow}
. bench/gpu_env.sh
GS=$(realpath "$GS")
for ((i = 1; i <= ${PROCS:-2}; i++)); do
	for name in follow nofollow; do
		env=""
		[ "$name" = nofollow ] && env="GPUSCOPE_NO_FOLLOW=1"
		GS_ENV=$env python3 bench/busy_bias.py run "$GS" "$OUT/$name$i" >"$OUT/$name$i.txt" 2>&1
		rm -f "$OUT/$name$i"/*.gsrec "$OUT/$name$i"/cupti.json
	done
done
if [ "${COST:-1}" != 0 ]; then
	python3 bench/overhead.py --gpuscope "$GS" --out "$OUT/cost" --reps "$ROUNDS" \
		--workloads "${WORKLOADS:-resnet50}" \
		--modes "${MODES:-untraced,inject-all,inject-all-nofollow,torch-profiler}" \
		>"$OUT/cost.txt" 2>&1
	echo "rc=$?" >>"$OUT/cost.txt"
	rm -f "$OUT"/cost/gs-*.json
fi
