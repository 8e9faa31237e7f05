#!/bin/bash
# What a probed Python raise costs with the probe past the interpreter's endbr64
# (core/elfsym.h's elf_uprobe_skip) and at the function as before (BASE's build): N
# raise/catch of a ValueError (tests/gpu/py_frames.py raises) untraced, under BASE with
# --py-exceptions, and under this build with --py-exceptions, ROUNDS interleaved rounds,
# the order turning each round; and how many raises each counted. From the repository
# root, carrying .output/static and BASE's build. Root.
#   OUT=/tmp/pyexc ROUNDS=5 BASE=.output/base-static/gpuscope bash bench/pyexc_sites_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-pyexc}
. bench/gpu_env.sh
BASE=${BASE:-.output/base-static/gpuscope}
N=${N:-200000}
modes=(untraced base new)
: >"$OUT/raises.jsonl"
for ((i = 0; i < ROUNDS; i++)); do
	for j in "${!modes[@]}"; do
		mode=${modes[$(((i + j) % 3))]}
		case $mode in
		untraced) cmd=(python3) ;;
		base) cmd=("$BASE" run -q --py-exceptions --json="$OUT/$mode-$i.json" -- python3) ;;
		new) cmd=("$GS" run -q --py-exceptions --json="$OUT/$mode-$i.json" -- python3) ;;
		esac
		r=$("${cmd[@]}" tests/gpu/py_frames.py raises "$N" 2>/dev/null | tail -1)
		n=null
		[ -f "$OUT/$mode-$i.json" ] &&
			n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["python_exceptions"].get("raised", "null"))' "$OUT/$mode-$i.json" 2>/dev/null)
		echo "{\"round\": $i, \"mode\": \"$mode\", \"result\": ${r:-null}, \"counted\": ${n:-null}}" >>"$OUT/raises.jsonl"
		rm -f "$OUT/$mode-$i.json"
	done
done
python3 - "$OUT/raises.jsonl" <<'PY' | tee "$OUT/raises.txt"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    if r["result"]:
        by.setdefault(r["mode"], []).append(r["result"]["ns_per_raise"])
print("| mode | ns a raise: median (min-max) | raises counted |")
print("|---|---|---|")
for m in ("untraced", "base", "new"):
    v = by.get(m, [])
    c = sorted({r["counted"] for r in rows if r["mode"] == m})
    if v:
        print("| %s | %.0f (%.0f-%.0f) | %s |" % (m, statistics.median(v), min(v), max(v), c))
PY
