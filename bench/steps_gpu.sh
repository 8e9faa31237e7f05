#!/bin/bash
# Issue 20's steps on a GPU machine, from the repository root, with the static gpuscope
# carried in .output/static: GPT-2 training steps under both planes, ResNet-18 steps fed
# by a DataLoader with one slow batch (--inject). What gpuscope found, per run, in
# $OUT/steps.jsonl.
set -u
OUT=${OUT:-/tmp/gpuscope-steps}
GS=.output/static/gpuscope
mkdir -p "$OUT"
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
w=$(mktemp -d)
one() { # tag, gpuscope options..., -- workload arguments
	local tag=$1
	shift
	"$GS" run -q --json="$w/$tag.json" "$@" >"$w/$tag.out" 2>&1
	echo "{\"run\": \"$tag\", \"rc\": $?, \"program\": $(tail -1 "$w/$tag.out" | grep '^{' || echo null), \"found\": $(python3 tests/gpu/py_frames.py steps "$w/$tag.json" 2>/dev/null || echo null)}" >>"$OUT/steps.jsonl"
}
one gpt2-uprobes -- python3 tests/gpu/py_frames.py gpt2 20
one gpt2-inject --inject -- python3 tests/gpu/py_frames.py gpt2 20
one resnet-inject --inject -- python3 tests/gpu/py_frames.py resnet 12 6
one resnet-uprobes -- python3 tests/gpu/py_frames.py resnet 12 6
tail -5 "$w/resnet-inject.out" >"$OUT/resnet-inject.tail"
rm -rf "$w"
