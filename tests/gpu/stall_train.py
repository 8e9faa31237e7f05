"""A PyTorch training loop with a planted stall, for gpuscope's cross-layer findings.

A data-loader thread feeds batches through a queue; every --stall-every batches it stalls:
--mode read: it reads --file (--mb MiB) from disk (O_DIRECT, or dropping the file's
cached pages first where O_DIRECT is not supported); --mode sleep: it sleeps 50 ms. The
training thread waits for the batch, the GPU runs dry. Prints one JSON line of facts.

    python stall_train.py --mode read --file /var/tmp/stall.bin --steps 60 --stall-every 20
"""
import argparse
import json
import mmap
import os
import queue
import threading
import time

import torch


def make_file(path, mb):
    chunk = b"\x01" * (1 << 20)
    with open(path, "wb") as f:
        for _ in range(mb):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())


def read_file(path, mb):
    buf = mmap.mmap(-1, 8 << 20)  # page aligned, as O_DIRECT wants
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        direct = True
    except OSError:
        fd = os.open(path, os.O_RDONLY)
        direct = False
    try:
        if not direct:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        got = 0
        while got < (mb << 20):
            n = os.readv(fd, [buf])
            if n <= 0:
                break
            got += n
    finally:
        os.close(fd)
    return got, direct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["read", "sleep"], default="read")
    ap.add_argument("--file", default="/var/tmp/gpuscope-stall.bin")
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--stall-every", type=int, default=20)
    args = ap.parse_args()
    if args.mode == "read":
        make_file(args.file, args.mb)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    q = queue.Queue(maxsize=2)
    facts = {"stalls": 0, "stall_bytes": 0, "stall_s": [], "direct": None,
             "loader_tid": None, "trainer_tid": threading.get_native_id()}

    def loader():
        facts["loader_tid"] = threading.get_native_id()
        for i in range(args.steps):
            if i and i % args.stall_every == 0:
                t0 = time.time()
                if args.mode == "read":
                    got, facts["direct"] = read_file(args.file, args.mb)
                    facts["stall_bytes"] += got
                else:
                    time.sleep(0.05)
                facts["stall_s"].append(time.time() - t0)
                facts["stalls"] += 1
            q.put((torch.randn(32, 3, 64, 64), torch.randint(0, 10, (32,))))
        q.put(None)

    th = threading.Thread(target=loader, name="loader")
    th.start()
    steps = 0
    t0 = time.time()
    while True:
        item = q.get()
        if item is None:
            break
        x, y = item[0].cuda(non_blocking=True), item[1].cuda(non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
    torch.cuda.synchronize()
    th.join()
    facts["steps"] = steps
    facts["wall_s"] = time.time() - t0
    if args.mode == "read":
        os.unlink(args.file)
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
