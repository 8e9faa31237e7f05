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
# Graphs as XLA builds them (nodes, children set on an instantiated graph, captures into a
# graph), and a function handle the driver gives again after a module unload.
trace graphapi -- "$out/workloads/wl_graphapi"
# Python frames (symbols of pseudo-addresses, the interpreter's record), both planes.
trace python --inject --stacks 1 -- /usr/bin/python3 tests/workloads/py_cuda.py
trace python-kernel --stacks 1 -- /usr/bin/python3 tests/workloads/py_cuda.py --pause 0.3
# 3.13 and 3.14: layouts read from the process (synthetic interpreters), both planes.
trace python313 --inject --stacks 1 -- "$out/workloads/python3.13-fake"
trace python314-kernel --stacks 1 -- "$out/workloads/python3.14-fake"
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
# A bundle with host programs (run by fuzz_probe as the plane runs them): first byte 0.
clang -target bpf -O2 -mcpu=v3 -g -DKERNEL='"vadd"' -c tests/bpf/bpftime_launchlate.bpf.c \
	-o "$tmp/late.o"
"$out/gpuscope" probe -o "$tmp/late" "$tmp/late.o" -- "$out/workloads/wl_probe" "$tmp/k.ptx" \
	>/dev/null
{ printf '\000'; cat "$tmp/late/bundle"; } >tests/fuzz/seeds/probe/bundle-host
# The records target reads bare records: a recording without its 16-byte header.
for f in driver inject graphapi devcode probe os python python-kernel python-exc; do
	tail -c +17 "$seeds/recording/$f.gsrec" >"$seeds/records/$f.bin"
done
ls -l "$seeds/recording" "$seeds/records"
# A frame named through a _Py_DebugOffsets (fuzz_pyname: first byte 3 or 4 for 3.13 or
# 3.14, the table at 16, the code object at 16 + 1024): the fields at the slots
# core/pylayout.c reads, then a code object, its strings and its line table.
python3 - "$seeds/pyname" <<'PY'
import struct, sys
BASE = 0x10000
for minor, pick, slots in ((13, 3, (40, 72, 168, 184, 200, 232, 240, 248, 264, 280, 296, 304,
                                    312, 344, 360, 376, 408, 520, 528, 544, 552, 560)),
                           (14, 4, (40, 72, 192, 208, 224, 256, 264, 272, 288, 320, 336, 344,
                                    352, 384, 408, 424, 456, 600, 608, 624, 632, 640))):
    img = bytearray(16 + 1024 + 512)
    img[0] = pick
    img[1:9] = struct.pack("<Q", 20)
    t = 16
    img[t:t + 8] = b"xdebugpy"
    img[t + 8:t + 16] = struct.pack("<Q", 0x030000f0 | minor << 16)
    values = (1024, 7344, 8, 72, 160, 8, 0, 56, 70 if minor == 13 else 74, 112, 128, 136, 68,
              200, 8, 24, 24, 16, 32, 32, 16, 40)
    for at, v in zip(slots, values):
        img[t + at:t + at + 8] = struct.pack("<Q", v)
    code = 16 + 1024
    strs = code + 256
    def put(at, v):
        img[at:at + 8] = struct.pack("<Q", v)
    def string(at, text):
        put(at + 16, len(text))
        img[at + 32:at + 36] = struct.pack("<I", 1 << 2 | 1 << 5 | 1 << 6)
        img[at + 40:at + 40 + len(text)] = text
    string(strs, b"train.py")
    string(strs + 64, b"Trainer.step")
    put(strs + 128 + 16, 4)
    img[strs + 128 + 32:strs + 128 + 36] = bytes((0xef, 0x02, 0xef, 0x08))
    put(code + 112, BASE + strs)
    put(code + 128, BASE + strs + 64)
    put(code + 136, BASE + strs + 128)
    img[code + 68:code + 72] = struct.pack("<i", 40)
    open("%s/debug-3%d" % (sys.argv[1], minor), "wb").write(bytes(img))
PY
