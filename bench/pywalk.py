"""For bench/pywalk_cost.sh: N kernel launches through ctypes from D Python frames deep, then
READY is created and the program waits 3 s (the bench reads the probes' statistics then).

    pywalk.py N D READY
"""
import ctypes
import sys
import time

cu = ctypes.CDLL("libcuda.so.1")
PTX = (b".version 8.0\n.target sm_90\n.address_size 64\n"
       b".visible .entry walkKernel(\n.param .u64 a)\n{ ret; }\n")


def check(r):
    if r != 0:
        sys.exit(f"CUDA call returned {r}")


def setup():
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    lib, kern = ctypes.c_void_p(), ctypes.c_void_p()
    check(cu.cuInit(0))
    check(cu.cuDeviceGet(ctypes.byref(dev), 0))
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check(cu.cuCtxSetCurrent(ctx))
    check(cu.cuLibraryLoadData(ctypes.byref(lib), PTX, None, None, 0, None, None, 0))
    check(cu.cuLibraryGetKernel(ctypes.byref(kern), lib, b"walkKernel"))
    return kern


def deep(d, kern, n):
    if d > 0:
        return deep(d - 1, kern, n)
    for _ in range(n):
        check(cu.cuLaunchKernel(kern, 1, 1, 1, 32, 1, 1, 0, None, None, None))
    check(cu.cuCtxSynchronize())


def main():
    n, d, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    kern = setup()
    time.sleep(0.3)  # (the kernel probes' walker is set up moments after the driver maps)
    deep(d, kern, n)
    open(ready, "w").close()
    time.sleep(3)


if __name__ == "__main__":
    main()
