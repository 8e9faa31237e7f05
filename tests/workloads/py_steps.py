"""A training loop in Python over the CUDA test double (ctypes), for step detection: STEPS
steps, each launching a forward kernel, three backward launches and an optimizer kernel,
waiting for the GPU (as loss.item() does), then fetching the next batch from a "data
loader" that takes 2 ms -- except after step SLOW, where it takes 80 ms (a slow disk).

    py_steps.py STEPS SLOW
"""
import ctypes
import sys
import time

cu = ctypes.CDLL("libcuda.so.1")
PTX = (b".version 8.0\n.target sm_90\n.address_size 64\n"
       b".visible .entry initKernel(.param .u64 a)\n{ ret; }\n"
       b".visible .entry fwdKernel(.param .u64 a)\n{ ret; }\n"
       b".visible .entry bwdKernel(.param .u64 a)\n{ ret; }\n"
       b".visible .entry optKernel(.param .u64 a)\n{ ret; }\n")


def check(r):
    if r != 0:
        sys.exit(f"CUDA call returned {r}")


def kernel(lib, name):
    k = ctypes.c_void_p()
    check(cu.cuLibraryGetKernel(ctypes.byref(k), lib, name))
    return k


def launch(k, blocks=1):
    check(cu.cuLaunchKernel(k, blocks, 1, 1, 32, 1, 1, 0, None, None, None))


def load_batch(slow):
    time.sleep(0.08 if slow else 0.002)


def main():
    steps, slow = int(sys.argv[1]), int(sys.argv[2])
    dev, ctx, lib = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
    check(cu.cuInit(0))
    check(cu.cuDeviceGet(ctypes.byref(dev), 0))
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check(cu.cuCtxSetCurrent(ctx))
    check(cu.cuLibraryLoadData(ctypes.byref(lib), PTX, None, None, 0, None, None, 0))
    init, fwd, bwd, opt = (kernel(lib, n) for n in
                           (b"initKernel", b"fwdKernel", b"bwdKernel", b"optKernel"))
    launch(init)
    check(cu.cuCtxSynchronize())
    load_batch(False)
    for step in range(steps):
        launch(fwd, 200)
        for _ in range(3):
            launch(bwd, 400)
        launch(opt, 100)
        check(cu.cuCtxSynchronize())
        load_batch(step == slow)
    print(f"py_steps: {steps} steps, the slow one {slow}")


if __name__ == "__main__":
    main()
