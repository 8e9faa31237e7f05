#!/bin/bash
# Carriers (src/inject/gputime_carry.c, GPUSCOPE_CARRY=1) on the GPU in one device call:
# what every-kernel timing costs with them ("carry") and without ("pairs", what "all" is
# without GPUSCOPE_CARRY), against untraced windows ("pass"), "off" and the PyTorch
# profiler, inside one process (bench/inject_ab.sh: tinyops, the CUDA C loop, CuPy); then
# the GPU durations of carried and paired launches against CUPTI by kernel size
# (bench/gputime_bias.py, with carriers and without), and (bench/fidelity.py, the in-process
# plane) what CUPTI sees of carried launches. About 2 minutes. From the repository root,
# carrying .output/static; root.
#   OUT=/tmp/carry ROUNDS=7 bash bench/carry_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-carry}
. bench/gpu_env.sh
export ROUNDS
OUT=$OUT/tinyops WORKLOADS=tinyops MODES=pass,off,carry,pairs,profiler PROCS=1 \
	timeout 170 bash bench/inject_ab.sh >/dev/null 2>&1
OUT=$OUT/cloop WORKLOADS=cloop MODES=pass,off,carry,pairs PROCS=1 \
	timeout 60 bash bench/inject_ab.sh >/dev/null 2>&1
OUT=$OUT/cupy WORKLOADS=cupy MODES=pass,carry,pairs,profiler PROCS=1 \
	timeout 120 bash bench/inject_ab.sh >/dev/null 2>&1
GPUSCOPE_CARRY=1 timeout 90 python3 bench/gputime_bias.py run "$GS" "$OUT/bias" \
	>"$OUT/bias.txt" 2>&1
timeout 90 python3 bench/gputime_bias.py run "$GS" "$OUT/bias-pairs" >"$OUT/bias-pairs.txt" 2>&1
GPUSCOPE_CARRY=1 FIDELITY_PLANES=inject timeout 200 python3 bench/fidelity.py run "$GS" \
	"$OUT/fidelity" eager cupy >"$OUT/fidelity.txt" 2>&1
rm -f "$OUT"/*/*.gsrec "$OUT"/*/*/*.gsrec
# What the runs counted: launches carried, timed, left untimed.
python3 - "$OUT" <<'PY' | tee "$OUT/counts.txt"
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/*/*report.json")):
    r = json.load(open(f))
    g = [k["gpu"] for k in r["kernels"]["list"] if k.get("gpu")]
    print(f, "launches", r["kernels"]["launches"], "failed", r["kernels"]["failed"],
          "timed", sum(x["timed"] for x in g), "carried", sum(x.get("carried", 0) for x in g),
          "gated", sum(x["gated"] for x in g), "lost", r["drops"].get("gpu_time_lost"),
          "carried_overhead", [d.get("carried_event_overhead_ns") for d in r["gpu"]["devices"]],
          "pair_overhead", [d.get("event_overhead_ns") for d in r["gpu"]["devices"]])
PY
