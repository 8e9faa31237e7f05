#!/bin/bash
# CUPTI's graph-level records beside its kernel records (issue 22): bench/graph_trace.cu at
# graphs of 19 kernels (bench/workload.py's graph step has 19) and of 3. From the repository
# root on the GPU machine. Results in $OUT/graph_trace-K.json.
#   OUT=/tmp/gtrace bash bench/graph_trace_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-gtrace}
. bench/gpu_env.sh
lib=$(find / -name 'libcupti.so*' -path '*cu13*' 2>/dev/null | head -1)
[ -n "$lib" ] || lib=$(find / -name 'libcupti.so.13*' 2>/dev/null | head -1)
inc=$(dirname "$(find / -name cupti_activity.h 2>/dev/null | head -1)")
echo "cupti: $lib, headers $inc" >>"$OUT/machine.txt"
d=$(dirname "$lib")
[ -e "$d/libcupti.so" ] || ln -sf "$lib" "$OUT/libcupti.so"
nvcc -O2 -arch=sm_90 -I"$inc" bench/graph_trace.cu -o "$OUT/graph_trace" -L"$OUT" -L"$d" -lcuda \
	-lcupti >>"$OUT/machine.txt" 2>&1 || { echo "graph_trace did not build"; tail "$OUT/machine.txt"; exit 1; }
for k in 19 3; do
	LD_LIBRARY_PATH=$d timeout 120 "$OUT/graph_trace" $k 500 "${ROUNDS:-9}" | tee "$OUT/graph_trace-$k.json"
done
