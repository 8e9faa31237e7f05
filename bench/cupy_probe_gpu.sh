#!/bin/bash
# A device-side probe in CuPy's kernels (issue 21): CuPy compiles with NVRTC to cubins unless
# CUPY_COMPILE_WITH_PTX=1, which `gpuscope probe` sets for the program. bench/probe/cupy_work.py
# (N launches each of a RawKernel and an ElementwiseKernel over 1M elements) untraced and under
# `gpuscope probe threadhist`, with a fresh CUPY_CACHE_DIR each; the threads the probe saw
# per kernel against grid x block x launches (1M x N), and the workload's own checks. From the
# repository root on the GPU machine, carrying .output/static. Results in $OUT/cupy-*.txt
# and $OUT/cupy.json.
set -u
OUT=${OUT:-/tmp/gpuscope-cupy}
. bench/gpu_env.sh
N=${N:-100}
CUPY_CACHE_DIR=$(mktemp -d) python3 bench/probe/cupy_work.py "$N" >"$OUT/cupy-plain.txt" 2>&1
echo "rc=$?" >>"$OUT/cupy-plain.txt"
CUPY_CACHE_DIR=$(mktemp -d) "$GS" probe -v threadhist -- python3 bench/probe/cupy_work.py "$N" \
	>"$OUT/cupy-probe.txt" 2>&1
echo "rc=$?" >>"$OUT/cupy-probe.txt"
python3 - "$OUT" "$N" >"$OUT/cupy.json" <<'PY'
import json, os, re, sys
out, n = sys.argv[1], int(sys.argv[2])
res = {"want_threads_each": (1 << 20) * n}
for run in ("plain", "probe"):
    t = open(os.path.join(out, "cupy-%s.txt" % run)).read()
    res[run] = {"checks": [ln for ln in t.splitlines() if ln.startswith("cupy ")],
                "rc0": "rc=0" in t}
t = open(os.path.join(out, "cupy-probe.txt")).read()
for k in ("scale2", "addone"):
    m = re.search(r"kernel %s\S*\n\s+(\d+) threads" % k, t)
    res[k] = {"threads": int(m.group(1)) if m else None,
              "ok": bool(m) and int(m.group(1)) == res["want_threads_each"]}
res["summary"] = [ln for ln in t.splitlines() if "ran instrumented" in ln or "launched" in ln]
print(json.dumps(res, indent=1))
PY
cat "$OUT/cupy.json"
