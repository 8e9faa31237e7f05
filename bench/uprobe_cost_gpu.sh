#!/bin/bash
# Where the kernel plane's time a launch goes, on a GPU machine (issue 22): the first bytes of
# the driver's launch entry points (an instruction the kernel cannot emulate is stepped out
# of line: a second trap), and the BPF programs' own time per launch from the kernel's
# statistics (kernel.bpf_stats_enabled), this build (launch_session: one program, entry and
# return) and BASE's (call_enter + ret_launch), over N launches of bench/pywalk.py (depth 1,
# default stacks), ROUNDS rounds interleaved. From the repository root, carrying
# .output/static and BASE's build. Root.
#   OUT=/tmp/uprobe ROUNDS=5 BASE=.output/base-static/gpuscope bash bench/uprobe_cost_gpu.sh
# Writes $OUT/entry_bytes.txt and $OUT/progs.jsonl, and prints a table.
set -u
. bench/pywalk_run.sh
OUT=${OUT:-/tmp/uprobe-cost}
. bench/gpu_env.sh
BASE=${BASE:-.output/base-static/gpuscope}
N=${N:-20000}
python3 - >"$OUT/entry_bytes.txt" 2>&1 <<'PY'
import ctypes
lib = ctypes.CDLL("libcuda.so.1")
for name in ("cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuGraphLaunch",
             "cuEventRecord", "cuMemcpyHtoDAsync_v2", "cuStreamSynchronize"):
    try:
        addr = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except AttributeError:
        print(name, "absent")
        continue
    print(name, hex(addr), ctypes.string_at(addr, 24).hex(" "))
PY
old=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled=$old' EXIT
sysctl -qw kernel.bpf_stats_enabled=1
: >"$OUT/progs.jsonl"
for ((i = 0; i < ROUNDS; i++)); do
	for b in new base; do
		bin=$GS
		progs="launch_session"
		[ "$b" = base ] && bin=$BASE && progs="call_enter ret_launch"
		pywalk_run "$bin"
		for p in $progs; do
			python3 bench/bpfstats.py "$p" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(json.dumps({"build": sys.argv[1], "prog": sys.argv[2], "round": int(sys.argv[3]),
                  "runs": s["runs"], "ns": s["ns"], "launches": int(sys.argv[4])}))' \
				"$b" "$p" "$i" "$N" >>"$OUT/progs.jsonl"
		done
		wait "$pid"
	done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/progs.jsonl")]
t = {}
for r in rows:
    t.setdefault((r["build"], r["prog"]), []).append(
        (r["ns"] / max(r["launches"], 1), r["runs"] / max(r["launches"], 1)))
print("| build | program | ns per launch, median (min-max) | runs per launch |")
print("|---|---|---|---|")
for (b, p), v in sorted(t.items()):
    ns = [x[0] for x in v]
    print("| %s | %s | %.0f (%.0f-%.0f) | %.2f |" % (b, p, statistics.median(ns), min(ns),
                                                  max(ns), statistics.median(x[1] for x in v)))
PY
