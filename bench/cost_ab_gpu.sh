#!/bin/bash
# Issue 22's cost table in one device call, every figure from inside one process (between
# processes the lent GPU machines vary 10-35%): bench/inject_ab.sh for the in-process
# plane's modes ("all": every kernel by CUPTI, the default; "pairs": by event pairs) and
# the PyTorch profiler (tinyops, cupy; the CUDA C loop without the
# profiler; chains in a process started with them), bench/attach_ab.py for the kernel
# uprobes (attached and detached in turn). About 6 minutes. From the repository root on
# the GPU machine, carrying .output/static; root.
#   OUT=/tmp/cost ROUNDS=7 bash bench/cost_ab_gpu.sh
# Writes $OUT/cost.txt: per workload and mode, the median over processes of each process's
# median ratio to its untraced ("pass") windows, the time added per iteration, and the same
# ratio of the loop thread's CPU time (what the guest's host stole is not in it).
set -u
OUT=${OUT:-/tmp/gpuscope-cost-ab}
. bench/gpu_env.sh
export ROUNDS
OUT=$OUT/inject WORKLOADS="tinyops cupy" MODES=pass,off,10,pairs,all,profiler PROCS=1 \
	timeout 260 bash bench/inject_ab.sh >/dev/null 2>&1
OUT=$OUT/cloop WORKLOADS=cloop MODES=pass,off,10,pairs,all PROCS=1 \
	timeout 60 bash bench/inject_ab.sh >/dev/null 2>&1
OUT=$OUT/chained WORKLOADS=tinyops MODES=pass,pairs GPU_TIME=chained PROCS=1 \
	timeout 50 bash bench/inject_ab.sh >/dev/null 2>&1
mkdir -p "$OUT/uprobes"
timeout 120 python3 bench/attach_ab.py run "$GS" "$OUT/uprobes" tinyops "$ROUNDS" 5 \
	>"$OUT/uprobes/attach.txt" 2>"$OUT/uprobes/stderr.txt"
rm -f "$OUT/uprobes"/*.log
python3 - "$OUT" <<'PY' | tee "$OUT/cost.txt"
import glob, json, os, statistics, sys
out = sys.argv[1]
rows = {}  # (workload, mode) -> [(ratio, added ns)] one per process
for sub, relabel in (("inject", {}), ("cloop", {}), ("chained", {"pairs": "chained"})):
    for path in sorted(glob.glob(os.path.join(out, sub, "*-[0-9].json"))):
        lines = [l for l in open(path) if l.startswith("{")]
        if not lines:
            continue
        d = json.loads(lines[-1])
        by_round, cpu_round = {}, {}
        for mode, sec, r in d.get("ab", []):
            by_round.setdefault(r, {})[mode] = sec
        for mode, sec, r in d.get("ab_cpu", []):
            cpu_round.setdefault(r, {})[mode] = sec
        for mode in {m for r in by_round.values() for m in r} - {"pass"}:
            if relabel and mode not in relabel:
                continue
            both = [(r[mode], r["pass"]) for r in by_round.values() if mode in r and "pass" in r]
            cpu = [(r[mode], r["pass"]) for r in cpu_round.values() if mode in r and "pass" in r]
            if both:
                rows.setdefault((d["workload"], relabel.get(mode, mode)), []).append(
                    (statistics.median(a / b for a, b in both),
                     statistics.median(1e9 * (a - b) for a, b in both), len(both),
                     statistics.median(a / b for a, b in cpu) if cpu else None))
att = os.path.join(out, "uprobes", "attach-tinyops.json")
if os.path.exists(att):
    a = json.load(open(att))
    rows[("tinyops", "kernel uprobes")] = [(a["ratio_median"], None, len(a["rounds"]), None)]
print("| workload | mode | ratio to untraced (median) | added per iteration | rounds "
      "| the thread's CPU time against untraced |")
print("|---|---|---|---|---|---|")
order = ["kernel uprobes", "off", "10", "pairs", "all", "chained", "profiler"]
for (w, m) in sorted(rows, key=lambda k: (k[0], order.index(k[1]) if k[1] in order else 9)):
    v = rows[(w, m)]
    added = [x[1] for x in v if x[1] is not None]
    cpu = [x[3] for x in v if x[3] is not None]
    print("| %s | %s | %.3fx | %s | %d | %s |" % (
        w, m, statistics.median(x[0] for x in v),
        "%+.0f ns" % statistics.median(added) if added else "", sum(x[2] for x in v),
        "%.3fx" % statistics.median(cpu) if cpu else ""))
PY
