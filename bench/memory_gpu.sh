#!/bin/sh
# The memory analyses on a GPU machine: tests/gpu/torch_memory.py's leak cases and the
# caching allocator's fragmentation OOM under gpuscope (kernel probes), the same programs
# untraced, a ResNet-50 training run for the memory map, and (part cs) the leak cases
# under compute-sanitizer --leak-check full. Each program writes its own loop time in its
# facts (start-up not counted); times.txt has the whole runs' wall times. Writes reports,
# memory maps, the programs' facts and times.txt to $OUT.
#
#   OUT=dir sh bench/memory_gpu.sh gs|cs [N] [GPUSCOPE]
set -u
PART=${1:-gs}
N=${2:-300}
G=${3:-.output/static/gpuscope}
PY=${PY:-/opt/torch/.venv/bin/python3}
CS_LIMIT=${CS_LIMIT:-170}
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
gs() { # tag, nocache, case, n: the case under gpuscope, its report and memory map
	t gs-$1 env PYTORCH_NO_CUDA_MEMORY_CACHING=$2 $G run -q \
		--json="$OUT/gs-$1.json" -o "$OUT/gs-$1.gsrec" -- \
		$PY tests/gpu/torch_memory.py $3 $4 --facts "$OUT/facts-gs-$1.json"
	$G report "$OUT/gs-$1.gsrec" --memory-map "$OUT/map-$1.svg" > "$OUT/report-$1.txt" 2>&1
	rm -f "$OUT/gs-$1.gsrec"
}
if [ "$PART" = gs ]; then
	for c in list_leak graph_leak steady; do
		for cache in 1 0; do
			tag=$c-nocache$cache
			# interleaved: untraced, traced, untraced again
			t plain-$tag env PYTORCH_NO_CUDA_MEMORY_CACHING=$cache \
				$PY tests/gpu/torch_memory.py $c $N --facts "$OUT/facts-plain-$tag.json"
			gs $tag $cache $c $N
			t plain2-$tag env PYTORCH_NO_CUDA_MEMORY_CACHING=$cache \
				$PY tests/gpu/torch_memory.py $c $N --facts "$OUT/facts-plain2-$tag.json"
		done
	done
	gs train-nocache0 0 train 40
	gs train-nocache1 1 train 10
	gs fragment 0 fragment 0
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt"
else
	for c in list_leak graph_leak steady; do
		t cs-$c env PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $CS_LIMIT \
			compute-sanitizer --leak-check full \
			$PY tests/gpu/torch_memory.py $c $N --facts "$OUT/facts-cs-$c.json"
	done
fi
