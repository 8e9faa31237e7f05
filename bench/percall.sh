#!/bin/bash
# Host cost per driver call with and without the in-process plane, on the real driver:
# bench/primitives.cu run untraced, under `run --inject --gpu-time=off` and under
# `run --inject` (GPU time of every launch), interleaved, REPS times each (default 5).
# MODES adds variants of inject-off: inject-off-mono (clock_gettime, not the TSC) and
# inject-off-ring1m (a 1 MiB ring instead of 16 MiB); and of inject-all: inject-all-nogates
# (events without gates), inject-all-h10ms (the harvester every 10 ms, not 1 ms).
# Its launches go through the static runtime, hence through cuGetProcAddress entry points.
#   GPUSCOPE=.output/static/gpuscope OUT=/tmp/percall bash bench/percall.sh
# Writes $OUT/percall.json: for each mode, the list of primitives' JSON objects.
set -eu
GS=${GPUSCOPE:-.output/static/gpuscope}
OUT=${OUT:-/tmp/percall}
REPS=${REPS:-5}
mkdir -p "$OUT"
nvcc -O2 -arch=sm_90 bench/primitives.cu -o "$OUT/primitives" -lcuda
for ((i = 0; i < REPS; i++)); do
	read -ra modes <<<"${MODES:-untraced inject-off inject-all}"
	k=$((i % ${#modes[@]}))
	for m in "${modes[@]:k}" "${modes[@]:0:k}"; do
		case $m in
		untraced) "$OUT/primitives" >"$OUT/$m.$i.json" ;;
		inject-off) "$GS" run -q --inject --gpu-time=off -- "$OUT/primitives" >"$OUT/$m.$i.json" ;;
		inject-all) "$GS" run -q --inject -- "$OUT/primitives" >"$OUT/$m.$i.json" ;;
		inject-off-mono) GPUSCOPE_INJECT_CLOCK=mono "$GS" run -q --inject --gpu-time=off -- "$OUT/primitives" >"$OUT/$m.$i.json" ;;
		inject-all-nogates) GPUSCOPE_NO_GATES=1 "$GS" run -q --inject -- "$OUT/primitives" >"$OUT/$m.$i.json" ;;
		inject-all-h10ms) GPUSCOPE_HARVEST_US=10000 "$GS" run -q --inject -- "$OUT/primitives" >"$OUT/$m.$i.json" ;;
		inject-off-ring1m) "$GS" run -q --inject --gpu-time=off --buffer-size=1M -- "$OUT/primitives" >"$OUT/$m.$i.json" ;;
		esac
	done
done
python3 - "$OUT" "$REPS" "${MODES:-untraced inject-off inject-all}" <<'PY'
import json, statistics, sys
out, reps, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
runs = {m: [json.load(open("%s/%s.%d.json" % (out, m, i))) for i in range(reps)] for m in modes}
keys = [k for k in runs["untraced"][0] if k.endswith("_ns")]
table = {m: {k: statistics.median(r[k] for r in runs[m]) for k in keys} for m in modes}
json.dump({"reps": reps, "median_ns": table, "runs": runs}, open(out + "/percall.json", "w"), indent=1)
print("| call | " + " | ".join(modes) + " |")
print("|---|" + "---|" * len(modes))
for k in keys:
    print("| %s | %s |" % (k[:-3], " | ".join("%.1f ns" % table[m][k] for m in modes)))
PY
