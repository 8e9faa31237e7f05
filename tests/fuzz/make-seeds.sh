#!/bin/sh
# Regenerate the recording seeds of the fuzz targets after a change to the event schema
# (include/gpuscope/event.h): real traces of the workloads on the CUDA test double, from
# both planes. Needs root and a build (make all). Usage: tests/fuzz/make-seeds.sh
set -eu
cd "$(dirname "$0")/../.."
out=.output
seeds=tests/fuzz/seeds
export LD_LIBRARY_PATH="$PWD/$out/fakes"
trace() { # name, gpuscope options..., --, workload
	name=$1
	shift
	"$out/gpuscope" run -q -o "$seeds/recording/$name.gsrec" --json=/dev/null "$@"
}
trace driver -- "$out/workloads/wl_driver"
trace runtime -- "$out/workloads/wl_runtime"
trace nccl -- "$out/workloads/wl_nccl"
trace inject --inject -- "$out/workloads/wl_driver"
# The records target reads bare records: a recording without its 16-byte header.
for f in driver inject; do
	tail -c +17 "$seeds/recording/$f.gsrec" >"$seeds/records/$f.bin"
done
ls -l "$seeds/recording" "$seeds/records"
