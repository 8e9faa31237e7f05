#!/bin/bash
# Follows against a pair each inside one process (issue 22): each of WORKLOADS
# (bench/workload.py's, default resnet50 and gpt2) run under `gpuscope run --inject` with
# GPUSCOPE_FOLLOW_AB_FILE, its timed windows alternating follows on and off (N windows,
# default 14), PROCS processes each (default 2). Between processes these machines vary
# 10-30%; between windows of one process much less. Prints, per workload, the ratio of each
# window without follows to the window with them before it: median (min-max). From the
# repository root, carrying .output/static.
#   OUT=/tmp/follow-ab bash bench/follow_ab.sh
set -u
OUT=${OUT:-/tmp/gpuscope-follow-ab}
. bench/gpu_env.sh
for w in ${WORKLOADS:-resnet50 gpt2}; do
	for ((i = 1; i <= ${PROCS:-2}; i++)); do
		f="$OUT/ab-$w-$i.flag"
		GPUSCOPE_FOLLOW_AB_FILE=$f "$GS" run -q --inject --json="$OUT/$w-$i-report.json" -- \
			python3 bench/workload.py "$w" --ab "$f" "${N:-14}" >"$OUT/$w-$i.json" 2>"$OUT/$w-$i.err"
		rm -f "$f"
	done
done
python3 - "$OUT" ${WORKLOADS:-resnet50 gpt2} <<'PY' | tee "$OUT/ab.txt"
import glob, json, os, statistics, sys
out = sys.argv[1]
print("| workload | process | window (follows) | without / with follows: median (min-max) | "
      "launches followed |")
print("|---|---|---|---|---|")
for w in sys.argv[2:]:
    for path in sorted(glob.glob(os.path.join(out, w + "-[0-9]*.json"))):
        if path.endswith("-report.json"):
            continue
        lines = [l for l in open(path) if l.startswith("{")]
        if not lines:
            print("| %s | %s | failed | | |" % (w, os.path.basename(path)))
            continue
        ab = json.loads(lines[-1])["ab"]
        ratios = [b[1] / a[1] for a, b in zip(ab[0::2], ab[1::2])
                  if a[0] == "follow" and b[0] == "nofollow"]
        rep = json.load(open(path.replace(".json", "-report.json")))
        g = [k.get("gpu") or {} for k in rep["kernels"]["list"]]
        timed = sum(x.get("timed", 0) for x in g)
        followed = sum(x.get("followed", 0) for x in g)
        print("| %s | %s | %.2f ms | %.4fx (%.4f-%.4f), %d pairs | %d of %d timed |" % (
            w, os.path.basename(path), 1e3 * statistics.median(a[1] for a in ab[0::2]),
            statistics.median(ratios), min(ratios), max(ratios), len(ratios), followed, timed))
PY
