"""Python exceptions over the CUDA test double (ctypes): a loader that raises and catches a
ValueError N times (in parse), a RuntimeError that names a CUDA error, caught (in
launch_fails), a KeyError of an environment variable that names CUDA, caught (not a CUDA
error), and, as asked, an uncaught KeyError in a thread and/or in the main thread
(in lookup: exit status 1). With wait=FILE: after loading the driver, it makes FILE.ready
and waits for FILE (for gpuscope attach); with hold: it sleeps 30 s at the end (killed
by the test), so that a trace ends while it runs.

    py_exc.py N [thread] [main] [wait=FILE] [hold]
"""
import ctypes
import os
import sys
import threading
import time

cu = ctypes.CDLL("libcuda.so.1")


def parse(i):
    raise ValueError("bad record %d" % i)


def load(n):
    caught = 0
    for i in range(n):
        try:
            parse(i)
        except ValueError:
            caught += 1
    return caught


def launch_fails():
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def lookup(table, key="missing"):
    return table[key]


def main():
    n = int(sys.argv[1])
    if cu.cuInit(0) != 0:
        sys.exit("cuInit failed")
    wait = [a[5:] for a in sys.argv[2:] if a.startswith("wait=")]
    if wait:
        open(wait[0] + ".ready", "w").close()
        while not os.path.exists(wait[0]):
            time.sleep(0.01)
    else:
        time.sleep(0.5)  # (gpuscope probes the interpreter once it has loaded the driver)
    print("py_exc: caught", load(n))
    time.sleep(0.3)  # (gpuscope names the frames from the living process: let it catch up)
    try:
        launch_fails()
    except RuntimeError:
        pass
    try:
        lookup({"CUDA": 1}, "CUDA_VISIBLE_DEVICES")
    except KeyError:
        pass
    if "thread" in sys.argv[2:]:
        t = threading.Thread(target=lookup, args=({},))
        t.start()
        t.join()
    time.sleep(0.3)
    if "main" in sys.argv[2:]:
        lookup({})
    if "hold" in sys.argv[2:]:
        time.sleep(30)


if __name__ == "__main__":
    main()
