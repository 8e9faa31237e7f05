"""Cross-layer findings: a GPU stream idle waiting for its next launch, and what the launching
thread was doing meanwhile (tests/workloads/wl_stall.c plants two such stalls: a disk read
and a sleep)."""
import os

import pytest

from pftrace import Trace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DISK_DIR = os.path.join(ROOT, ".output")  # on a block device (/tmp may be a tmpfs)
# A thread's I/O in a gap is all it issued, not only the planted read: opening the file can
# make it write the file system's journal out itself when a busy disk has filled it (seen:
# 1 MiB in three requests, with another program writing to the disk).
OWN_IO = 4 << 20


def unseen(report):
    """Bytes a finding may miss: requests whose completion the kernel ran no program for
    are recorded when their address is taken again, which may be after the finding was
    made (a request is at most 4 MiB here)."""
    return report["os"]["total"]["block_io"]["read"]["ends_unseen"] * (4 << 20)


def summary(f):
    """The findings, one line each (what a failure shows: CI's runs are the loaded ones)."""
    keys = ("at_ns", "idle_ns", "cause", "syscall", "thread_off_cpu_ns", "io_requests",
            "io_bytes", "page_faults")
    return "\n".join(" ".join("%s=%s" % (k, x[k]) for k in keys) +
                     (" other=%s" % x["other_thread"] if x["other_thread"] else "")
                     for x in f["longest"])


def planted(f):
    """The findings of wl_stall's three stalls: the read, the nap, the wait for the loader."""
    def longest(pred):
        found = sorted((x for x in f["longest"] if x["kind"] != "queue_wait" and pred(x)),
                       key=lambda x: -x["idle_ns"])
        assert found, summary(f)
        return found[0]
    disk = longest(lambda x: x["cause"] == "disk")
    nap = longest(lambda x: x["syscall"] == "clock_nanosleep")
    loader = longest(lambda x: x["other_thread"] is not None)
    assert disk["at_ns"] < nap["at_ns"] < loader["at_ns"]
    return disk, nap, loader


