"""The kernel's statistics of the loaded BPF programs named NAME (kernel.bpf_stats_enabled
on): their runs and run time summed, as JSON, through the bpf() system call itself (the GPU
machine has no bpftool). x86-64; root.

    bpfstats.py NAME
"""
import ctypes
import json
import os
import struct
import sys

SYS_BPF = 321
PROG_GET_NEXT_ID, PROG_GET_FD_BY_ID, OBJ_GET_INFO_BY_FD = 11, 13, 15
INFO_SIZE = 232  # struct bpf_prog_info (linux/bpf.h): name at 64, run_time_ns at 192

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def bpf(cmd, attr):
    return libc.syscall(SYS_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))


def programs():
    """(name, run_time_ns, run_cnt) of every loaded program."""
    attr, prog = (ctypes.c_uint8 * 128)(), 0
    while True:
        struct.pack_into("<II", attr, 0, prog, 0)
        if bpf(PROG_GET_NEXT_ID, attr) < 0:
            return
        prog = struct.unpack_from("<I", attr, 4)[0]
        fa = (ctypes.c_uint8 * 128)()
        struct.pack_into("<I", fa, 0, prog)
        fd = bpf(PROG_GET_FD_BY_ID, fa)
        if fd < 0:
            continue
        info = (ctypes.c_uint8 * INFO_SIZE)()
        ia = (ctypes.c_uint8 * 128)()
        struct.pack_into("<IIQ", ia, 0, fd, INFO_SIZE, ctypes.addressof(info))
        ok = bpf(OBJ_GET_INFO_BY_FD, ia) == 0
        os.close(fd)
        if ok:
            name = bytes(info[64:80]).split(b"\0")[0].decode()
            yield (name,) + struct.unpack_from("<QQ", info, 192)


def main():
    mine = [p for p in programs() if p[0] == sys.argv[1]]
    print(json.dumps({"programs": len(mine), "runs": sum(p[2] for p in mine),
                      "ns": sum(p[1] for p in mine)}))


if __name__ == "__main__":
    main()
