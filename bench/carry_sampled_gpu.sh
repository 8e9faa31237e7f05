#!/bin/bash
# Sampled timing (--gpu-time=10, at most 1,000 timed launches a second a thread) with its
# timed launches run by carriers ("10+carry", src/inject/gputime_carry.c) against gated
# pairs ("10+pairs", the default), beside untraced ("pass") and "off" windows, inside one
# process (bench/inject_ab.sh): tinyops and the CUDA C loop, ROUNDS rounds. An isolated timed
# launch with a pair costs its thread 16-17 us on the H200 guests (cold driver paths,
# bench/results/cost-2026-11-27b-h200.md); a carrier makes two calls where a pair makes
# four. About 1.5 minutes. From the repository root, carrying .output/static; root.
#   OUT=/tmp/sampled bash bench/carry_sampled_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-sampled}
. bench/gpu_env.sh
export ROUNDS
OUT=$OUT/tinyops WORKLOADS=tinyops MODES=pass,off,10+pairs,10+carry PROCS=1 \
	timeout 120 bash bench/inject_ab.sh >/dev/null 2>&1
OUT=$OUT/cloop WORKLOADS=cloop MODES=pass,off,10+pairs,10+carry PROCS=1 \
	timeout 70 bash bench/inject_ab.sh >/dev/null 2>&1
cat "$OUT"/tinyops/ab.txt "$OUT"/cloop/ab.txt
# What the runs counted: launches timed, carried, capped by the rate, lost.
python3 - "$OUT" <<'PY' | tee "$OUT/counts.txt"
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/*/*report.json")):
    r = json.load(open(f))
    g = [k["gpu"] for k in r["kernels"]["list"] if k.get("gpu")]
    print(f, "launches", r["kernels"]["launches"], "timed", sum(x["timed"] for x in g),
          "carried", sum(x.get("carried", 0) for x in g), "gated", sum(x["gated"] for x in g),
          "capped", r["drops"].get("gpu_time_capped"), "lost", r["drops"].get("gpu_time_lost"))
PY
