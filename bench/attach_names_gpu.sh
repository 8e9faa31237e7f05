#!/bin/bash
# Kernel names at attach (src/source/kernel_names.c): each workload of bench/attach_ab.py
# trained in a process of its own; gpuscope attaches once its steps run (every kernel was
# looked up before), for 4 s; then the same workload under `gpuscope run` from its start
# (every name looked up in view). Per workload: the attached report's kernels, those unnamed,
# those named from the driver, what -v counted; and against the run: attached names the run
# does not have, and each name's share of the launches, attached over run (a name given to
# the wrong kernel would move its share). From the repository root on the GPU machine;
# root. Writes $OUT/names.md.
set -u
OUT=${OUT:-/tmp/gpuscope-names}
. bench/gpu_env.sh
ready() { # (the work's log has its "ready" line and three windows; at most 180 s)
	for _ in $(seq 1800); do
		[ -e "$1" ] && [ "$(wc -l <"$1")" -ge 4 ] && return 0
		sleep 0.1
	done
	return 1
}
for w in ${WORKLOADS:-resnet50 gpt2 cupy}; do
	python3 bench/attach_ab.py work "$w" "$OUT/$w-a.log" "$OUT/$w-a.stop" &
	p=$!
	ready "$OUT/$w-a.log" || echo "$w: not ready" >&2
	timeout 60 "$GS" attach -p $p -q -v -d 4 --json="$OUT/$w-attach.json" 2>"$OUT/$w-attach.err"
	touch "$OUT/$w-a.stop"
	wait $p
	timeout 300 "$GS" run -q -v --json="$OUT/$w-run.json" -- \
		python3 bench/attach_ab.py work "$w" "$OUT/$w-r.log" "$OUT/$w-r.stop" 2>"$OUT/$w-run.err" &
	p=$!
	ready "$OUT/$w-r.log" && sleep 3
	touch "$OUT/$w-r.stop"
	wait $p
done
python3 - "$OUT" ${WORKLOADS:-resnet50 gpt2 cupy} >"$OUT/names.md" <<'PY'
import json, sys
out = sys.argv[1]
print("| workload | attached: kernels, launches | unnamed (launches) | named from the driver |"
      " attached names not in the run's | share attached / run: min, median, max | -v |")
print("|---|---|---|---|---|---|---|")
for w in sys.argv[2:]:
    a = json.load(open("%s/%s-attach.json" % (out, w)))["kernels"]
    r = json.load(open("%s/%s-run.json" % (out, w)))["kernels"]
    said = " ".join(l.split("debug: ", 1)[1].strip() for l in open("%s/%s-attach.err" % (out, w))
                    if "lookups were not seen" in l or "no longer read" in l
                    or "cuKernelGetFunction not probed" in l)
    run = {k["name"]: k["launches"] / r["launches"] for k in r["list"] if k["name"]}
    named = [k for k in a["list"] if k["name"]]
    share = sorted(k["launches"] / a["launches"] / run[k["name"]] for k in named
                   if k["name"] in run)
    print("| %s | %d, %d | %d (%d) | %d | %s | %s | %s |" % (
        w, len(a["list"]), a["launches"], a["unnamed"], a["unnamed_launches"],
        a["named_from_driver"], sorted(k["name"] for k in named if k["name"] not in run),
        "%.2f, %.2f, %.2f" % (share[0], share[len(share) // 2], share[-1]) if share else "-",
        said))
PY
cat "$OUT/names.md"
