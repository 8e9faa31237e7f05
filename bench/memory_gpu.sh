#!/bin/sh
# The memory analyses on a GPU machine: tests/gpu/torch_memory.py's leak cases and the
# caching allocator's fragmentation OOM under gpuscope (kernel probes), the same programs
# untraced and under compute-sanitizer --leak-check full, timed. Writes reports, memory
# maps, the programs' facts and times.txt to $OUT.
#
#   OUT=dir sh bench/memory_gpu.sh [N] [GPUSCOPE]
set -u
N=${1:-300}
G=${2:-.output/static/gpuscope}
PY=${PY:-/opt/torch/.venv/bin/python3}
mkdir -p "$OUT"
mount | grep -q tracefs || mount -t tracefs none /sys/kernel/tracing
t() { # label, command...: wall milliseconds of the command into times.txt
	l=$1
	shift
	s=$(date +%s%N)
	"$@" > "$OUT/$l.out" 2>&1
	rc=$?
	e=$(date +%s%N)
	echo "$l rc=$rc ms=$(((e - s) / 1000000))" >> "$OUT/times.txt"
}
for c in list_leak graph_leak steady; do
	for cache in 1 0; do
		tag=$c-nocache$cache
		t plain-$tag env PYTORCH_NO_CUDA_MEMORY_CACHING=$cache $PY tests/gpu/torch_memory.py $c $N
		t gs-$tag env PYTORCH_NO_CUDA_MEMORY_CACHING=$cache $G run -q \
			--json="$OUT/gs-$tag.json" -o "$OUT/gs-$tag.gsrec" -- \
			$PY tests/gpu/torch_memory.py $c $N --facts "$OUT/facts-$tag.json"
		$G report "$OUT/gs-$tag.gsrec" --memory-map "$OUT/map-$tag.svg" > /dev/null 2>&1
		rm -f "$OUT/gs-$tag.gsrec"
	done
	t cs-$c env PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --leak-check full \
		$PY tests/gpu/torch_memory.py $c $N
done
t gs-fragment $G run -q --json="$OUT/gs-fragment.json" -o "$OUT/gs-fragment.gsrec" -- \
	$PY tests/gpu/torch_memory.py fragment 0 --facts "$OUT/facts-fragment.json"
$G report "$OUT/gs-fragment.gsrec" --memory-map "$OUT/map-fragment.svg" > /dev/null 2>&1
rm -f "$OUT/gs-fragment.gsrec"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt"
