"""A training loop in Python over the CUDA test double (ctypes), for step detection: STEPS
steps (train_step), each launching a forward kernel, three backward launches and an
optimizer kernel, waiting for the GPU (as loss.item() does), then fetching the next batch
from a "data loader" that takes 2 ms -- except after step SLOW, where it takes 80 ms (a slow
disk). Then EVAL evaluation steps (evaluate), a kernel and a wait each (default none).
With `thread`, the backward launches come from another thread, 5 ms apart, while the loop
waits for it (as loss.backward() waits for autograd's engine thread, which lives as long as
the program).

    py_steps.py STEPS SLOW [EVAL] [thread]
"""
import ctypes
import sys
import threading
import time

cu = ctypes.CDLL("libcuda.so.1")
PTX = (b".version 8.0\n.target sm_90\n.address_size 64\n"
       b".visible .entry initKernel(.param .u64 a)\n{ ret; }\n"
       b".visible .entry fwdKernel(.param .u64 a)\n{ ret; }\n"
       b".visible .entry bwdKernel(.param .u64 a)\n{ ret; }\n"
       b".visible .entry optKernel(.param .u64 a)\n{ ret; }\n"
       b".visible .entry evalKernel(.param .u64 a)\n{ ret; }\n")


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


def backward(bwd, apart):
    for _ in range(3):
        launch(bwd, 400)
        time.sleep(apart)


class Engine:
    """The backward pass's thread: run() hands it a pass and waits for it to end."""
    def __init__(self, bwd):
        self.bwd, self.go, self.done = bwd, threading.Event(), threading.Event()
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            self.go.wait()
            self.go.clear()
            backward(self.bwd, 0.005)
            self.done.set()

    def run(self):
        self.go.set()
        self.done.wait()
        self.done.clear()


def train_step(fwd, bwd, opt, engine=None):
    launch(fwd, 200)
    if engine:
        engine.run()
    else:
        backward(bwd, 0)
    launch(opt, 100)
    check(cu.cuCtxSynchronize())


def evaluate(ev, n):
    for _ in range(n):
        launch(ev, 50)
        check(cu.cuCtxSynchronize())


def main():
    steps, slow = int(sys.argv[1]), int(sys.argv[2])
    evals = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    engine = None
    dev, ctx, lib = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
    check(cu.cuInit(0))
    check(cu.cuDeviceGet(ctypes.byref(dev), 0))
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check(cu.cuCtxSetCurrent(ctx))
    check(cu.cuLibraryLoadData(ctypes.byref(lib), PTX, None, None, 0, None, None, 0))
    init, fwd, bwd, opt, ev = (kernel(lib, n) for n in (b"initKernel", b"fwdKernel",
                                                        b"bwdKernel", b"optKernel",
                                                        b"evalKernel"))
    if "thread" in sys.argv[4:]:
        engine = Engine(bwd)
    launch(init)
    check(cu.cuCtxSynchronize())
    load_batch(False)
    for step in range(steps):
        train_step(fwd, bwd, opt, engine)
        load_batch(step == slow)
    evaluate(ev, evals)
    print(f"py_steps: {steps} steps, the slow one {slow}, {evals} evaluation steps")


if __name__ == "__main__":
    main()
