#!/bin/sh
# Issue 3's first-kernel question on a GPU machine (see bench/first_kernel.cu): each case
# untraced, then under gpuscope run --inject, whose GPU records (raw event pairs, flags) are
# printed next to the kernel's own view. Carry .output/static. Results under $OUT.
set -u
OUT=${OUT:-/tmp/first-out}
W=/tmp/first-work
mkdir -p "$OUT" "$W"
export PATH=$PATH:/usr/local/cuda/bin
GS=$(pwd)/.output/static/gpuscope
nvcc -O2 -arch=sm_90 -o $W/fk bench/first_kernel.cu || exit 1
for load in lazy EAGER; do
	for mode in fresh touched other; do
		if [ $load = EAGER ]; then export CUDA_MODULE_LOADING=EAGER; else unset CUDA_MODULE_LOADING; fi
		echo "== $load $mode untraced"
		$W/fk $mode
		echo "== $load $mode --inject"
		$GS run -q --inject -o $W/fk.gsrec -- $W/fk $mode > $W/fk.out 2> $W/fk.err
		cat $W/fk.out
		python3 - $W/fk.gsrec <<'PY'
import sys
sys.path.insert(0, "tests/integration")
import gsrec
recs = gsrec.gpu_records(sys.argv[1])
cal = [r["end"] - r["start"] for r in recs if r["kind"] == 5]
print("calibration (event pair overhead):", sorted(cal))
for r in sorted((r for r in recs if r["kind"] == 1), key=lambda r: r["start"]):
    print("gpu rec: raw %d ns, flags %d, start-call_end %d ns" % (
        r["end"] - r["start"], r["flags"], r["start"] - r["call_end"]))
PY
	done
done 2>&1 | tee "$OUT/first_kernel.txt"
