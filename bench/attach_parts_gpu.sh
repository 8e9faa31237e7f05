#!/bin/bash
# What of the kernel plane's defaults costs a CPU-bound training step (issue 22): with its
# defaults gpuscope cost ResNet-50 1.12x on an H100 (bench/results/attach-2026-11-26-h100.md),
# without the OS plane and stacks 1.015x in 4 rounds. Here each variant of options is
# measured in one process by bench/attach_ab.py (attached SECS, detached SECS, ROUNDS
# rounds), one variant after the other. From the repository root on the GPU machine,
# carrying .output/static; root. About 2.5 minutes a variant at the defaults (7 rounds of
# 8 s): name the variants for one 10-minute call.
#   OUT=/tmp/parts ROUNDS=7 SECS=8 bash bench/attach_parts_gpu.sh [WORKLOAD] [VARIANT...]
# VARIANT: defaults, no-os, no-stacks, no-nvml, bare (all three off). Writes
# $OUT/VARIANT/attach-WORKLOAD.json and prints one table row a variant.
set -u
OUT=${OUT:-/tmp/gpuscope-parts}
. bench/gpu_env.sh
w=${1:-resnet50}
shift
for v in "${@:-defaults no-os no-stacks}"; do
	for variant in $v; do
		case $variant in
		defaults) opts= ;;
		no-os) opts=--no-os ;;
		no-stacks) opts="--stacks off" ;;
		no-nvml) opts=--no-nvml ;;
		bare) opts="--no-os --stacks off --no-nvml" ;;
		*) echo "unknown variant $variant" >&2 && exit 2 ;;
		esac
		mkdir -p "$OUT/$variant"
		printf '%-10s ' "$variant"
		GS_OPTS=$opts python3 bench/attach_ab.py run "$GS" "$OUT/$variant" "$w" "$ROUNDS" \
			"${SECS:-8}" 2>"$OUT/$variant/stderr.txt" | tail -1
		rm -f "$OUT/$variant"/*.log
	done
done
