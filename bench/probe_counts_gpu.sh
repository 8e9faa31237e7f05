#!/bin/bash
# probe's launch counts against CUPTI's (issue 21): each PyTorch workload of
# tests/gpu/torch_work.py once under the PyTorch profiler (its kernel records) and once under
# `gpuscope probe threadhist` (nothing instrumentable in PyTorch's SASS-only kernels: every
# launch must still be counted). From the repository root on the GPU machine, carrying
# .output/static. Results in $OUT/counts.jsonl and $OUT/probe-*.txt.
set -u
OUT=${OUT:-/tmp/gpuscope-counts}
. bench/gpu_env.sh
N=${N:-1000}
for w in ${WORKLOADS:-elementwise matmul triton}; do
	python3 tests/gpu/torch_work.py "$w" "$N" --profile "/tmp/$w.trace.json" >/dev/null 2>&1
	"$GS" probe threadhist -- python3 tests/gpu/torch_work.py "$w" "$N" >"$OUT/probe-$w.txt" 2>&1
	python3 - "$w" "/tmp/$w.trace.json" "$OUT/probe-$w.txt" >>"$OUT/counts.jsonl" <<'PY'
import json, re, sys
w, trace, probe = sys.argv[1:4]
ev = json.load(open(trace))["traceEvents"]
cupti = sum(1 for e in ev if e.get("cat") == "kernel")
m = re.search(r"the program launched (\d+) kernels? (\d+) times? .*?: (\d+) instrumented, "
              r"(\d+) the original code, (\d+) of kernels with no PTX", open(probe).read())
print(json.dumps({"workload": w, "cupti_kernels": cupti,
                  "probe": [int(x) for x in m.groups()] if m else None}))
PY
done
