#!/bin/bash
# bpftime's ABI on a GPU (issue 21): tests/bpf/bpftime_abi.bpf.c (its map types 1501-1527,
# helpers 14, 25, 502-512, kprobe/ and kretprobe/ programs, a host uprobe program) probing
# bpftime's vec_add (bench/bpftime/vec_add.cu, built as bpftime builds it); the output with
# and without the probe, and the maps at the end (probe --json), checked against what the
# launches imply by bench/bpftime/check.py. From the repository root on the GPU machine,
# carrying .output/static and .output/bpftime (bash bench/device_gpu.sh prepare, here).
# Then bpftime_exit.bpf.c (helper 507 ends the threads of blocks 2 and up at entry): the
# threads that went on, and vec_add's checksum as only blocks 0 and 1 computing make it.
# Results in $OUT: machine.txt, check.json, probe.txt, abi.json, exit.txt.
set -u
if [ "${1:-}" = prepare ]; then
	mkdir -p .output/bpftime
	for o in bpftime_abi bpftime_exit; do
		clang -O2 -g -target bpf -mcpu=v3 -c tests/bpf/$o.bpf.c -o .output/bpftime/$o.bpf.o ||
			exit 1
	done
	exit 0
fi
OUT=${OUT:-/tmp/gpuscope-device}
. bench/gpu_env.sh
w=$(mktemp -d)
nvcc -O2 -gencode 'arch=compute_90,code=[sm_90,compute_90]' -cudart shared \
	bench/bpftime/vec_add.cu -o "$w/vec_add" >"$OUT/probe.txt" 2>&1
LAUNCHES=${LAUNCHES:-10} GRID=${GRID:-4} BLOCK=${BLOCK:-256}
"$w/vec_add" "$LAUNCHES" "$GRID" "$BLOCK" >"$w/plain.out" 2>&1
"$GS" probe --threads 65536 --json "$OUT/abi.json" .output/bpftime/bpftime_abi.bpf.o -- \
	"$w/vec_add" "$LAUNCHES" "$GRID" "$BLOCK" >>"$OUT/probe.txt" 2>&1
echo "rc=$?" >>"$OUT/probe.txt"
python3 bench/bpftime/check.py "$OUT/abi.json" "$w/plain.out" "$OUT/probe.txt" \
	"$LAUNCHES" "$GRID" "$BLOCK" >"$OUT/check.json"
"$GS" probe --json "$w/exit.json" .output/bpftime/bpftime_exit.bpf.o -- \
	"$w/vec_add" "$LAUNCHES" "$GRID" "$BLOCK" >"$OUT/exit.txt" 2>&1
echo "rc=$?" >>"$OUT/exit.txt"
python3 - "$w/exit.json" "$OUT/exit.txt" "$LAUNCHES" "$GRID" "$BLOCK" >>"$OUT/exit.txt" <<'PY'
import json, struct, sys
js, out = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
launches, grid, block = map(int, sys.argv[3:6])
f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]
total = 0.0
for i in range(2 * block):  # (blocks 0 and 1 compute; the others end at entry)
    h = f32((i % 97) / 7.0)
    c = 0.0
    for _ in range(launches):
        c = f32(c + f32(f32(h + f32(h * 2.0))))
    total += c
want = "vec_add: %d launches of %d x %d threads, checksum %.3f" % (launches, grid, block, total)
(m,) = [x for x in js["maps"] if x["name"] == "went_on"]
went = m["contexts"][0]["entries"][0]["value"] if m["contexts"][0]["entries"] else 0
print(json.dumps({"went_on": went, "want_went_on": 2 * block * launches,
                  "checksum_as_two_blocks": want in out, "want": want}))
PY
