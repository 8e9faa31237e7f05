#!/bin/bash
# What Python frames cost at the default sampling (--stacks 64), on a GPU machine, from the
# repository root, with the static gpuscope carried in .output/static: GPT-2 training step
# time (median of a run's steps after 3), untraced and under both planes with Python frames
# off (GPUSCOPE_NO_PYFRAMES=1: native stacks only) and on, interleaved (ABAB..., $ROUNDS
# rounds). $OUT/cost.jsonl.
set -u
OUT=${OUT:-/tmp/gpuscope-pycost}
GS=.output/static/gpuscope
ROUNDS=${ROUNDS:-7}
STEPS=${STEPS:-60}
mkdir -p "$OUT"
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$OUT/machine.txt"
for i in $(seq "$ROUNDS"); do
	for mode in untraced uprobes-native uprobes-python inject-native inject-python; do
		case $mode in
		untraced) cmd=(python3) ;;
		uprobes-*) cmd=("$GS" run -q -- python3) ;;
		inject-*) cmd=("$GS" run -q --inject -- python3) ;;
		esac
		env=()
		[ "${mode#*-}" = native ] && env=(GPUSCOPE_NO_PYFRAMES=1)
		r=$(env "${env[@]}" "${cmd[@]}" tests/gpu/py_frames.py gpt2 "$STEPS" 2>/dev/null | tail -1)
		echo "{\"round\": $i, \"mode\": \"$mode\", \"result\": ${r:-null}}" >>"$OUT/cost.jsonl"
	done
done
