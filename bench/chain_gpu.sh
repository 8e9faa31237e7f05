#!/bin/bash
# Chained GPU timing (--gpu-time=chained) on a GPU machine: durations against CUPTI by the
# kernel's place in its chain (bench/gputime_bias.py), one process for each entry of BIAS
# ("name:VAR=value,VAR=value ...": GS_OPTS for gpuscope's options, else the environment,
# e.g. GPUSCOPE_CHAIN_US, GPUSCOPE_END_DELAY_US); then, unless
# COST=0, the cost of MODES on WORKLOADS (default the CUDA C loop: bench/overhead.py, ROUNDS
# interleaved rounds). From the repository root, carrying .output/static.
set -u
OUT=${OUT:-/tmp/gpuscope-chain}
. bench/gpu_env.sh
BIAS=${BIAS:-"pairs: chained:GS_OPTS=--gpu-time=chained"}
GS=$(realpath "$GS")
for run in $BIAS; do
	name=${run%%:*}
	vars=()
	[ -n "${run#*:}" ] && IFS=, read -ra vars <<<"${run#*:}"
	env "${vars[@]}" python3 bench/gputime_bias.py run "$GS" "$OUT/$name" >"$OUT/$name.txt" 2>&1
	rm -f "$OUT/$name"/*.gsrec "$OUT/$name"/cupti.json
done
if [ "${COST:-1}" != 0 ]; then
	w=$(mktemp -d)
	nvcc -O2 -arch=sm_90 bench/cloop.cu -o "$w/cloop" >>"$OUT/machine.txt" 2>&1
	python3 bench/overhead.py --gpuscope "$GS" --out "$OUT/cost" --reps "$ROUNDS" \
		--cloop "$w/cloop" --workloads "${WORKLOADS:-cloop}" \
		--modes "${MODES:-untraced,inject-all,inject-chained}" >"$OUT/cost.txt" 2>&1
	echo "rc=$?" >>"$OUT/cost.txt"
	rm -f "$OUT"/cost/gs-*.json
fi