def test_planted_stalls_are_found(gs, tmp_path):
    pf = tmp_path / "t.pftrace"
    # (No stacks: naming their frames takes gpuscope CPU time that, on a 2-core CI machine,
    # can deschedule the program for a millisecond, which is a stall of its own.)
    report, truth, _ = gs.trace(["wl_stall", DISK_DIR],
                                opts=["--inject", "--stacks", "off", "--perfetto", str(pf)])
    f = report["findings"]
    # The three planted stalls, in order, each the longest of its kind (a loaded machine
    # may add short gaps of its own; a fast disk reads the file in a few milliseconds).
    # (On a loaded machine the double's GPU, a host thread, may start a kernel late with its
    # stream free: a queue wait, rightly found, beside them.)
    assert f["gaps"] >= 3 and {x["kind"] for x in f["longest"]} <= {"idle_stream", "queue_wait"}
    disk, nap, loader = planted(f)
    # The read: blocked in pread64 on the disk that holds the file, for its bytes.
    assert disk["cause"] == "disk" and disk["syscall"] == "pread64"
    dev = report["os"]["total"]["block_io"]["devices"][0]["device"]
    assert disk["io_device"] == dev
    # (A few of the file's pages may still be cached, read without a request: 12 KiB of
    # 64 MiB seen once.)
    assert truth["stall:read_bytes"] - (1 << 20) - unseen(report) <= disk["io_bytes"] <= \
        truth["stall:read_bytes"] + OWN_IO
    # Off the CPU most of the time, waiting; or on it, sending requests to a fast virtual
    # disk that takes them as fast as they come (seen in CI: 50 ms, mostly on the CPU).
    assert disk["idle_ns"] >= disk["launch_late_ns"] >= disk["thread_off_cpu_ns"]
    if disk["thread_off_cpu_ns"] * 2 >= disk["launch_late_ns"]:
        assert "launching thread %d was blocked in pread64() on %s for " % (disk["tid"], dev) \
            in disk["text"]
    else:
        assert disk["io_ns"] * 2 >= disk["launch_late_ns"]
        assert "launching thread %d was on the CPU issuing I/O in pread64() on %s for " % (
            disk["tid"], dev) in disk["text"]
    # The nap: asleep in clock_nanosleep for (at least) its 30 ms. (Seen once in CI and once
    # in 30 runs under load here, not since: no off-CPU interval of the nap when it was
    # explained; what was lost, if anything, is not known: the finding and the drops say.)
    assert nap["cause"] == "blocked" and nap["syscall"] == "clock_nanosleep", \
        (nap, report["drops"])
    assert nap["idle_ns"] >= nap["thread_off_cpu_ns"] >= truth["stall:sleep_ns"]
    assert "was asleep in clock_nanosleep() for " in nap["text"]
    assert nap["tid"] == report["session"]["target_pid"] and nap["device"] == 0
    assert nap["other_thread"] is None  # (gpuscope's own threads nap 1 ms at a time)
    # The loader: the launching thread waits for it (futex, in pthread_join); it reads.
    assert loader["cause"] == "blocked" and loader["syscall"] == "futex"
    o = loader["other_thread"]
    assert o["tid"] != loader["tid"] and o["cause"] == "disk" and o["syscall"] == "pread64"
    # (The loader starts reading before the stream goes idle: on a loaded machine much of
    # its read may be done before the wait begins, and is not in it -- 7 MiB of 64 seen.
    # Most of it is in the wait.)
    assert truth["stall:read_bytes"] // 2 <= o["io_bytes"] <= \
        truth["stall:read_bytes"] + OWN_IO
    # (Off the CPU, waiting for the disk; or on it sending requests to a fast one: seen in
    # CI, where the loader's read took 20 ms.)
    if o["off_cpu_ns"] * 2 >= o["io_ns"]:
        assert "; meanwhile its thread %d was blocked in pread64() on %s for " % (
            o["tid"], dev) in loader["text"]
    else:
        assert "; meanwhile its thread %d was on the CPU issuing I/O in pread64() on %s " \
            "for " % (o["tid"], dev) in loader["text"]
    # On the timeline: an instant on the stream's track where each gap begins.
    t = Trace(str(pf))
    marks = [i for i in t.instants if i["cat"] == "finding"]
    assert len(marks) == f["gaps"]
    assert {disk["text"], nap["text"], loader["text"]} <= {m["args"]["finding"] for m in marks}
    assert all(t.tracks[m["track"]]["name"].startswith("stream 0x") for m in marks)


def queue_limit_file(path):
    """The block queue's request size limit for the device holding path (its disk's, for a
    partition), or None."""
    st = os.stat(path)
    base = "/sys/dev/block/%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    for q in (base + "/queue/max_sectors_kb", base + "/../queue/max_sectors_kb"):
        if os.path.exists(q):
            return q
    return None


