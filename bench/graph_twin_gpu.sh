#!/bin/bash
# Kernels inside CUDA graphs timed through their twins (src/inject/gputime_graph.c, issue
# 22), on the GPU machine, from the repository root, carrying .output/static; root:
#   OUT=/tmp/twin bash bench/graph_twin_gpu.sh [WORKLOAD...]
# 1. the CUDA graphs workload (PyTorch's captured training step, 50 replays) and the JAX one
#    (XLA's command buffer, its kernel nodes set again before each of 30 launches) alone,
#    untraced, and under --inject with a twin at every launch (GPUSCOPE_TWIN_EVERY=1): the
#    twins must leave the program's results as they were (its loss at the end, bit for bit;
#    XLA's autotuning off, which picks kernels by their times, in both runs);
# 2. bench/fidelity.py on WORKLOADS (default graphs jax eager): counts as before, and the
#    kernels inside graphs now paired with CUPTI's per graph launch (fidelity.md).
# XLA_FLAGS given are kept (--xla_gpu_enable_triton_gemm=false: GEMMs by cuBLAS, which XLA
# traces into child graphs of its command buffers).
set -u
OUT=${OUT:-/tmp/gpuscope-twin}
XLA_GIVEN=${XLA_FLAGS:-}
export XLA_FLAGS="--xla_gpu_autotune_level=0 $XLA_GIVEN"
. bench/gpu_env.sh
for w in graphs jax; do
	for run in plain inject; do
		mkdir -p "$OUT/loss-$run"
		if [ $run = plain ]; then
			python3 bench/fidelity_work.py $w "$OUT/loss-$run" >"$OUT/loss-$run/log-$w.txt" 2>&1
		else
			GPUSCOPE_TWIN_EVERY=1 "$GS" run -q --no-os --inject -- python3 \
				bench/fidelity_work.py $w "$OUT/loss-$run" >"$OUT/loss-$run/log-$w.txt" 2>&1
		fi
	done
done
python3 - "$OUT" <<'PY' | tee "$OUT/loss.txt"
import json, sys
for w in ("graphs", "jax"):
    a, b = (json.load(open("%s/loss-%s/facts-%s.json" % (sys.argv[1], r, w)))["loss"]
            for r in ("plain", "inject"))
    print("%s: loss at the end: untraced %r, --inject (a twin at every launch) %r: %s" %
          (w, a, b, "equal" if a == b else "DIFFERENT"))
PY
W=("$@")
[ ${#W[@]} -eq 0 ] && W=(graphs jax eager)
export XLA_FLAGS="$XLA_GIVEN"
python3 bench/fidelity.py run "$GS" "$OUT/fid" "${W[@]}"
cp "$OUT/machine.txt" "$OUT/fid/"
python3 bench/fidelity.py table "$OUT/fid"
