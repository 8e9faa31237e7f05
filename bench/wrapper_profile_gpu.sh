#!/bin/bash
# Where the in-process wrapper's time goes on the GPU machine (issue 22: with timing off it
# adds 0.2-0.7 us a launch there, 0.1 us on the CPU machine). perf is not installed on the
# GPU machines: this carries Debian's, with its libraries, in .output/perf (made here by
#   mkdir -p .output/perf/lib && cp /usr/bin/perf .output/perf/ &&
#   for l in $(ldd /usr/bin/perf | awk '/=>/{print $3}'); do case ${l##*/} in
#   libc.so.6|libm.so.6|libstdc++.so.6|libgcc_s.so.1) ;; *) cp -L "$l" .output/perf/lib/;;
#   esac; done
# ) and bench/ring_cost.c built static in .output/ring_cost. Runs:
#   - ring_cost (what a record costs the launching thread: cache, ring, reader), 15 rounds,
#     with a stand-in launch touching 32 KiB and 256 KiB (not with RING_COST=0);
#   - WORKLOAD (cloop, the CUDA C loop of bench/cloop.cu, or one of bench/workload.py's:
#     tinyops, cupy) under `run --inject --gpu-time=all`, one process per mode of MODES
#     (each of its 40 windows in that mode), under `perf record`: per process the share of
#     each thread, of each command and library, and of each symbol.
# From the repository root on the GPU machine, carrying .output/static, .output/perf and
# .output/ring_cost; root. GS: another build of gpuscope's (bench/gpu_env.sh).
#   OUT=/tmp/wp bash bench/wrapper_profile_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-wrapper-profile}
. bench/gpu_env.sh
P=.output/perf
export LD_LIBRARY_PATH=$PWD/$P/lib
MODES=${MODES:-pass off+stacks=0 off+stacks=0+norecord off}
if [ "${RING_COST:-1}" = 1 ]; then
	.output/ring_cost 15 50000 32 3000 >"$OUT/ring_cost-32k.json" 2>&1
	.output/ring_cost 15 50000 256 3000 >"$OUT/ring_cost-256k.json" 2>&1
fi
W=${WORKLOAD:-cloop}
[ "$W" = cloop ] && nvcc -O2 -arch=sm_90 bench/cloop.cu -o "$OUT/cloop" >>"$OUT/machine.txt" 2>&1
ev=cycles
$P/perf stat -e cycles true >/dev/null 2>&1 || ev=cpu-clock
echo "perf event: $ev" >>"$OUT/machine.txt"
for m in $MODES; do
	f=$OUT/ab-$m.mode
	echo "$m" >"$f"
	cmd=("$OUT/cloop")
	[ "$W" = cloop ] || cmd=(python3 bench/workload.py "$W")
	GPUSCOPE_AB_FILE=$f $P/perf record -q -e "$ev" -F 20000 -o "$OUT/perf-$W-$m.data" -- \
		"$GS" run -q --inject --gpu-time=all -- "${cmd[@]}" --ab "$f" "$m" 40 \
		>"$OUT/$W-$m.json" 2>"$OUT/$W-$m.err"
	$P/perf report -i "$OUT/perf-$W-$m.data" --no-children --sort comm,dso --stdio \
		>"$OUT/dso-$W-$m.txt" 2>&1
	$P/perf report -i "$OUT/perf-$W-$m.data" --no-children --sort pid,comm --stdio \
		>"$OUT/thread-$W-$m.txt" 2>&1
	$P/perf report -i "$OUT/perf-$W-$m.data" --no-children --sort dso,sym --stdio \
		>"$OUT/sym-$W-$m.txt" 2>&1
	rm -f "$f" "$f.tmp"
done
rm -f "$OUT/cloop"
