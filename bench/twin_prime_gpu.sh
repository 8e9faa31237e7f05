#!/bin/bash
# How long the twins' first kernel should spin (GPUSCOPE_TWIN_PRIME_NS, issue 22), and
# their event nodes (EVENTS: chained, the default, or pairs: GPUSCOPE_TWIN_EVENTS): the
# in-graph kernels' errors against CUPTI by their place in the graph launch, for each
# length and kind, on the GPU machine, from the repository root, carrying .output/static;
# root:
#   OUT=/tmp/prime PRIMES="3000 20000" EVENTS="chained pairs" bash bench/twin_prime_gpu.sh \
#       [WORKLOAD...]
# Each: bench/fidelity.py, the in-process plane only, a twin at every launch, on WORKLOADS
# (default graphs_sync jax); OUT/EVENTS-pN/fidelity.md has the positions line.
set -u
OUT=${OUT:-/tmp/gpuscope-prime}
. bench/gpu_env.sh
W=("$@")
[ ${#W[@]} -eq 0 ] && W=(graphs_sync jax)
for e in ${EVENTS:-chained}; do
	for p in ${PRIMES:-3000 20000 60000}; do
		d=$OUT/$e-p$p
		GPUSCOPE_TWIN_EVENTS=$e GPUSCOPE_TWIN_PRIME_NS=$p GPUSCOPE_TWIN_EVERY=1 \
			FIDELITY_PLANES=inject python3 bench/fidelity.py run "$GS" "$d" "${W[@]}" \
			>"$d.log" 2>&1
		cp "$OUT/machine.txt" "$d/"
		rm -f "$d"/*/*/run.gsrec
		echo "== $e, prime $p ns"
		grep -E "^\| graph|^in graphs" "$d/fidelity.md"
	done
done
