#!/bin/bash
# The kernel probes' Python walker on a GPU machine (issue 20), from the repository root,
# with the static gpuscope carried in .output/static: GPT-2 training steps with every
# launch's stack (no --inject), the share of the Python thread's launch stacks that carry a
# Python frame, and the Python frames most seen. $OUT.
set -u
OUT=${OUT:-/tmp/gpuscope-pykernel}
GS=.output/static/gpuscope
mkdir -p "$OUT"
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
w=$(mktemp -d)
"$GS" run -q --stacks 1 -o "$w/k.gsr" --json="$w/k.json" -- \
	python3 tests/gpu/py_frames.py gpt2 10 >"$w/k.out" 2>&1
echo "gpt2 rc=$?" >"$OUT/log.txt"
tail -3 "$w/k.out" >>"$OUT/log.txt"
python3 tests/gpu/py_frames.py check "$w/k.gsr" "$w/k.json" tests/gpu/py_frames.py \
	>"$OUT/gpt2-kernel-frames.json" 2>>"$OUT/log.txt"
rm -rf "$w"
