#!/bin/bash
# Twins of an exec updated from another graph (cudaGraphExecUpdate), on the GPU machine,
# from the repository root, carrying .output/static; root:
#   OUT=/tmp/upd bash bench/graph_update_gpu.sh
# bench/graph_update.py untraced and under --inject with a twin at every launch
# (GPUSCOPE_TWIN_EVERY=1): the outputs must be bit for bit the same, before the update and
# after it; the report says how many kernel runs inside the graph were timed.
set -u
OUT=${OUT:-/tmp/gpuscope-upd}
. bench/gpu_env.sh
python3 bench/graph_update.py >"$OUT/plain.json" 2>"$OUT/plain.err"
GPUSCOPE_TWIN_EVERY=1 GPUSCOPE_INJECT_DEBUG=1 "$GS" run -q --no-os --inject \
	--json="$OUT/report.json" -- python3 bench/graph_update.py >"$OUT/inject.json" \
	2>"$OUT/inject.err"
python3 - "$OUT" <<'PY' | tee "$OUT/result.txt"
import json, sys
d = sys.argv[1]
a, b = (json.loads(open("%s/%s.json" % (d, r)).read().strip().splitlines()[-1])
        for r in ("plain", "inject"))
r = json.load(open("%s/report.json" % d))
timed = sum(k["gpu"]["in_graph"] for k in r["kernels"]["list"] if k["gpu"])
print("untraced:", a)
print("--inject:", b)
print("outputs %s; update took: %s / %s; graph kernel runs %d, timed inside graphs %d" %
      ("equal" if (a["before"], a["after"]) == (b["before"], b["after"]) else "DIFFERENT",
       a["after_is_x2"], b["after_is_x2"], r["kernels"]["runs_in_graphs"], timed))
PY
grep gpuscope-inject "$OUT/inject.err" | sed 's/0x[0-9a-f]*/X/g' | sort | uniq -c
