#!/bin/bash
# Issue 18's GPU check, on a GPU machine, from the repository root, with the static builds
# carried in .output/static (this commit) and .output/base-static (the code before the
# restructuring): the GPU suite on both planes, the demo, and the JSON, Perfetto and
# Chrome outputs of a live run against its replay on real PyTorch work. Results in $OUT.
set -u
OUT=${OUT:-/tmp/gpuscope-restructure}
GS=.output/static/gpuscope
mkdir -p "$OUT"
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
work=$(mktemp -d)

# The suite (tests/gpu/run.sh): kernel probes and the in-process plane against CUPTI.
OUT=$work/suite GPUSCOPE=$GS tests/gpu/run.sh >"$OUT/suite.log" 2>&1
echo "suite rc=$?" >>"$OUT/suite.log"
cp "$work/suite/machine.txt" "$OUT/machine.txt"
cp "$work/suite/gpu/gpu-results.json" "$OUT/gpu-results-uprobe.json"
cp "$work/suite/gpu-inject/gpu-results.json" "$OUT/gpu-results-inject.json"

# The demo, on the real driver.
"$GS" run -- .output/demo/vector_add >"$OUT/demo.txt" 2>&1
echo "demo rc=$?" >>"$OUT/demo.txt"

# A live run and its replay, both planes, with the host facts of this machine.
{
	for plane in uprobe inject; do
		opts=()
		[ "$plane" = inject ] && opts=(--inject)
		for w in matmul nccl; do
			d=$work/$plane-$w
			mkdir -p "$d"
			"$GS" run -q "${opts[@]}" -o "$d/run.gsrec" --json="$d/live.json" \
				--perfetto "$d/live.pftrace" --chrome "$d/live-chrome.json" \
				-- python3 tests/gpu/torch_work.py "$w" 50 >/dev/null 2>"$d/err"
			"$GS" report --json="$d/replay.json" --perfetto "$d/replay.pftrace" \
				--chrome "$d/replay-chrome.json" "$d/run.gsrec" 2>>"$d/err"
			same=yes
			cmp -s "$d/live.json" "$d/replay.json" || same="no (json)"
			cmp -s "$d/live.pftrace" "$d/replay.pftrace" || same="$same no (perfetto)"
			cmp -s "$d/live-chrome.json" "$d/replay-chrome.json" || same="$same no (chrome)"
			echo "$plane $w: live and replay equal: $same"
			python3 - "$d/live.json" <<-'EOF'
				import json, sys
				r = json.load(open(sys.argv[1]))
				h = r["host"]
				print("  host:", h["hostname"], h["kernel"], h["cpu"], h["cpus"], "CPUs",
				      h["nvidia_driver"], [(g["index"], g["name"], g["pci_bus_id"])
				                          for g in h["gpus"]])
				t = [p for p in r["processes"] if p["pid"] == r["session"]["target_pid"]][0]
				print("  target:", t["command_line"], "cgroup", t["cgroup"],
				      "launches", r["kernels"]["launches"], "events", r["session"]["events"])
			EOF
			cat "$d/err"
		done
	done
} >"$OUT/replay.txt" 2>&1
rm -rf "$work"
