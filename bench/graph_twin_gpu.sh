#!/bin/bash
# Kernels inside CUDA graphs timed through their twins (src/inject/gputime_graph.c, issue
# 22), on the GPU machine, from the repository root, carrying .output/static; root:
#   OUT=/tmp/twin bash bench/graph_twin_gpu.sh [WORKLOAD...]
# 1. the CUDA graphs workload alone, untraced, and under --inject: the twins must leave the
#    program's results as they were (its loss after 50 replays, bit for bit);
# 2. bench/fidelity.py on WORKLOADS (default graphs jax eager): counts as before, and the
#    kernels inside graphs now paired with CUPTI's per graph launch (fidelity.md).
set -u
OUT=${OUT:-/tmp/gpuscope-twin}
. bench/gpu_env.sh
for run in plain inject; do
	mkdir -p "$OUT/loss-$run"
	if [ $run = plain ]; then
		python3 bench/fidelity_work.py graphs "$OUT/loss-$run" >"$OUT/loss-$run/log.txt" 2>&1
	else
		"$GS" run -q --no-os --inject -- python3 bench/fidelity_work.py graphs \
			"$OUT/loss-$run" >"$OUT/loss-$run/log.txt" 2>&1
	fi
done
python3 - "$OUT" <<'PY' | tee "$OUT/loss.txt"
import json, sys
a, b = (json.load(open("%s/loss-%s/facts-graphs.json" % (sys.argv[1], r)))["loss"]
        for r in ("plain", "inject"))
print("loss after 50 replays: untraced %r, --inject (twins) %r: %s" %
      (a, b, "equal" if a == b else "DIFFERENT"))
PY
W=("$@")
[ ${#W[@]} -eq 0 ] && W=(graphs jax eager)
python3 bench/fidelity.py run "$GS" "$OUT/fid" "${W[@]}"
cp "$OUT/machine.txt" "$OUT/fid/"
python3 bench/fidelity.py table "$OUT/fid"
