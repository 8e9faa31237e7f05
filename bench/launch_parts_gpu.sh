#!/bin/bash
# Where the kernel plane's launch program spends its time (issue 22): builds of gpuscope made
# with bench/launch_parts.patch applied, STOPK set to where launch_entered returns (0: at
# once; 1: after the per-CPU count and the traced-process check; 3: after the tail-call
# check and the thread's storage; 4: after the call's state is read from the user stack; 99:
# the whole program), each run over N launches of bench/pywalk.py (depth 1, default
# options), the program's time per run from the kernel's BPF statistics
# (kernel.bpf_stats_enabled), the builds interleaved, ROUNDS rounds. Root. The builds:
#   git apply bench/launch_parts.patch
#   for k in 0 1 3 4 99; do sed -i "s/^#define STOPK .*/#define STOPK $k/" src/bpf/cuda.bpf.c
#       make static && cp .output/static/gpuscope .output/static/var/gs.$k; done
#   git checkout src/bpf/cuda.bpf.c
# Then, from the repository root (on a machine without a GPU: LD_LIBRARY_PATH=.output/fakes):
#   OUT=/tmp/parts VARS=".output/static/var/gs.0 ..." ROUNDS=5 bash bench/launch_parts_gpu.sh
# Writes $OUT/parts.jsonl and prints a table.
set -u
. bench/pywalk_run.sh
OUT=${OUT:-/tmp/gpuscope-parts}
ROUNDS=${ROUNDS:-5}
N=${N:-20000}
mkdir -p "$OUT"
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
old=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled=$old' EXIT
sysctl -qw kernel.bpf_stats_enabled=1
: >"$OUT/parts.jsonl"
read -ra vars <<<"$VARS"
for ((i = 0; i < ROUNDS; i++)); do
	k=$((i % ${#vars[@]}))
	for bin in "${vars[@]:k}" "${vars[@]:0:k}"; do
		pywalk_run "$bin"
		python3 bench/bpfstats.py launch_session | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(json.dumps({"build": sys.argv[1], "round": int(sys.argv[2]), "runs": s["runs"],
                  "ns": s["ns"]}))' "$(basename "$bin")" "$i" >>"$OUT/parts.jsonl"
		wait "$pid"
	done
done
python3 - "$OUT/parts.jsonl" <<'PY'
import json, statistics, sys
t = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["runs"]:
        t.setdefault(r["build"], []).append(r["ns"] / r["runs"])
print("| build | launch_session ns a run, median (min-max) | rounds |")
print("|---|---|---|")
for b, v in sorted(t.items(), key=lambda kv: int(kv[0].rsplit(".", 1)[1])):
    print("| %s | %.0f (%.0f-%.0f) | %d |" % (b, statistics.median(v), min(v), max(v), len(v)))
PY
