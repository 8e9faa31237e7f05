#!/bin/bash
# Issue 20's steps and exceptions on a GPU machine, from the repository root, with the static
# gpuscope carried in .output/static:
# - steps: GPT-2 training steps under both planes and with --step=train_step, ResNet-18 steps
#   fed by a DataLoader with one slow batch; what gpuscope found (count, parts, slow steps)
#   per run in $OUT/steps.jsonl;
# - the agent's step histogram: gpuscope exporter while GPT-2 trains ($OUT/misc.txt, with the
#   reports' steps and exceptions, and the interpreter's symbols);
# - Python exceptions of PyTorch: caught out-of-memory errors, caught ValueErrors, an
#   uncaught RuntimeError, both planes ($OUT/exc-*.json); the interpreter's symbols;
# - what a raise costs: ns per raise/catch, untraced, traced without Python probes, traced
#   (ABAB..., $ROUNDS rounds, $OUT/raises.jsonl).
set -u
OUT=${OUT:-/tmp/gpuscope-steps}
. bench/gpu_env.sh
w=$(mktemp -d)
one() { # tag, gpuscope options..., -- workload arguments
	local tag=$1
	shift
	"$GS" run -q --json="$w/$tag.json" "$@" >"$w/$tag.out" 2>&1
	echo "{\"run\": \"$tag\", \"rc\": $?, \"program\": $(tail -1 "$w/$tag.out" | grep '^{' || echo null), \"found\": $(python3 tests/gpu/py_frames.py steps "$w/$tag.json" 2>/dev/null || echo null)}" >>"$OUT/steps.jsonl"
}
one gpt2-uprobes -- python3 tests/gpu/py_frames.py gpt2 20
one gpt2-inject --inject -- python3 tests/gpu/py_frames.py gpt2 20
one gpt2-step-func --step=train_step -- python3 tests/gpu/py_frames.py gpt2 20
one gpt2-step-func-inject --inject --step=train_step -- python3 tests/gpu/py_frames.py gpt2 20
one resnet-inject --inject -- python3 tests/gpu/py_frames.py resnet 12 6
one resnet-uprobes -- python3 tests/gpu/py_frames.py resnet 12 6
{
	echo "== resnet-inject: the report's steps"
	sed -n '/^Steps/,/^$/p' "$w/resnet-inject.out"
	echo "== gpt2-inject: the report's steps"
	sed -n '/^Steps/,/^$/p' "$w/gpt2-inject.out"
} >>"$OUT/misc.txt"

# The agent: GPT-2's steps as a histogram per process.
"$GS" exporter --listen 127.0.0.1:9499 --no-nvml >"$w/exporter.log" 2>&1 &
agent=$!
sleep 3
echo "== exporter: GPT-2 $(python3 tests/gpu/py_frames.py gpt2 40 2>>"$OUT/log.txt")" >>"$OUT/misc.txt"
sleep 2
python3 - >>"$OUT/misc.txt" 2>&1 <<'PY'
import urllib.request
text = urllib.request.urlopen("http://127.0.0.1:9499/metrics", timeout=10).read().decode()
print("\n".join(l for l in text.splitlines() if "step_duration" in l))
PY
kill "$agent"
wait "$agent"
echo "exporter rc=$?" >>"$OUT/log.txt"
tail -3 "$w/exporter.log" >>"$OUT/log.txt"

# Exceptions.
for plane in uprobes inject; do
	opt=()
	[ "$plane" = inject ] && opt=(--inject)
	"$GS" run -q --py-exceptions "${opt[@]}" --json="$w/exc.json" -- python3 tests/gpu/py_frames.py exc 3 \
		>"$w/exc.out" 2>&1
	echo "exc $plane rc=$?" >>"$OUT/log.txt"
	python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["python_exceptions"], indent=1))' \
		"$w/exc.json" >"$OUT/exc-$plane.json" 2>>"$OUT/log.txt"
	{
		echo "== exceptions, $plane: the report's"
		sed -n '/^Python exceptions/,/^$/p' "$w/exc.out" | head -30
	} >>"$OUT/misc.txt"
done
for f in $(python3 -c 'import sys, sysconfig; print(sys.executable, sysconfig.get_config_var("LIBDIR") + "/" + (sysconfig.get_config_var("LDLIBRARY") or ""))'); do
	echo "$f: $(nm -D "$(readlink -f "$f")" 2>/dev/null | grep -cE ' T (_PyErr_SetObject|_PyErr_Display|PyErr_Display)$') of 3: $(nm -D "$(readlink -f "$f")" 2>/dev/null | grep -E ' T (_PyErr_SetObject|_PyErr_Display|PyErr_Display)$' | tr '\n' ' ')" >>"$OUT/misc.txt"
done

# A raise's cost, interleaved: untraced, traced with no Python probes, traced.
for i in $(seq "$ROUNDS"); do
	for mode in untraced noprobes traced; do
		case $mode in
		untraced) r=$(python3 tests/gpu/py_frames.py raises 200000 2>>"$OUT/log.txt" | tail -1) ;;
		noprobes) r=$(GPUSCOPE_NO_PYFRAMES=1 "$GS" run -q -- python3 tests/gpu/py_frames.py raises 200000 2>/dev/null | tail -1) ;;
		traced) r=$("$GS" run -q --py-exceptions -- python3 tests/gpu/py_frames.py raises 200000 2>/dev/null | tail -1) ;;
		esac
		echo "{\"round\": $i, \"mode\": \"$mode\", \"result\": ${r:-null}}" >>"$OUT/raises.jsonl"
	done
done
rm -rf "$w"
