#!/bin/bash
# Python frames on a GPU machine, from the repository root, with the static gpuscope carried
# in .output/static: GPT-2 training, every launch's stack taken, in both planes: the share of
# launch stacks with a Python frame, those of threads without Python (autograd's engine) that
# took the waiting thread's frames, and the script line they end in (loss.backward()'s);
# then the kernel walker's own cost per launch (bench/pywalk_cost.sh, on the real driver).
# Results in $OUT (machine.txt, log.txt, gpt2-{kernel,inject}-frames.json, pywalk.json).
set -u
OUT=${OUT:-/tmp/gpuscope-walk}
. bench/gpu_env.sh
w=$(mktemp -d)
for plane in kernel inject; do
	opt=()
	[ "$plane" = inject ] && opt=(--inject)
	"$GS" run -q "${opt[@]}" --stacks 1 -o "$w/$plane.gsr" --json="$w/$plane.json" -- \
		python3 tests/gpu/py_frames.py gpt2 10 >"$w/$plane.out" 2>&1
	echo "gpt2 $plane rc=$?" >>"$OUT/log.txt"
	python3 tests/gpu/py_frames.py check "$w/$plane.gsr" "$w/$plane.json" \
		tests/gpu/py_frames.py >"$OUT/gpt2-$plane-frames.json" 2>>"$OUT/log.txt"
done
GPUSCOPE="$GS" OUT="$w/pywalk" ROUNDS="$ROUNDS" bash bench/pywalk_cost.sh >>"$OUT/log.txt" 2>&1
cp "$w/pywalk/pywalk.json" "$OUT/pywalk.json" 2>>"$OUT/log.txt"
