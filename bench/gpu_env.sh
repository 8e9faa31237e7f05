# shellcheck shell=bash
# Sourced by the GPU benchmarks (from the repository root): $OUT made, tracefs mounted, and
# the machine, its GPU and driver, Python and PyTorch, and gpuscope in $OUT/machine.txt.
# GS: the static gpuscope carried in .output/static, unless set (another build carried, to
# compare).
GS=${GS:-.output/static/gpuscope}
ROUNDS=${ROUNDS:-7}
mkdir -p "$OUT"
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
{
	date -u +%Y-%m-%dT%H:%MZ
	uname -r
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	python3 --version
	python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
	"$GS" --version
} >"$OUT/machine.txt" 2>&1
