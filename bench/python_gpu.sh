#!/bin/bash
# Issue 20's GPU runs, on a GPU machine, from the repository root, with the static gpuscope
# carried in .output/static: Python frames in GPT-2 training steps and in a leak kept in a
# Python list (--inject), and what the frames cost: GPT-2 step time with stacks at the
# default sampling, Python frames on and off (GPUSCOPE_NO_PYFRAMES), interleaved. $OUT.
set -u
OUT=${OUT:-/tmp/gpuscope-python}
. bench/gpu_env.sh
w=$(mktemp -d)

# Every launch's stack: the share that carries a Python frame.
"$GS" run -q --inject --stacks 1 -o "$w/gpt2.gsr" --json="$w/gpt2.json" \
	--folded "$w/gpt2.folded" -- python3 tests/gpu/py_frames.py gpt2 10 >"$w/gpt2.out" 2>&1
echo "gpt2 rc=$?" >>"$OUT/log.txt"
python3 tests/gpu/py_frames.py check "$w/gpt2.gsr" "$w/gpt2.json" tests/gpu/py_frames.py \
	>"$OUT/gpt2-frames.json" 2>>"$OUT/log.txt"
sort -t' ' -k2 -nr "$w/gpt2.folded" | head -40 >"$OUT/gpt2-top.folded"

# The leak: each tensor its own driver allocation, so the site is the Python line.
PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$GS" run -q --inject -o "$w/leak.gsr" \
	--json="$w/leak.json" -- python3 tests/gpu/py_frames.py leak 300 >>"$OUT/log.txt" 2>&1
echo "leak rc=$?" >>"$OUT/log.txt"
python3 tests/gpu/py_frames.py check "$w/leak.gsr" "$w/leak.json" tests/gpu/py_frames.py \
	>"$OUT/leak.json" 2>>"$OUT/log.txt"

# Cost: ABAB..., Python frames off (A) and on (B), with the stack of every launch taken
# (--stacks 1: 64 times the default's walks, so that their cost stands out of the noise;
# the default's is that over 64, plus allocations, which the caching allocator makes rare).
for i in $(seq "$ROUNDS"); do
	for mode in off on; do
		env=()
		[ "$mode" = off ] && env=(GPUSCOPE_NO_PYFRAMES=1)
		r=$(env "${env[@]}" "$GS" run -q --inject --stacks 1 -- python3 tests/gpu/py_frames.py \
			gpt2 60 2>>"$OUT/log.txt" | tail -1)
		echo "{\"round\": $i, \"python_frames\": \"$mode\", \"result\": $r}" >>"$OUT/cost.jsonl"
	done
done

# The layouts against this machine's CPython headers, where it has them.
inc=$(python3-config --includes 2>/dev/null || true)
if [ -n "$inc" ] && gcc -Isrc $inc tests/unit/pylayout.c -o "$w/pylayout" 2>"$OUT/pylayout.txt"; then
	"$w/pylayout" >>"$OUT/pylayout.txt" 2>&1
else
	echo "no CPython headers here ($inc)" >>"$OUT/pylayout.txt"
fi
rm -rf "$w"
