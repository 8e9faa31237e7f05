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
# Python frames (symbols of pseudo-addresses, the interpreter's record), both planes.
trace python --inject --stacks 1 -- /usr/bin/python3 tests/workloads/py_cuda.py
trace python-kernel --stacks 1 -- /usr/bin/python3 tests/workloads/py_cuda.py --pause 0.3
# Python exceptions: raised, with a CUDA error's text, uncaught in a thread and in main.
trace python-exc --py-exceptions -- /usr/bin/python3 tests/workloads/py_exc.py 3 thread main || true
# The OS plane, and host facts of every kind (block devices: the file is read from $out).
trace os -- "$out/workloads/wl_os" "$out"
# Device code records: PTX text, and the test fatbin seeds (a fatbin with PTX and SASS, one
# with SASS only).
trace devcode --inject --device-code -- "$out/workloads/wl_devcode" \
	"data:tests/fuzz/seeds/ptx_rewrite/$(ls tests/fuzz/seeds/ptx_rewrite | head -1)" \
	"library:$seeds/fatbin/k-none.fatbin" "wrapper:$seeds/fatbin/sass-only-sm90.fatbin" \
	"dataex:$seeds/fatbin/cubin-sm90"
# Records device-side probes wrote into a ring (the double writes 3 per launch).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
clang -target bpf -O2 -mcpu=v3 -g -c tests/bpf/probe_ring.bpf.c -o "$tmp/ring.o"
python3 -c 'import re,sys; print(re.search(r"PTX = \"\"\"(.*?)\"\"\"", open(sys.argv[1]).read(), re.S).group(1))' \
	tests/integration/test_probe.py >"$tmp/k.ptx"
FAKECUDA_RING_RECORDS=3 "$out/gpuscope" probe -o "$tmp/keep" "$tmp/ring.o" -- \
	"$out/workloads/wl_probe" "$tmp/k.ptx" >/dev/null
cp "$tmp/keep/events.gsrec" "$seeds/recording/probe.gsrec"
# The records target reads bare records: a recording without its 16-byte header.
for f in driver inject devcode probe os python python-kernel python-exc; do
	tail -c +17 "$seeds/recording/$f.gsrec" >"$seeds/records/$f.bin"
done
ls -l "$seeds/recording" "$seeds/records"
