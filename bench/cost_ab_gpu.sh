#!/bin/bash
# Issue 22's cost table, every figure from inside one process (between processes the lent
# GPU machines vary 10-35%): bench/inject_ab.sh for the in-process plane's modes ("all":
# every kernel by CUPTI, the default; "pairs": by event pairs), the PyTorch profiler (in
# processes of its own: it takes CUPTI for good) and "pass2", a second untraced window a
# round, whose ratio to "pass" is the noise floor a cost is read against; bench/attach_ab.py
# for the kernel uprobes (attached and detached in turn). From the repository root on the
# GPU machine, carrying .output/static; root.
#   OUT=/tmp/cost PART=loops bash bench/cost_ab_gpu.sh   # tiny ops, CuPy, the C loop (~7 min)
#   OUT=/tmp/cost PART=steps bash bench/cost_ab_gpu.sh   # ResNet-50, GPT-2 (~8 min)
# ROUNDS (default 41 for the loops, 21 for the steps): a loop's window is 20,000 launches
# (80-200 ms), a step's 8 steps; until 2026-11-30 the loops ran 7 rounds, whose medians
# moved by more than the targets' margins between runs (pass2 against pass: 0.72-1.55x a
# window). Writes $OUT/cost.txt: per workload and mode, the median over processes of each
# process's median ratio to its untraced ("pass") windows, the time added per iteration,
# and the same ratio of the loop thread's CPU time (what the guest's host stole is not in
# it).
set -u
OUT=${OUT:-/tmp/gpuscope-cost-ab}
PART=${PART:-loops}
if [ "$PART" = steps ]; then
	ROUNDS=${ROUNDS:-21}
else
	ROUNDS=${ROUNDS:-41}
fi
. bench/gpu_env.sh
export ROUNDS
if [ "$PART" = steps ]; then
	for w in resnet50 gpt2; do
		OUT=$OUT/inject-$w WORKLOADS=$w MODES=pass,pass2,off,10,all,profiler PROCS=1 \
			timeout 200 bash bench/inject_ab.sh >/dev/null 2>&1
	done
	for w in resnet50 gpt2; do
		mkdir -p "$OUT/uprobes"
		timeout 100 python3 bench/attach_ab.py run "$GS" "$OUT/uprobes" $w 7 3 \
			>"$OUT/uprobes/attach-$w.txt" 2>"$OUT/uprobes/stderr-$w.txt"
	done
else
	OUT=$OUT/inject WORKLOADS="tinyops cupy" MODES=pass,pass2,off,10,pairs,all,profiler PROCS=1 \
		timeout 260 bash bench/inject_ab.sh >/dev/null 2>&1
	OUT=$OUT/cloop WORKLOADS=cloop MODES=pass,pass2,off,10,pairs,all PROCS=1 \
		timeout 60 bash bench/inject_ab.sh >/dev/null 2>&1
	mkdir -p "$OUT/uprobes"
	timeout 130 python3 bench/attach_ab.py run "$GS" "$OUT/uprobes" tinyops 13 3 \
		>"$OUT/uprobes/attach-tinyops.txt" 2>"$OUT/uprobes/stderr-tinyops.txt"
fi
rm -f "$OUT/uprobes"/*.log
python3 - "$OUT" <<'PY' | tee "$OUT/cost.txt"
import glob, json, math, os, statistics, sys
out = sys.argv[1]
rows = {}  # (workload, mode) -> [(ratio, added ns)] one per process
for sub in sorted(set(os.listdir(out)) - {"uprobes"}):
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
            both = [(r[mode], r["pass"]) for r in by_round.values() if mode in r and "pass" in r]
            cpu = [(r[mode], r["pass"]) for r in cpu_round.values() if mode in r and "pass" in r]
            if both:
                rows.setdefault((d["workload"], mode), []).append(
                    (statistics.median(a / b for a, b in both),
                     statistics.median(1e9 * (a - b) for a, b in both), len(both),
                     statistics.median(a / b for a, b in cpu) if cpu else None,
                     [a / b for a, b in both]))
for att in glob.glob(os.path.join(out, "uprobes", "attach-*.json")):
    a = json.load(open(att))
    w = os.path.basename(att)[len("attach-"):-len(".json")]
    rows[(w, "kernel uprobes")] = [(a["ratio_median"], None, len(a["rounds"]),
                                    a.get("cpu_ratio_median"),
                                    [r["on_s"] / r["off_s"] for r in a["rounds"]])]
# Issue 22's targets (median ratio to untraced), and whether this run decides them: met
# where the median's 95% confidence interval (order statistics of every round's ratio) is
# at or below the target, not met where it is above, undecided where it holds the target.
TARGETS = {"tinyops": {"kernel uprobes": 1.10, "off": 1.03, "10": 1.05, "all": 1.25}}
for w in ("resnet50", "gpt2"):
    TARGETS[w] = {"kernel uprobes": 1.005, "off": 1.002, "10": 1.005, "all": 1.02}


def median_ci(v):
    v = sorted(v)
    n, half = len(v), 1.96 * math.sqrt(len(v)) / 2
    return v[max(0, int(n / 2 - half))], v[min(n - 1, int(math.ceil(n / 2 + half)))]


print("| workload | mode | ratio to untraced: median (95% CI; rounds' min-max) "
      "| added per iteration | rounds | the thread's CPU time against untraced "
      "| target: this run |")
print("|---|---|---|---|---|---|---|")
order = ["pass2", "kernel uprobes", "off", "10", "pairs", "all", "profiler"]
for (w, m) in sorted(rows, key=lambda k: (k[0], order.index(k[1]) if k[1] in order else 9)):
    v = rows[(w, m)]
    added = [x[1] for x in v if x[1] is not None]
    cpu = [x[3] for x in v if x[3] is not None]
    every = [r for x in v for r in x[4]]
    t = TARGETS.get(w, {}).get(m)
    lo, hi = median_ci(every) if len(every) > 2 else (min(every), max(every))
    verdict = "" if t is None else "<= %.3fx: %s" % (
        t, "met" if hi <= t else "not met" if lo > t else "undecided")
    print("| %s | %s | %.3fx (%.3f-%.3f; %.3f-%.3f) | %s | %d | %s | %s |" % (
        w, m, statistics.median(x[0] for x in v), lo, hi, min(every), max(every),
        "%+.0f ns" % statistics.median(added) if added else "", sum(x[2] for x in v),
        "%.3fx" % statistics.median(cpu) if cpu else "", verdict))
PY
