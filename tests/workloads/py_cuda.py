"""A Python program that calls the CUDA driver (the test double) through ctypes from known
functions, a thread and a generator, for the Python frames of stacks. Each call's line is
marked `# CALL <name>`: the test reads the lines from this file.

    py_cuda.py [--launches N] [--pause SECONDS] [--wait FILE] [--engine LIB [--engine-state]]
               [--tail N]

--pause: a pause after loading the driver, before the first call (as a program importing
its framework makes), and before exiting: the kernel probes' Python walker is set up
meanwhile, and the last frames are named while the process lives. --wait: after setting
up, create FILE.ready and wait for FILE (for gpuscope attach). --engine: last, backward()
has a thread with no Python state (LIB: libwl_engine.so) launch twice while it waits, as
loss.backward() waits for PyTorch's autograd engine; --engine-state: that thread has a Python
state with no frames (as PyTorch's engine threads have). --tail: last of all, N launches in
a thread that then waits for ever (it is still there when the program ends), and N in the
main thread (the program's last calls).
"""
import os
import time
import ctypes
import sys
import threading

cu = ctypes.CDLL("libcuda.so.1")
PTX = (b".version 8.0\n.target sm_90\n.address_size 64\n"
       b".visible .entry pyKernel(\n.param .u64 a)\n{ ret; }\n")


def check(r, want=0):
    if r != want:
        sys.exit(f"CUDA call returned {r}, wanted {want}")


def setup():
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    lib, kern = ctypes.c_void_p(), ctypes.c_void_p()
    check(cu.cuInit(0))
    check(cu.cuDeviceGet(ctypes.byref(dev), 0))
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check(cu.cuCtxSetCurrent(ctx))
    check(cu.cuLibraryLoadData(ctypes.byref(lib), PTX, None, None, 0, None, None, 0))
    check(cu.cuLibraryGetKernel(ctypes.byref(kern), lib, b"pyKernel"))
    return ctx, kern


def launch(kern):
    check(cu.cuLaunchKernel(kern, 1, 1, 1, 32, 1, 1, 0, None, None, None))  # CALL launch


def allocate():
    p = ctypes.c_uint64()
    check(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)))  # CALL allocate
    return p


def too_big():
    p = ctypes.c_uint64()
    check(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 50)), 2)  # CALL too_big


class Model:
    def step(self, kern):
        launch(kern)  # CALL step


def batches(kern, n):
    for i in range(n):
        allocate()  # CALL batches
        yield i


def worker(ctx, kern):
    check(cu.cuCtxSetCurrent(ctx))
    # (10,000 blocks: the double's kernel runs 5 us + 2 ns a block, 25 us)
    check(cu.cuLaunchKernel(kern, 10000, 1, 1, 32, 1, 1, 0, None, None, None))  # CALL worker


def tail_launches(ctx, kern, n, done=None):
    check(cu.cuCtxSetCurrent(ctx))
    for _ in range(n):
        check(cu.cuLaunchKernel(kern, 1, 1, 1, 32, 1, 1, 0, None, None, None))  # CALL tail
    if done:
        done.set()
        threading.Event().wait()  # (still there when the program ends)


def backward(ctx, kern, lib, state):
    engine = ctypes.CDLL(lib)
    engine.engine_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    check(engine.engine_run(ctx, kern, 2, state))  # CALL backward


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    n = int(option("--launches", 3))
    time.sleep(float(option("--pause", 0)))
    ctx, kern = setup()
    wait = option("--wait", None)
    if wait:
        open(wait + ".ready", "w").close()
        while not os.path.exists(wait):
            time.sleep(0.01)
    m = Model()
    for _ in range(n):
        m.step(kern)  # CALL main
    for _ in batches(kern, 2):  # CALL main-gen
        pass
    too_big()  # CALL main-fail
    t = threading.Thread(target=worker, args=(ctx, kern))
    t.start()
    t.join()
    if option("--engine", None):
        backward(ctx, kern, option("--engine", None), "--engine-state" in sys.argv)  # CALL main-backward
    check(cu.cuCtxSynchronize())
    time.sleep(float(option("--pause", 0)))
    tail = int(option("--tail", 0))
    if tail:
        done = threading.Event()
        threading.Thread(target=tail_launches, args=(ctx, kern, tail, done), daemon=True).start()
        done.wait()
        tail_launches(ctx, kern, tail)  # CALL main-tail


if __name__ == "__main__":
    main()  # CALL module
