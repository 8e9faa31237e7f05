#!/bin/bash
# What Python frames and exceptions cost at the default sampling (--stacks 64), on a GPU
# machine, from the repository root, with the static gpuscope carried in .output/static:
# GPT-2 training step time (median of a run's steps after 3), untraced and under both planes
# with native stacks only (GPUSCOPE_NO_PYFRAMES=1), Python frames without exceptions
# (GPUSCOPE_NO_PYEXC=1) and both (--py-exceptions: every raise probed), interleaved
# (ABAB..., $ROUNDS rounds): $OUT/cost.jsonl.
# And how many exceptions GPT-2's steps raise: $OUT/gpt2-exceptions.json; what a raise costs:
# ns per raise/catch untraced, traced with no Python probes, traced ($OUT/raises.jsonl).
# RAISES=0 leaves the exceptions out; PIN="taskset -c 2-9" runs every process (gpuscope with
# its workload) on those CPUs, to narrow the spread between processes.
set -u
OUT=${OUT:-/tmp/gpuscope-pycost}
STEPS=${STEPS:-60}
MODES=${MODES:-untraced uprobes-native uprobes-frames uprobes-python inject-native inject-frames inject-python}
RAISES=${RAISES:-1}
read -ra pin <<<"${PIN:-}"
. bench/gpu_env.sh
w=$(mktemp -d)
if [ "$RAISES" = 1 ]; then
"$GS" run -q --py-exceptions --json="$w/g.json" -- python3 tests/gpu/py_frames.py gpt2 "$STEPS" \
	>/dev/null 2>&1
python3 -c 'import json,sys; x=json.load(open(sys.argv[1]))["python_exceptions"]; x["top"]=x["top"][:12]; x["findings"]=len(x["findings"]); print(json.dumps(x, indent=1))' \
	"$w/g.json" >"$OUT/gpt2-exceptions.json"
rm -rf "$w"
for i in $(seq "$ROUNDS"); do
	for mode in untraced noprobes traced; do
		case $mode in
		untraced) cmd=(python3) ;;
		noprobes) cmd=(env GPUSCOPE_NO_PYFRAMES=1 "$GS" run -q -- python3) ;;
		traced) cmd=("$GS" run -q --py-exceptions -- python3) ;;
		esac
		r=$("${cmd[@]}" tests/gpu/py_frames.py raises 200000 2>/dev/null | tail -1)
		echo "{\"round\": $i, \"mode\": \"$mode\", \"result\": ${r:-null}}" >>"$OUT/raises.jsonl"
	done
done
fi
# (The order of the modes turns by one each round: a mode's place in the round must not
# bias it. On 2026-11-26 the native-stack runs, always first after the untraced one, read
# 20-30% slower than the runs with Python frames.)
read -ra modes <<<"$MODES"
for i in $(seq "$ROUNDS"); do
	for j in "${!modes[@]}"; do
		mode=${modes[$(((i + j) % ${#modes[@]}))]}
		case $mode in
		untraced) cmd=(python3) ;;
		uprobes-*) cmd=("$GS" run -q -- python3) ;;
		inject-*) cmd=("$GS" run -q --inject -- python3) ;;
		esac
		case $mode in
		*-native) env=(GPUSCOPE_NO_PYFRAMES=1) ;;
		*-frames) env=(GPUSCOPE_NO_PYEXC=1) ;;
		*) env=() ;;
		esac
		# (-python: every raise probed too)
		[ "${mode#*-}" = python ] && cmd=("${cmd[@]:0:2}" --py-exceptions "${cmd[@]:2}")
		r=$(env "${env[@]}" "${pin[@]}" "${cmd[@]}" tests/gpu/py_frames.py gpt2 "$STEPS" 2>/dev/null | tail -1)
		echo "{\"round\": $i, \"mode\": \"$mode\", \"result\": ${r:-null}}" >>"$OUT/cost.jsonl"
	done
done
