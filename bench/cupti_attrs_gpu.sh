#!/bin/bash
# CUPTI's activity attributes against what its kernel kind costs a launch call (issue 22):
# bench/cupti_attrs.cu, one process a configuration, the configurations' order turned each
# round, at PACES (ns between launches; 0: back to back). About 2.5 minutes. From the
# repository root on a GPU machine. CONFIGS: a list of bench/cupti_attrs.cu's configurations.
#   OUT=/tmp/attrs PROCS=3 CONFIGS="default default+flush50" bash bench/cupti_attrs_gpu.sh
# Writes $OUT/attrs.jsonl and prints a table: per configuration and pace, the median over
# processes of the added ns a call (each process's median over its rounds), min-max.
set -u
OUT=${OUT:-/tmp/gpuscope-attrs}
. bench/gpu_env.sh
PROCS=${PROCS:-3}
PACES=${PACES:-9000 0}
read -ra CONFIGS <<<"${CONFIGS:-default pinned shared zeroed bigdev}"
lib=$(find / -name 'libcupti.so.13*' -path '*cu13*' 2>/dev/null | head -1)
[ -n "$lib" ] || lib=$(find / -name 'libcupti.so.13*' 2>/dev/null | head -1)
inc=$(dirname "$(find / -name cupti_activity.h 2>/dev/null | head -1)")
d=$(dirname "$lib")
echo "cupti: $lib, headers $inc" >>"$OUT/machine.txt"
ln -sf "$lib" "$OUT/libcupti.so"
nvcc -O2 -arch=sm_90 -I"$inc" bench/cupti_attrs.cu -o "$OUT/cupti_attrs" -L"$OUT" -lcuda -lcupti \
	>>"$OUT/machine.txt" 2>&1 || { echo "cupti_attrs did not build"; tail "$OUT/machine.txt"; exit 1; }
: >"$OUT/attrs.jsonl"
for ((p = 0; p < PROCS; p++)); do
	for pace in $PACES; do
		k=$((p % ${#CONFIGS[@]}))
		for c in "${CONFIGS[@]:k}" "${CONFIGS[@]:0:k}"; do
			LD_LIBRARY_PATH=$d timeout 60 "$OUT/cupti_attrs" "$c" "${N:-20000}" "$ROUNDS" "$pace" \
				>>"$OUT/attrs.jsonl" 2>>"$OUT/errors.txt" || echo "$c $pace: failed" >>"$OUT/errors.txt"
		done
	done
done
python3 - "$OUT/attrs.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
t = {}
for r in rows:
    t.setdefault((r["config"], r["pace_ns"]), []).append(r)
print("| configuration | pace ns | call ns, kind off | kind on | added, median (min-max) "
      "| mean call ns, off | on | added | processes | kernels kept, dropped |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (c, pace), rs in sorted(t.items(), key=lambda kv: (-kv[0][1], kv[0][0])):
    add = [r["added_ns"] for r in rs]
    med = lambda k: statistics.median(r.get(k, 0) for r in rs)
    print("| %s | %.0f | %.0f | %.0f | %.0f (%.0f-%.0f) | %.0f | %.0f | %.0f | %d | %d, %d |" % (
        c, pace, med("off_ns"), med("on_ns"), statistics.median(add), min(add), max(add),
        med("off_mean_ns"), med("on_mean_ns"), med("added_mean_ns"), len(rs),
        sum(r["kernels"] for r in rs), sum(r["dropped"] for r in rs)))
    if any(r.get("flushes") for r in rs):
        print("|  | flushes: %d, their median %.0f us (largest %.0f) |" % (
            sum(r["flushes"] for r in rs), statistics.median(r["flush_us_median"] for r in rs),
            max(r["flush_us_max"] for r in rs)))
PY
