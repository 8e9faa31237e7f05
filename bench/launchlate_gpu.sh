#!/bin/bash
# Host programs beside device programs (issue 21): tests/bpf/bpftime_launchlate.bpf.c, written
# as bpftime's launchlate is (a uprobe on the launch writing the host's time into an ARRAY map,
# a kprobe on vectorAdd binning the GPU's start minus it into a GPU_ARRAY_MAP histogram), plus
# a GPU_KERNEL_SHARED_ARRAY_MAP (1504) both sides use: the launch calls counted by the uprobe
# and the uretprobe, read by the kernel. On bpftime's vec_add (bench/bpftime/vec_add.cu, built
# as bpftime builds it): output with and without the probe, the maps as JSON, and what they
# must hold (histogram total = threads x launches; host calls = launches on both sides). From
# the repository root on the GPU machine, carrying .output/static and .output/bpftime
# (bash bench/launchlate_gpu.sh prepare, here). Results in $OUT: machine.txt, late.txt,
# late.json, check.json; then the same with N=1000 launches of one block (latency bins).
set -u
if [ "${1:-}" = prepare ]; then
	mkdir -p .output/bpftime
	clang -O2 -g -target bpf -mcpu=v3 -c tests/bpf/bpftime_launchlate.bpf.c \
		-o .output/bpftime/bpftime_launchlate.bpf.o
	exit
fi
OUT=${OUT:-/tmp/gpuscope-device}
. bench/gpu_env.sh
w=$(mktemp -d)
nvcc -O2 -gencode 'arch=compute_90,code=[sm_90,compute_90]' -cudart shared \
	bench/bpftime/vec_add.cu -o "$w/vec_add" >"$OUT/late.txt" 2>&1
check() { # LAUNCHES GRID BLOCK JSON PLAIN PROBED
	python3 - "$@" <<'PY'
import json, sys
launches, grid, block = map(int, sys.argv[1:4])
js, plain, probed = json.load(open(sys.argv[4])), open(sys.argv[5]).read(), open(sys.argv[6]).read()
m = {x["name"]: x for x in js["maps"]}
def vals(name):
    c = m[name]["contexts"]
    return {e["key"]: e["value"] for e in c[0]["entries"]} if c else {}
hist, calls, seen, late = vals("time_histogram"), vals("host_calls"), vals("seen"), vals("last_uprobe_time")
labels = ["<100ns", "100ns-1us", "1-10us", "10-100us", "100us-1ms", "1-10ms", "10-100ms", "100ms-1s", "1-10s", ">10s"]
line = [l for l in plain.splitlines() if l.startswith("vec_add:")]
print(json.dumps({
    "threads_x_launches": launches * grid * block,
    "histogram_total": sum(hist.values()),
    "histogram": {labels[k]: v for k, v in sorted(hist.items())},
    "threads_seen": seen.get(0, 0),
    "uprobe_calls": calls.get(0, 0), "uretprobe_calls": calls.get(1, 0),
    "pid_written_by_uprobe": calls.get(2, 0),
    "largest_uprobe_count_a_kernel_saw": seen.get(1, 0),
    "last_uprobe_time_set": bool(late.get(0)),
    "host_print": [r["text"] for r in m["gs_print"]["records"] if r["device"] == -1],
    "ok_histogram": sum(hist.values()) == launches * grid * block == seen.get(0, 0),
    "ok_calls": calls.get(0) == calls.get(1) == launches and 1 <= seen.get(1, 0) <= launches,
    "ok_output": bool(line) and line[0] in probed,
}, indent=1))
PY
}
run() { # LAUNCHES GRID BLOCK TAG
	"$w/vec_add" "$1" "$2" "$3" >"$w/plain$4.out" 2>&1
	"$GS" probe --json "$OUT/late$4.json" .output/bpftime/bpftime_launchlate.bpf.o -- \
		"$w/vec_add" "$1" "$2" "$3" >"$OUT/late$4.txt" 2>&1
	echo "rc=$?" >>"$OUT/late$4.txt"
	check "$1" "$2" "$3" "$OUT/late$4.json" "$w/plain$4.out" "$OUT/late$4.txt" >"$OUT/check$4.json"
}
run 10 4 256 ""
run 1000 1 32 "-1000"
