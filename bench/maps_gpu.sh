#!/bin/sh
# Device-side maps under real concurrency, and a probe's cost on a kernel that does nearly
# nothing (bench/maps_gpu.cu). Two steps:
#
#   sh bench/maps_gpu.sh prepare        here: tests/bpf/gpu_maps.bpf.c (clang) injected into
#                                       bench/maps_kernel.cu's PTX (nvcc) by gpuscope
#                                       bpf2ptx --into, into .output/gpu-maps/
#   OUT=dir sh bench/maps_gpu.sh run    on the GPU machine (carry .output/gpu-maps): builds
#                                       the harness with nvcc there, runs it, JSON to $OUT
set -eu
D=.output/gpu-maps
case "${1:-}" in
prepare)
	mkdir -p $D
	clang -target bpf -O2 -mcpu=v3 -g -c tests/bpf/gpu_maps.bpf.c -o $D/gpu_maps.bpf.o
	nvcc -ptx -arch=sm_90 -o $D/bump.ptx bench/maps_kernel.cu
	.output/gpuscope bpf2ptx $D/gpu_maps.bpf.o --into $D/bump.ptx > $D/bump-probed.ptx
	ptxas -arch=sm_90 -o /dev/null $D/bump-probed.ptx
	;;
run)
	mkdir -p "$OUT"
	nvcc -O2 -o /tmp/maps_gpu bench/maps_gpu.cu -lcuda
	for shape in "1000 128" "4000 256" "50 1024"; do
		# shellcheck disable=SC2086
		/tmp/maps_gpu $D/bump-probed.ptx $D/bump.ptx $shape >> "$OUT/maps.json" 2>> "$OUT/maps.err" ||
			echo "failed: $shape" >> "$OUT/maps.err"
	done
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
	;;
*)
	echo "usage: sh bench/maps_gpu.sh prepare|run" >&2
	exit 2
	;;
esac
