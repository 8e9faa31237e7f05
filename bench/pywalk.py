"""For bench/pywalk_cost.sh: N kernel launches through ctypes from D Python frames deep, then
READY is created and the program waits 3 s (the bench reads the probes' statistics then).
SWEEP_KIB: that much memory written before each launch (the caches as a program's work
between launches leaves them; a stack is taken tens of ms apart, not back to back).

    pywalk.py N D READY [SWEEP_KIB]
"""
import ctypes
import os
import sys
import time

# The driver set up as the tests' Python workload does (its kernel: pyKernel).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "workloads"))
from py_cuda import check, cu, setup  # noqa: E402


def deep(d, kern, n, sweep):
    if d > 0:
        return deep(d - 1, kern, n, sweep)
    # (pyKernel takes a u64: a real driver refuses a launch without it)
    arg = ctypes.c_uint64(0)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(arg), ctypes.c_void_p))
    buf = ctypes.create_string_buffer(max(sweep, 1))
    for i in range(n):
        if sweep:
            ctypes.memset(buf, i & 255, sweep)
        check(cu.cuLaunchKernel(kern, 1, 1, 1, 32, 1, 1, 0, None, params, None))
    check(cu.cuCtxSynchronize())


def main():
    n, d, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    sweep = int(sys.argv[4]) << 10 if len(sys.argv) > 4 else 0
    _, kern = setup()
    time.sleep(0.3)  # (the kernel probes' walker is set up moments after the driver maps)
    deep(d, kern, n, sweep)
    open(ready, "w").close()
    time.sleep(3)


if __name__ == "__main__":
    main()
