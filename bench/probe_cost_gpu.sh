#!/bin/bash
# The device plane's cost targets (issue 21), on the GPU machine from the repository root,
# carrying .output/static and .output/gpu-probe (bench/probe_gpu.sh prepare, here):
#   - the empty entry+exit probe (bench/probe/empty.bpf.c) on a launch-bound loop of an
#     empty kernel (tiny<<<1, 32>>>): target <= 1.2x;
#   - threadhist on a kernel of about 1 ms (heavy, ITERS iterations): target <= 1.5x;
# ROUNDS rounds (default 7), each running untraced and probed back to back (ABAB), the
# order turned each round; the GPU time per launch of bench/probe/kernels.cu's bench loop
# (its second pass, after a warm-up pass, so the JIT is not counted). Ratios are per round
# against the same round's untraced run; median with min-max. Results in $OUT/cost.txt
# (raw) and $OUT/cost.json. GS2=another gpuscope build adds a mode "probed2" to each round
# (before and after a change, in one run).
set -u
OUT=${OUT:-/tmp/gpuscope-cost}
mkdir -p "$OUT"
GS=${GS:-$PWD/.output/static/gpuscope}
GS2=${GS2:-}
OBJ=$PWD/.output/gpu-probe
W=$(mktemp -d)
export PATH=$PATH:/usr/local/cuda/bin
nvcc -O2 -arch=sm_90 -o "$W/kernels" bench/probe/kernels.cu || exit 1
ROUNDS=${ROUNDS:-7} ITERS=${ITERS:-64000}
per_launch() { sed -n 's/.*: \([0-9.]*\) us per launch.*/\1/p' | tail -1; }
: >"$OUT/cost.txt"
for r in $(seq 1 "$ROUNDS"); do
	for case in "tiny 20000 2000 $OBJ/empty.bpf.o" "heavy 20 $ITERS threadhist"; do
		set -- $case
		k=$1 n=$2 it=$3 probe=$4
		modes="plain probed${GS2:+ probed2}"
		for _ in $(seq 1 $((r % 3))); do # (the order turned each round)
			modes="${modes#* } ${modes%% *}"
		done
		for mode in $modes; do
			case $mode in
			plain) t=$("$W/kernels" bench "$k" "$n" "$it" | per_launch) ;;
			probed) t=$("$GS" probe "$probe" -- "$W/kernels" bench "$k" "$n" "$it" 2>&1 | per_launch) ;;
			probed2) t=$("$GS2" probe "$probe" -- "$W/kernels" bench "$k" "$n" "$it" 2>&1 | per_launch) ;;
			esac
			echo "$r $k $mode ${t:-?}" >>"$OUT/cost.txt"
		done
	done
done
python3 - "$OUT/cost.txt" >"$OUT/cost.json" <<'PY'
import json, statistics, sys
rows = [ln.split() for ln in open(sys.argv[1])]
t = {(r, k, m): float(v) for r, k, m, v in rows if v != "?"}
out = {}
for k, target in (("tiny", 1.2), ("heavy", 1.5)):
    plain = sorted(v for (r, kk, m), v in t.items() if kk == k and m == "plain")
    out[k] = {"target": target,
              "untraced_us_per_launch_median": statistics.median(plain) if plain else None}
    for mode in ("probed", "probed2"):
        rs = sorted(t[(r, k, mode)] / t[(r, k, "plain")] for r in {x[0] for x in t}
                    if (r, k, mode) in t and (r, k, "plain") in t)
        if rs:
            out[k][mode] = {"rounds": len(rs), "median": statistics.median(rs),
                            "min": rs[0], "max": rs[-1]}
print(json.dumps(out, indent=1))
PY
cat "$OUT/cost.json"
