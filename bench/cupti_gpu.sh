#!/bin/bash
# Every-kernel timing by the driver's own timestamps (CUPTI's kernel activity) against the
# plane's gated pairs (issue 22): bench/cupti_cost.cu (a paced C loop, the variants in one
# process, at 9 and 15 us a launch), then the tiny op inside one process (bench/inject_ab.sh):
# untraced, every kernel timed with pairs ("all") and with carriers ("all+carry"), the
# PyTorch profiler, and its CUDA activity alone ("profcuda": CUPTI's records with no CPU
# operator events). About 2.5 minutes. From the repository root, carrying .output/static.
#   OUT=/tmp/cupti bash bench/cupti_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-cupti}
. bench/gpu_env.sh
export ROUNDS
lib=$(find / -name 'libcupti.so*' -path '*cu13*' 2>/dev/null | head -1)
[ -n "$lib" ] || lib=$(find / -name 'libcupti.so.13*' 2>/dev/null | head -1)
inc=$(dirname "$(find / -name cupti_activity.h 2>/dev/null | head -1)")
echo "cupti: $lib, headers $inc" >>"$OUT/machine.txt"
d=$(dirname "$lib")
[ -e "$d/libcupti.so" ] || ln -sf "$(basename "$lib")" "$OUT/libcupti.so"
nvcc -O2 -arch=sm_90 -I"$inc" bench/cupti_cost.cu -o "$OUT/cupti_cost" -L"$OUT" -L"$d" -lcuda -lcupti \
	>>"$OUT/machine.txt" 2>&1 || { echo "cupti_cost did not build"; tail "$OUT/machine.txt"; exit 1; }
for pace in 9000 15000; do
	LD_LIBRARY_PATH=$d timeout 60 "$OUT/cupti_cost" 20000 "$ROUNDS" $pace | tee "$OUT/cupti_cost-$pace.json"
done
OUT=$OUT/tinyops WORKLOADS=tinyops MODES=pass,pairs,pairs+carry,profiler,profcuda PROCS=1 \
	timeout 150 bash bench/inject_ab.sh >/dev/null 2>&1
cat "$OUT"/tinyops/ab.txt
