#!/bin/bash
# Twins of an exec whose kernel node the program disables and enables again
# (cudaGraphNodeSetEnabled), on the GPU machine, from the repository root, carrying
# .output/static; root:
#   OUT=/tmp/enable bash bench/graph_enable_gpu.sh
# bench/graph_enable.cu built with nvcc, run untraced and under --inject with a twin at
# every launch (GPUSCOPE_TWIN_EVERY=1): the counters must be the same (92); the report's
# counts and in-graph times per kernel in OUT/result.txt.
set -u
OUT=${OUT:-/tmp/gpuscope-enable}
. bench/gpu_env.sh
nvcc -O2 -o "$OUT/graph_enable" bench/graph_enable.cu || exit 1
"$OUT/graph_enable" >"$OUT/plain.txt" 2>&1
GPUSCOPE_TWIN_EVERY=1 GPUSCOPE_INJECT_DEBUG=1 "$GS" run -q --no-os --inject \
	--json="$OUT/report.json" -- "$OUT/graph_enable" >"$OUT/inject.txt" 2>"$OUT/inject.err"
"$GS" run -q --no-os --json="$OUT/report-uprobe.json" -- "$OUT/graph_enable" \
	>"$OUT/uprobe.txt" 2>&1
python3 - "$OUT" <<'PY' | tee "$OUT/result.txt"
import json, sys
d = sys.argv[1]
print("untraced:", open(d + "/plain.txt").read().strip())
print("--inject, a twin at every launch:", open(d + "/inject.txt").read().strip())
for plane in ("report", "report-uprobe"):
    r = json.load(open("%s/%s.json" % (d, plane)))
    for k in r["kernels"]["list"]:
        g = k["gpu"] or {}
        print("%s: %s graph_runs %d (want 24 add1, 16 add10), timed in graphs %s, "
              "median %s ns" % (plane, k["display"], k["graph_runs"], g.get("in_graph"),
                                g.get("p50_ns")))
PY
grep gpuscope-inject "$OUT/inject.err" | sed 's/0x[0-9a-f]*/X/g' | sort | uniq -c
