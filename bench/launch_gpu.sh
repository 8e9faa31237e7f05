#!/bin/bash
# What an event pair adds, by GPU model (issue 22): bench/gputime_bias.py in PROCS fresh
# processes (default 3), then bench/fidelity.py's in-process plane on WORKLOADS (default
# eager cupy jax compile). Each bias run prints what a kernel's launch adds to an empty pair
# that would have been exact for kernels under 2 us, what the report used
# (src/inject/gputime_ctx.c's table by architecture), and the errors of both rules. From the repository root, carrying .output/static.
set -u
OUT=${OUT:-/tmp/gpuscope-launch}
. bench/gpu_env.sh
GS=$(realpath "$GS")
for ((i = 1; i <= ${PROCS:-3}; i++)); do
	python3 bench/gputime_bias.py run "$GS" "$OUT/bias$i" >"$OUT/bias$i.txt" 2>&1
	rm -f "$OUT/bias$i"/*.gsrec "$OUT/bias$i"/cupti.json
done
read -ra W <<<"${WORKLOADS:-eager cupy jax compile}"
FIDELITY_PLANES=inject python3 bench/fidelity.py run "$GS" "$OUT/fid" "${W[@]}" \
	>"$OUT/fid.txt" 2>&1
rm -f "$OUT"/fid/*/*/run.gsrec
