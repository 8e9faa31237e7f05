#!/bin/bash
# Carriers kept per kernel and launch shape (src/inject/gputime_carry.c) against carriers
# taken oldest first (GPUSCOPE_CARRY_ANY=1) and gated pairs, on the GPU in one device call:
# bench/gputime_bias.py with its sizes launched in turn (BIAS_ORDER=interleave: every launch
# a new shape for its stream, as in a training step), GPU durations against CUPTI; two
# processes each, ABCABC. About 3 minutes. From the repository root, carrying
# .output/static; root.
#   OUT=/tmp/keep bash bench/carry_keep_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-keep}
. bench/gpu_env.sh
export BIAS_ORDER=interleave BIAS_N=${BIAS_N:-60}
for i in 1 2; do
	GPUSCOPE_CARRY=1 timeout 80 python3 bench/gputime_bias.py run "$GS" "$OUT/keep$i" \
		>"$OUT/keep$i.txt" 2>&1
	GPUSCOPE_CARRY=1 GPUSCOPE_CARRY_ANY=1 timeout 80 python3 bench/gputime_bias.py run "$GS" \
		"$OUT/any$i" >"$OUT/any$i.txt" 2>&1
	timeout 80 python3 bench/gputime_bias.py run "$GS" "$OUT/pairs$i" >"$OUT/pairs$i.txt" 2>&1
	rm -f "$OUT"/*/*.gsrec "$OUT"/*/cupti.json
done
# Per run and bucket: the carried runs' and the pairs' error against CUPTI (the report's
# estimate), and how many were carried, corrected.
python3 - "$OUT" <<'PY' | tee "$OUT/table.md"
import json, os, sys
print("| run | bucket | n | carried (corrected) | carried: error, within 0.5 us | pairs: error, within |")
print("|---|---|---|---|---|---|")
for name in ("keep1", "any1", "pairs1", "keep2", "any2", "pairs2"):
    f = os.path.join(sys.argv[1], name, "bias.json")
    if not os.path.exists(f):
        print("| %s | (no result) |" % name)
        continue
    for b, row in json.load(open(f))["buckets"].items():
        c, p = row["reported_carried"], row["reported_pairs"]
        fmt = lambda e: "-" if e["median_err_ns"] is None else "%+.0f ns, %.0f%%" % (
            e["median_err_ns"], 100 * e["within_2pct_or_0.5us"])
        print("| %s | %s | %d | %d (%d) | %s | %s |" % (name, b, row["n"], row["carried"],
                                                   row["corrected"], fmt(c), fmt(p)))
PY