def test_a_read_split_into_hundreds_of_requests(gsr):
    """A device that takes small requests splits the 64 MiB read into hundreds: the finding
    still counts all of its bytes (a history of single requests would keep the last few)."""
    q = queue_limit_file(DISK_DIR)
    if not q or not os.access(q, os.W_OK):
        pytest.skip("no writable block queue limit for %s" % DISK_DIR)
    old = open(q).read().strip()
    try:
        with open(q, "w") as fh:
            fh.write("64")
        report, truth, _ = gsr.trace(["wl_stall", DISK_DIR],
                                     opts=["--inject", "--stacks", "off"])
    finally:
        with open(q, "w") as fh:
            fh.write(old)
    disk, _, loader = planted(report["findings"])
    want = truth["stall:read_bytes"]
    # (The loader's first requests may be done before the wait begins, on a loaded machine:
    # see test_planted_stalls_are_found.)
    # (Here the requests are 64 KiB: a history of single requests would keep well under a
    # MiB; under load 2.7 MiB of the 64 were done before the wait once. An eighth, then.)
    for bytes_, count, early in ((disk["io_bytes"], disk["io_requests"], want // 8),
                                 (loader["other_thread"]["io_bytes"],
                                  loader["other_thread"]["io_requests"], want // 2)):
        assert want - early <= bytes_ <= want + OWN_IO, \
            report["os"]["total"]["block_io"]["read"]
        assert count >= (want - early) // (64 << 10)


def test_kernel_waiting_on_the_gpu(gs, tmp_path):
    """A kernel launched in time into a free stream that still starts 30 ms late: its stream
    was told to wait for an event recorded after another stream's long kernel."""
    pf = tmp_path / "t.pftrace"
    report, truth, _ = gs.trace(["wl_queue"], opts=["--inject", "--stacks", "off",
                                                    "--perfetto", str(pf)])
    queued = [x for x in report["findings"]["longest"] if x["kind"] == "queue_wait"]
    waited = [x for x in queued if x["after_event_wait"]]
    assert len(waited) == 1
    q = waited[0]
    # The kernel after it did not wait. (The warm-up launches before it may show a short
    # wait: the double notices that our gate opened only at its next call.)
    assert not [x for x in queued if x["at_ns"] > q["at_ns"]]
    assert q["cause"] == "queued" and q["kernel"] == "short_kernel" and q["after_event_wait"]
    # The wait is the long kernel's run (less what of it came before the launch returned).
    long_ns = truth["queue:long_ns"]
    assert long_ns - 2000000 <= q["queued_ns"] <= long_ns + 100000
    b = q["busy_with"]
    assert b["kernel"] == "long_kernel" and b["pid"] == q["pid"] and b["stream"] != q["stream"]
    assert q["queued_ns"] - 10000 <= b["overlap_ns"] <= q["queued_ns"]
    assert "was waiting for an event (cuStreamWaitEvent); GPU 0 was running stream %s's " \
        "long_kernel (pid %d) for " % (b["stream"], q["pid"]) in q["text"]
    assert q["text"].startswith("kernel short_kernel on stream %s waited " % q["stream"])
    # On the timeline: an instant on the stream's track, where the wait began.
    t = Trace(str(pf))
    marks = [i for i in t.instants if i["cat"] == "finding" and
             i["args"]["finding"] == q["text"]]
    assert len(marks) == 1 and t.tracks[marks[0]["track"]]["name"].startswith("stream 0x")


def test_no_queue_waits_without_gpu_times(gsr):
    """Kernel probes see launch calls only: when a kernel started is not known."""
    report, _, _ = gsr.trace(["wl_queue"], opts=["--stacks", "off"])
    assert not [x for x in report["findings"]["longest"] if x["kind"] == "queue_wait"]


def test_findings_in_the_text_report(gsr):
    p = gsr.run(["run", "-q", "--inject", "--stacks", "off", "--", gsr.wl("wl_stall"), DISK_DIR],
                check_rc=0)
    lines = p.stderr.splitlines()
    i = [k for k, line in enumerate(lines)
         if line.startswith("Findings (GPU streams idle waiting for a launch, kernels waiting "
                            "on the GPU: ")][0]
    found = "\n".join(lines[i + 1:i + 4])
    assert "was blocked in pread64() on " in found
    assert "was asleep in clock_nanosleep() for " in found
    assert "was asleep in futex() for " in found and "; meanwhile its thread " in found


def test_launch_gaps_without_gpu_times(gs):
    """Kernel probes see launch calls only: the planted stalls are gaps of 10 ms or more
    between launches into the stream, explained the same way."""
    report, truth, _ = gs.trace(["wl_stall", DISK_DIR], opts=["--stacks", "off"])
    f = report["findings"]
    assert f["gaps"] >= 3 and {x["kind"] for x in f["longest"]} == {"launch_gap"}
    disk, nap, loader = planted(f)
    assert disk["cause"] == "disk" and disk["syscall"] == "pread64"
    # (Once in a suite run: on_cpu, in clock_nanosleep; not seen again in 12 runs under two
    # busy loops. What it found, and what was lost, say why next time.)
    assert nap["cause"] == "blocked" and nap["syscall"] == "clock_nanosleep", \
        (nap, summary(f), report["drops"])
    assert loader["other_thread"]["syscall"] == "pread64"
    assert " got no launch for " in disk["text"] and "may still have had work queued" \
        in disk["text"]


def test_no_findings_without_the_os_plane(gsr):
    # Without the OS plane nothing says what the thread did.
    for opts in (["--inject", "--no-os"], ["--no-os"]):
        report, _, _ = gsr.trace(["wl_stall", DISK_DIR], opts=opts)
        assert report["findings"] == {"gaps": 0, "longest": []}
