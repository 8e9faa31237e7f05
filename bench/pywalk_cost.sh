#!/bin/bash
# The kernel probes' Python walker, measured directly: the CPU time of the launch return
# program (ret_launch) per run, from the kernel's BPF statistics (kernel.bpf_stats_enabled:
# the program's own time, not the uprobe's trap), with Python frames walked and without
# (GPUSCOPE_NO_PYFRAMES=1), at Python depths DEPTHS, every launch's stack taken
# (--stacks 1: the walker runs at each). Modes interleaved, their order turned each round.
#   GPUSCOPE=.output/gpuscope OUT=/tmp/pywalk ROUNDS=7 bash bench/pywalk_cost.sh
# On a machine without a GPU, LD_LIBRARY_PATH=.output/fakes (the test double). Root.
# Writes $OUT/pywalk.json and prints a table (median ns per run, min-max).
set -eu
GS=${GPUSCOPE:-.output/gpuscope}
OUT=${OUT:-/tmp/pywalk}
ROUNDS=${ROUNDS:-7}
N=${N:-20000}
DEPTHS=${DEPTHS:-5 40}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
old=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled=$old' EXIT
sysctl -qw kernel.bpf_stats_enabled=1
: >"$OUT/runs.jsonl"
modes=(frames native)
for ((i = 0; i < ROUNDS; i++)); do
	k=$((i % 2))
	for m in "${modes[@]:k}" "${modes[@]:0:k}"; do
		for d in $DEPTHS; do
			rm -f "$OUT/ready"
			if [ "$m" = native ]; then
				GPUSCOPE_NO_PYFRAMES=1 "$GS" run -q --stacks 1 --json=/dev/null -- \
					"$PY" bench/pywalk.py "$N" "$d" "$OUT/ready" &
			else
				"$GS" run -q --stacks 1 --json=/dev/null -- \
					"$PY" bench/pywalk.py "$N" "$d" "$OUT/ready" &
			fi
			pid=$!
			while [ ! -e "$OUT/ready" ]; do
				kill -0 "$pid" 2>/dev/null || {
					echo "pywalk.py ended before its launches were done" >&2
					exit 1
				}
				sleep 0.05
			done
			python3 bench/bpfstats.py ret_launch | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(json.dumps({"mode": sys.argv[1], "depth": int(sys.argv[2]), "round": int(sys.argv[3]),
                  "runs": s["runs"], "ns": s["ns"]}))' "$m" "$d" "$i" \
				>>"$OUT/runs.jsonl"
			wait "$pid"
		done
	done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(out + "/runs.jsonl")]
table = {}
for r in rows:
    table.setdefault((r["mode"], r["depth"]), []).append(r["ns"] / max(r["runs"], 1))
res = {"%s-%d" % k: {"median_ns": statistics.median(v), "min_ns": min(v), "max_ns": max(v),
                     "rounds": len(v)} for k, v in sorted(table.items())}
json.dump({"rows": rows, "per_run": res}, open(out + "/pywalk.json", "w"), indent=1)
print("| mode | Python depth | ret_launch ns per run, median (min-max) |")
print("|---|---|---|")
for (m, d), v in sorted(table.items()):
    print("| %s | %d | %.0f (%.0f-%.0f) |" % (m, d, statistics.median(v), min(v), max(v)))
PY
