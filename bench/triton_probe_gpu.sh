#!/bin/bash
# A device-side probe in a Triton kernel (issue 21): Triton loads cubins, and gpuscope takes
# the PTX Triton keeps beside each in its cache. tests/gpu/torch_work.py triton (N launches
# of a 1M-element add, grid 1,024) under `gpuscope probe threadhist`, twice: with a fresh
# cache (the kernel compiled in the probed run) and with the cache the first run left; the
# threads the probe saw against grid x block x launches (block: num_warps x 32, from the
# cache's metadata), and the workload's own check of its result. Then whether CuPy is
# there. From the repository root on the GPU machine, carrying .output/static. Results in
# $OUT/triton-*.txt and $OUT/triton.json.
set -u
OUT=${OUT:-/tmp/gpuscope-triton}
. bench/gpu_env.sh
N=${N:-200}
export TRITON_CACHE_DIR
TRITON_CACHE_DIR=$(mktemp -d)
for run in fresh cached; do
	"$GS" probe -v threadhist -- python3 tests/gpu/torch_work.py triton "$N" \
		>"$OUT/triton-$run.txt" 2>&1
	echo "rc=$?" >>"$OUT/triton-$run.txt"
done
python3 - "$OUT" "$TRITON_CACHE_DIR" "$N" >"$OUT/triton.json" <<'PY'
import glob, json, os, re, sys
out, cache, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
meta = [json.load(open(f)) for f in glob.glob(os.path.join(cache, "*", "add_kernel.json"))]
warps = meta[0].get("num_warps") if meta else None
want = 1024 * warps * 32 * n if warps else None
res = {"num_warps": warps, "want_threads": want}
for run in ("fresh", "cached"):
    t = open(os.path.join(out, "triton-%s.txt" % run)).read()
    m = re.search(r"kernel add_kernel\S*\n\s+(\d+) threads", t)
    res[run] = {"threads": int(m.group(1)) if m else None,
                "ok": bool(m) and int(m.group(1)) == want and "rc=0" in t,
                "from_cache": "its PTX from Triton's cache" in t,
                "summary": [ln for ln in t.splitlines() if "ran instrumented" in ln]}
try:
    import cupy
    res["cupy"] = cupy.__version__
except Exception as e:
    res["cupy"] = "not importable: %s" % e
print(json.dumps(res, indent=1))
PY
cat "$OUT/triton.json"
