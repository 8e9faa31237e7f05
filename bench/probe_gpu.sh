#!/bin/sh
# Device-side probes on a GPU: `gpuscope probe` with each tool and a user's program on
# kernels of known behaviour (bench/probe/kernels.cu), their overhead, the instrumentation
# time of a large module, and a PyTorch program (SASS only: nothing may break).
#
#   bench/probe_gpu.sh prepare        here: the eBPF objects into .output/gpu-probe/
#   bench/probe_gpu.sh run PHASE...   on the GPU machine, as root, carrying .output/static and
#                                     .output/gpu-probe; results under $OUT (or /tmp/probe-out)
# PHASE: tools (each tool and the user's probe on `kernels check`), overhead (ratios against
# uninstrumented runs, interleaved), large (a module of 512 kernels), torch, ring (ring
# buffers: a record per block and per warp, checked by bench/probe/ring_check.py), routing
# (bench/probe/routing.cu: graph kernel nodes, module variables, modules from files, PTX
# for several architectures; each checked by its result).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
case "${1:-}" in
prepare)
	mkdir -p .output/gpu-probe
	for p in count empty ringbuf; do
		clang -O2 -g -target bpf -mcpu=v3 -Iinclude -c bench/probe/$p.bpf.c \
			-o .output/gpu-probe/$p.bpf.o
	done
	exit 0 ;;
run) shift ;;
*) echo "usage: $0 prepare | run PHASE..." >&2; exit 1 ;;
esac
OUT=${OUT:-/tmp/probe-out}
W=/tmp/probe-work
mkdir -p "$OUT" "$W"
GS=$here/.output/static/gpuscope
OBJ=$here/.output/gpu-probe
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing || true
export PATH=$PATH:/usr/local/cuda/bin
[ -x $W/kernels ] || nvcc -O2 -arch=sm_90 -o $W/kernels bench/probe/kernels.cu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt" 2>&1 || true
# Three rounds, each kernel untraced, under the empty probe, then under each PROBE (a tool or
# an object; its ring buffers' counts too), interleaved: rounds FILE PROBE...
rounds() {
	file=$OUT/$1
	shift
	: > "$file"
	for round in 1 2 3; do
		for k in tiny:3000 heavy:40 vector_add:400; do
			name=${k%%:*} n=${k##*:}
			echo "round $round $name untraced $($W/kernels bench $name $n)" >> "$file"
			for t in $OBJ/empty.bpf.o "$@"; do
				echo "round $round $name $(basename $t .bpf.o) $($GS probe $t -- $W/kernels bench $name $n | grep -E 'per launch|records,')" >> "$file"
			done
		done
	done
}
for phase in "$@"; do
case $phase in
tools)
	$W/kernels check > "$OUT/untraced-check.txt" 2>&1
	for t in kernelretsnoop threadhist launchlate memtrace smmap; do
		$GS probe -v $t -- $W/kernels check > "$OUT/tool-$t.txt" 2>&1 || echo "exit $?" >> "$OUT/tool-$t.txt"
	done
	$GS probe -v $OBJ/count.bpf.o -- $W/kernels check > "$OUT/user-count.txt" 2>&1 || echo "exit $?" >> "$OUT/user-count.txt"
	$GS probe -v $OBJ/empty.bpf.o -- $W/kernels check > "$OUT/empty.txt" 2>&1 || echo "exit $?" >> "$OUT/empty.txt"
	;;
overhead)
	rounds overhead.txt kernelretsnoop threadhist launchlate memtrace smmap
	;;
large)
	python3 - "$W/big.cu" <<'PY'
import sys
n = 512
with open(sys.argv[1], "w") as f:
    f.write("#include <cstdio>\ntemplate <int K> __global__ void k(float *a, int n) {\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (i < n) { float x = a[i]; for (int j = 0; j < (K % 7) + 1; j++) x = x * 1.5f + K; a[i] = x; }\n}\n")
    f.write("typedef void (*kf)(float *, int);\n")
    f.write("kf table[] = {" + ",".join(f"k<{i}>" for i in range(n)) + "};\n")
    f.write("int main() { float *a; cudaMalloc(&a, 4096 * 4);\n"
            "  k<0><<<16, 256>>>(a, 4096); k<511><<<16, 256>>>(a, 4096);\n"
            "  printf(\"%s\\n\", cudaGetErrorString(cudaDeviceSynchronize())); return 0; }\n")
PY
	nvcc -O2 -arch=sm_90 -o $W/big $W/big.cu
	ls -l $W/big > "$OUT/large.txt"
	for i in 1 2; do $GS probe -v kernelretsnoop -- $W/big >> "$OUT/large.txt" 2>&1 || echo "exit $?" >> "$OUT/large.txt"; done
	;;
ring)
	nsm=$(nvidia-smi --query-gpu=multiprocessor_count --format=csv,noheader 2>/dev/null | head -1 || echo 132)
	case $nsm in ''|*[!0-9]*) nsm=132 ;; esac
	for i in 1 2; do
		$GS probe -v --records 0 -o $W/ring$i $OBJ/ringbuf.bpf.o -- $W/kernels check > "$OUT/ring$i.txt" 2>&1 || echo "exit $?" >> "$OUT/ring$i.txt"
		python3 bench/probe/ring_check.py "$OUT/ring$i.txt" "$nsm" > "$OUT/ring$i-check.txt" 2>&1 || echo "exit $?" >> "$OUT/ring$i-check.txt"
		$GS report $W/ring$i/events.gsrec > "$OUT/ring$i-report.txt" 2>&1 || true
	done
	rounds ring-overhead.txt $OBJ/ringbuf.bpf.o
	;;
routing)
	nvcc -O2 -arch=sm_90 -o $W/routing bench/probe/routing.cu -lcuda
	nvcc -ptx -arch=sm_90 -o $W/fill.ptx bench/probe/fill.cu
	nvcc -fatbin -gencode arch=compute_80,code=compute_80 \
		-gencode arch=compute_100,code=compute_100 -o $W/fill.fatbin bench/probe/fill.cu
	$W/routing $W/fill.ptx $W/fill.fatbin > "$OUT/routing-untraced.txt" 2>&1 || echo "exit $?" >> "$OUT/routing-untraced.txt"
	for t in kernelretsnoop $OBJ/count.bpf.o; do
		$GS probe -v $t -- $W/routing $W/fill.ptx $W/fill.fatbin > "$OUT/routing-$(basename $t .bpf.o).txt" 2>&1 || echo "exit $?" >> "$OUT/routing-$(basename $t .bpf.o).txt"
	done
	;;
torch)
	PY=/opt/torch/.venv/bin/python3
	$GS probe -v kernelretsnoop -- $PY -c "
import torch
x = torch.randn(2048, 2048, device='cuda')
y = (x @ x).relu().sum()
torch.cuda.synchronize()
print('torch ok', float(y) > 0)
" > "$OUT/torch.txt" 2>&1 || echo "exit $?" >> "$OUT/torch.txt"
	;;
esac
done
echo done
