"""Seeds of tests/fuzz/fuzz_cfi.c: an FDE of a built program's .eh_frame each (with the
whole section after the 8 bytes the target reads first), its target halfway into the
function. Usage (after make unit): python3 tests/fuzz/make-cfi-seeds.py"""
import hashlib
import os
import struct
import subprocess
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PROGRAM = os.path.join(ROOT, ".output", "unit", "test_unwind")
OUT = os.path.join(ROOT, "tests", "fuzz", "seeds", "cfi")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        eh_path = os.path.join(tmp, "eh")
        subprocess.run(["objcopy", "--dump-section", ".eh_frame=" + eh_path, PROGRAM,
                        os.path.join(tmp, "copy")], check=True)
        eh = open(eh_path, "rb").read()
    at, fdes = 0, []
    while at + 8 <= len(eh):
        length, cie = struct.unpack_from("<II", eh, at)
        if length == 0:
            break
        if cie:  # an FDE: pc_begin, pc_range as sdata4 (GCC's and clang's encoding)
            fdes.append((at, struct.unpack_from("<i", eh, at + 12)[0],
                         eh[at:at + 4 + length]))
        at += 4 + length
    # Every 12th, and those with expressions (DW_CFA_expression, def_cfa_expression: the PLT's
    # and the realigned frames' of tests/unit/test_unwind.c).
    pick = fdes[::max(1, len(fdes) // 12)] + [f for f in fdes if b"\x0f\x03\x76" in f[2]
                                              or b"\x10\x06\x02\x76" in f[2]]
    for at, span, _ in pick:
        seed = struct.pack("<II", at, max(1, span // 2)) + eh
        name = hashlib.sha1(seed).hexdigest()
        open(os.path.join(OUT, name), "wb").write(seed)


if __name__ == "__main__":
    main()
