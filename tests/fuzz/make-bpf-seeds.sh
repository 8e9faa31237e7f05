#!/bin/sh
# Seeds for fuzz_bpf2ptx that call map helpers: the programs of tests/bpf/translate_maps.bpf.c
# and translate_ring.bpf.c as bare instructions, their map references made what bpf2ptx
# makes them (BPF_PSEUDO_MAP_IDX immediates), numbered as the fuzz target's maps are: 0 the
# array, 1 the per-thread array, 2 the hash map, 3 the ring. Needs clang and
# llvm-objdump/llvm-objcopy.
#   sh tests/fuzz/make-bpf-seeds.sh
set -eu
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seeds() { # SOURCE PREFIX PROGRAM...
	src=$1 prefix=$2
	shift 2
	clang -target bpf -O2 -mcpu=v3 -g -c "$src" -o "$tmp/m.o"
	llvm-objdump -r "$tmp/m.o" > "$tmp/relocs"
	for prog in "$@"; do
		llvm-objcopy -O binary --only-section="probe/$prog" "$tmp/m.o" "$tmp/$prog.bin"
		python3 - "$tmp/$prog.bin" "$tmp/relocs" "probe/$prog" \
			"tests/fuzz/seeds/bpf2ptx/$prefix-$prog.bin" <<'PY'
import struct, sys
code = bytearray(open(sys.argv[1], "rb").read())
index = {"counts": 0, "arr": 0, "per_thread": 1, "by_key": 2, "rb": 3, "events": 3}
section, in_it = "[%s]" % sys.argv[3], False
for line in open(sys.argv[2]):
    if line.startswith("RELOCATION RECORDS FOR"):
        in_it = section in line
        continue
    f = line.split()
    if in_it and len(f) == 3 and f[1] == "R_BPF_64_64":
        off = int(f[0], 16)
        code[off + 1] = (code[off + 1] & 0x0f) | (5 << 4)  # src_reg = BPF_PSEUDO_MAP_IDX
        struct.pack_into("<i", code, off + 4, index[f[2]])
open(sys.argv[4], "wb").write(bytes(code))
PY
	done
}
seeds tests/bpf/translate_maps.bpf.c maps count per_thread hash
seeds tests/bpf/translate_ring.bpf.c ring emit perf
ls -l tests/fuzz/seeds/bpf2ptx/maps-*.bin tests/fuzz/seeds/bpf2ptx/ring-*.bin
