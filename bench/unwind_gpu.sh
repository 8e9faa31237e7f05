#!/bin/bash
# The in-process plane's unwinder (src/inject/unwind.c) on the GPU machine. First every stack
# by the kept rules checked against glibc's backtrace() (GPUSCOPE_UNWIND_VERIFY; a stack every
# 8th launch, no rate) on each of VERIFY's workloads; then bench/inject_ab.sh's windows
# `pass`, `off` and `off+libgcc` (the same, its stacks by backtrace()) at the default stack
# rate, with the parts (PHASES=1): what a stack and its unwinding cost, each way
# ($OUT/ab/stacks.txt), and the stacks' counts (GPUSCOPE_INJECT_DEBUG, $OUT/ab/debug.txt).
# From the repository root, carrying .output/static:
#   OUT=/tmp/unwind ROUNDS=7 WORKLOADS="resnet50 gpt2" bash bench/unwind_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-unwind}
. bench/gpu_env.sh
for w in ${VERIFY-resnet50 gpt2 compile_ro}; do
	GPUSCOPE_UNWIND_VERIFY=1 GPUSCOPE_INJECT_DEBUG=1 \
		timeout 300 "$GS" run -q --inject --gpu-time=off --stacks 8 \
		--json=/dev/null -- python3 bench/workload.py "$w" >"$OUT/verify-$w.out" 2>&1
	grep "gpuscope-inject: stacks\|gpuscope-inject: unwind" "$OUT/verify-$w.out" | sed "s/^/$w: /"
done | tee "$OUT/verify.txt"
mkdir -p "$OUT/ab"
cp "$OUT/machine.txt" "$OUT/ab/"
OUT=$OUT/ab MODES=${MODES:-pass,off,off+libgcc} PHASES=1 PROCS=1 GPU_TIME=off \
	GPUSCOPE_INJECT_DEBUG=1 WORKLOADS=${WORKLOADS:-resnet50 gpt2 compile_ro tinyops} \
	bash bench/inject_ab.sh >/dev/null
python3 bench/phases_table.py --stacks "$OUT"/ab/ab-*.mode.phases | tee "$OUT/ab/stacks.txt"
# Window by window (the rules are worked out as new return addresses come: the first windows
# pay for them): us a stack unwinding, each mode's windows in order.
for f in "$OUT"/ab/ab-*.mode.phases; do
	awk -v f="${f##*/}" '$1 != "warmup" && $1 != "start" && $1 != "pass" {
		split($18, u, ":"); if (u[1] > 0) s[$1] = s[$1] sprintf(" %.1f", u[2] / u[1] / 1e3) }
		END { for (m in s) print f, m ":" s[m] }' "$f"
done | tee "$OUT/ab/windows.txt"
cat "$OUT/ab/iterations.txt"
grep -h "gpuscope-inject: stacks\|gpuscope python" "$OUT"/ab/*.err | sort | uniq -c |
	sort -rn | head -20 | tee "$OUT/ab/debug.txt"
