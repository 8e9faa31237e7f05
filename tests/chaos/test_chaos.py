"""The chaos suite (issue 19): gpuscope under the failures an operator and an attacker
bring -- the target killed mid-burst, gpuscope killed, the disk full, rings overflowing,
thousands of processes, hostile ring writers, slow HTTP peers. Each scenario counts what
the target made against what gpuscope kept, and fails on anything lost that gpuscope had
reported as kept. Small in `make test`; the issue's sizes under `make chaos` (chaos.py)."""
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaos import LONG, row, size  # noqa: E402
from conftest import ROOT, needs_root, wait_for  # noqa: E402
from test_exporter import Agent, value  # noqa: E402
from test_faults import start  # noqa: E402
from test_scale import many_short_processes  # noqa: E402

PLANES = ["uprobe", "inject"]
VECADD = "vecAdd(float const*, float const*, float*, int)"


def opts(plane):
    return ["--inject"] if plane == "inject" else []


def count_of(path):
    """What wl_driver --count wrote: its burst's launches that had returned."""
    try:
        return int.from_bytes(open(path, "rb").read(8), "little")
    except (OSError, ValueError):
        return 0


def truth_of(path, timeout=30):
    """A workload's truth file once it is whole (it is written as the program exits)."""
    deadline = time.time() + timeout
    while True:
        try:
            return json.loads(open(path).read())
        except (OSError, ValueError):
            assert time.time() < deadline, "no truth in %s" % path
            time.sleep(0.05)


def child_of(pid, name="wl_driver"):
    """gpuscope's child that runs name (not its NVML helper, which may have ended by then:
    a ProcessLookupError in CI under load)."""
    for child in open("/proc/%d/task/%d/children" % (pid, pid)).read().split():
        try:
            argv0 = open("/proc/%s/cmdline" % child, "rb").read().split(b"\0")[0]
        except OSError:
            continue
        if os.path.basename(argv0).decode(errors="replace") == name:
            return int(child)
    raise AssertionError("no child of %d runs %s" % (pid, name))


def proc_in(report, pid):
    found = [p for p in report["processes"] if p["pid"] == pid]
    assert len(found) == 1, [p["pid"] for p in report["processes"]]
    return found[0]


def build_of(gs):
    return "ASan" if "/asan/" in gs.binary else "release"


def launch_drops(report):
    return report["drops"]["by_type"].get("launch", 0)


# ---- the target killed mid-burst ---------------------------------------------------------

@needs_root
@pytest.mark.parametrize("plane", PLANES)
def test_target_killed_mid_burst(gsr, tmp_path, plane):
    """SIGKILL to the program while it launches as fast as it can: every launch that had
    returned is in the report (or counted dropped); the one in flight may be too."""
    times, made_all, kept_all, in_flight = size(3, 20), 0, 0, 0
    rnd = random.Random(19)
    for i in range(times):
        gate, count, rep = (tmp_path / ("%s%d" % (k, i)) for k in ("gate", "count", "r.json"))
        tracer = start(gsr, ["run", "-q", "--json=%s" % rep] + opts(plane) + [
            "--", gsr.wl("wl_driver"), "--wait", str(gate), "--seconds", "60",
            "--count", str(count)])
        try:
            wait_for(str(gate) + ".ready")
            child = child_of(tracer.pid)
            gate.write_text("go")
            time.sleep(rnd.uniform(0.1, 0.8))
            os.kill(child, signal.SIGKILL)
            _, err = tracer.communicate(timeout=60)
        finally:
            if tracer.poll() is None:
                tracer.proc.kill()
        assert tracer.returncode == 128 + signal.SIGKILL, err
        made = count_of(count)
        r = json.loads(rep.read_text())
        p = proc_in(r, child)
        kept = p["launches"] + launch_drops(r)
        assert made > 0 and made <= kept <= made + 1, (made, p["launches"], r["drops"])
        made_all += made
        kept_all += kept
        in_flight += kept - made
    row("target SIGKILLed mid-burst", plane,
        "a program launching as fast as it can, killed after 0.1-0.8 s", times, made_all,
        kept_all, 0, "%d of %d in-flight launches also kept" % (in_flight, times))


# ---- gpuscope killed ---------------------------------------------------------------------

@needs_root
@pytest.mark.parametrize("plane", PLANES)
def test_gpuscope_killed_recording_readable(gsr, tmp_path, plane):
    """SIGKILL to gpuscope mid-run: the program finishes all its work as if untraced, and
    the recording reads up to the cut (it says it was cut; nothing past it was claimed)."""
    times, made_all, kept_all, unrecorded = size(2, 10), 0, 0, []
    rnd = random.Random(20)
    for i in range(times):
        gate, count, truth, rec, js = (tmp_path / ("%s%d" % (k, i)) for k in (
            "gate", "count", "truth", "r.gsrec", "r.json"))
        tracer = start(gsr, ["run", "-q", "-o", str(rec)] + opts(plane) + [
            "--", gsr.wl("wl_driver"), "--wait", str(gate), "--seconds", "1.5",
            "--rate", "100000", "--count", str(count)], env=gsr.env(GS_TRUTH=truth))
        wait_for(str(gate) + ".ready")
        gate.write_text("go")
        time.sleep(rnd.uniform(0.2, 1.0))
        before = count_of(count)
        tracer.proc.kill()
        tracer.wait()  # (gone: its probes off, its files closed)
        after = count_of(count)
        wait_for(str(gate) + ".done", timeout=60)
        made = truth_of(truth)["launches"]  # (written at its normal exit)
        assert made == count_of(count) >= after >= before > 0, (made, after, before)
        p = gsr.run(["report", "--json=%s" % js, str(rec)])
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "end record" in p.stderr or "truncated record" in p.stderr, p.stderr
        r = json.loads(js.read_text())
        kept = r["kernels"]["launches"]
        assert r["session"]["complete_recording"] is False
        assert 0 < kept <= after + 1, (kept, after)
        made_all += after
        kept_all += kept
        unrecorded.append(after - kept)
    row("gpuscope SIGKILLed while recording", plane,
        "gpuscope -o killed 0.2-1.0 s into a 1.5 s burst (100 k launches/s); the program "
        "finishes untraced; the recording reported", times, made_all, kept_all, 0,
        "programs all finished; recordings readable, marked incomplete; made by the time "
        "gpuscope was gone but not in the recording: median %d launches (max %d)" % (statistics.median(unrecorded),
                                                   max(unrecorded)))


# ---- the disk full while recording -------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    d = tmp_path / "small"
    d.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if p.returncode:
        pytest.fail("cannot mount a small tmpfs: %s" % p.stderr.strip())
    yield d
    subprocess.run(["umount", "-l", str(d)], check=True)


@needs_root
@pytest.mark.parametrize("plane", PLANES)
def test_disk_full_while_recording(gsr, tmp_path, plane, small_disk):
    """The recording's disk fills mid-run: one line says so, the run's own report is whole,
    exit 2, and the recording reads up to where the disk ended it."""
    times, made_all, kept_all = size(1, 5), 0, 0
    for i in range(times):
        rec, js, js2, truth = small_disk / "r.gsrec", tmp_path / "r.json", tmp_path / "c.json", \
            tmp_path / ("truth%d" % i)
        if rec.exists():
            rec.unlink()
        p = gsr.run(["run", "-q", "-o", str(rec), "--json=%s" % js] + opts(plane) + [
            "--", gsr.wl("wl_driver"), "--seconds", "1", "--rate", "100000"],
            env=gsr.env(GS_TRUTH=truth))
        assert p.returncode == 2, p.stderr
        ours = [ln for ln in p.stderr.splitlines() if ln.startswith("gpuscope")]
        assert ours == ["gpuscope: writing recording '%s' failed: No space left on device"
                        % rec], p.stderr
        made = json.loads(truth.read_text())["launches"]
        r = json.loads(js.read_text())
        assert r["kernels"]["launches"] + launch_drops(r) == made
        c = gsr.run(["report", "--json=%s" % js2, str(rec)])
        assert c.returncode == 2 and "truncated record" in c.stderr, c.stderr
        kept = json.loads(js2.read_text())["kernels"]["launches"]
        assert 0 < kept < made
        made_all += made
        kept_all += r["kernels"]["launches"] + launch_drops(r)
    row("disk full while recording", plane,
        "-o on a 1 MiB tmpfs, 1 s of 100 k launches/s", times, made_all, kept_all, 0,
        "one error line, exit 2; the run's report whole; the recording readable to the "
        "cut (e.g. %d of %d launches)" % (kept, made))


# ---- ring overflow -----------------------------------------------------------------------

@needs_root
@pytest.mark.parametrize("plane", PLANES)
def test_ring_overflow_counted_exactly(gsr, tmp_path, plane):
    """Launches asked for at 2 M a second by two threads (as many as the plane lets through),
    into the smallest ring, for 3 s here and 60 s in make chaos: every launch the program
    made is seen or counted dropped, one for one."""
    seconds = size(3, 60)
    extra = ["--buffer-size", "4096" if plane == "uprobe" else "65536"]  # (the least)
    r, truth, p = gsr.trace(["wl_driver", "--seconds", str(seconds), "--rate", "2000000",
                             "--threads", "2"], opts=opts(plane) + extra)
    made = truth["launches"]
    seen, dropped = r["kernels"]["launches"], launch_drops(r)
    assert seen + dropped == made, (seen, dropped, made)
    events = r["session"]["events"] + r["drops"]["total"]
    row("ring overflow", plane,
        "launches asked at 2 M/s by 2 threads for %d s, a %s ring" % (
            seconds, "4 KiB kernel" if plane == "uprobe" else "64 KiB in-process"), 1, made,
        seen + dropped, 0,
        "%.2f M launches/s, %.2f M records/s made; %d launches dropped and counted"
        % (made / seconds / 1e6, events / seconds / 1e6, dropped))


# ---- thousands of processes --------------------------------------------------------------

@needs_root
@pytest.mark.parametrize("plane", PLANES)
def test_ten_thousand_processes(gsr, tmp_path, plane):
    """Every one of 10,000 short processes in the report; descriptors and shared memory flat,
    memory growing only by the report's row of each process gone."""
    if not LONG:
        pytest.skip("make chaos only (make test runs 5,000: integration/test_scale.py)")
    n = 10000
    r, seen, took = many_short_processes(gsr, tmp_path, plane, n, (1000, n))
    minis = [q for q in r["processes"] if q["comm"] == "wl_driver"]
    kept = sum(q["launches"] for q in minis if q["exited"])
    assert len(minis) == n and kept == 7 * n and r["drops"]["total"] == 0
    # What stays of a process that has gone is its row in the report to come: memory
    # grows by that (about 1.5 kB), never by what a live process holds; descriptors and
    # shared memory do not grow at all.
    grow = seen[n]["rss"] - seen[1000]["rss"]
    assert grow <= 2 * (n - 1000), seen
    assert seen[n]["fds"] <= seen[1000]["fds"] + 8 and seen[n]["shm"] <= 64 << 10, seen
    row("short processes", plane, "%d CUDA processes one after another (ulimit -n 256)" % n,
        n, 7 * n, kept, 0, "%.0f s; RSS %+.1f MB from 1,000 to %d (%.2f kB a process gone); "
        "fds %d -> %d" % (took, grow / 1024, n, grow / (n - 1000), seen[1000]["fds"],
                          seen[n]["fds"]))


# ---- hostile local users of the agent ----------------------------------------------------

HOSTILE = r"""
import mmap, os, random, struct, sys, time
sys.path.insert(0, sys.argv[1])
from rings import Ring, HDR, MIN_DATA
d, seconds, kind, victim = sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
rnd = random.Random(os.getpid())
end = time.time() + seconds
held = []
def forge():
    k = rnd.randrange(4)
    if k == 0:   # named after the victim, mapped by no one
        Ring(d, pid=victim, mapped=False)
    elif k == 1:  # named after the victim, mapped by us
        held.append(Ring(d, pid=victim))
    elif k == 2:  # our own, its counters forged
        held.append(Ring(d, drops=rnd.getrandbits(64), unwrapped=rnd.getrandbits(64),
                         created_ns=rnd.getrandbits(63)))
    else:         # a header that says the data is larger than the file
        r = Ring(d)
        struct.pack_into("<Q", r.map, 16, 1 << 40)
        held.append(r)
while time.time() < end:
    try:
        if kind == "truncate":
            r = Ring(d)
            time.sleep(rnd.uniform(0.05, 0.3))
            r.truncate()
            r.close()
            os.unlink(r.path)
        elif kind == "forge":
            forge()
            time.sleep(0.05)
        elif kind == "flood":  # (past the user's share of 64, held a second)
            held += [Ring(d) for _ in range(70)]
            time.sleep(1)
        else:  # garbage records, and positions that point anywhere
            r = Ring(d)
            for _ in range(20):
                off = HDR + rnd.randrange(MIN_DATA - 64)
                r.map[off:off + 64] = os.urandom(64)
                struct.pack_into("<Q", r.map, 64, rnd.getrandbits(rnd.choice((8, 20, 64))))
                time.sleep(0.02)
            held.append(r)
        while len(held) > 70:  # (let go, and gone: the disk is not filled)
            r = held.pop(0)
            r.close()
            try:
                os.unlink(r.path)
            except OSError:
                pass
    except OSError:
        time.sleep(0.05)
"""


def launches_of(m, pid):
    return int(sum(v for (n, ls), v in m.items()
                   if n == "gpuscope_kernel_launches_total" and ("pid", str(pid)) in ls))


@pytest.fixture
def shared_dir():
    d = tempfile.mkdtemp(prefix="gs-chaos-", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@needs_root
def test_hostile_ring_writers(gs, tmp_path, shared_dir):
    """100 processes of another user truncate, forge, flood and scribble on rings in the
    agent's directory while a victim's programs run through it: the agent stays up and
    serves, every one of the victim's launches is counted as its own and no other's."""
    clients, seconds = size(20, 100), size(6, 60)
    d = os.path.join(shared_dir, "inject")
    a = Agent(gs.binary, tmp_path, args=["--inject-dir", d, "--no-nvml", "--retain", "600"],
              err_file=tmp_path / "agent.err")
    procs = []
    try:
        script = os.path.join(shared_dir, "hostile.py")
        open(script, "w").write(HOSTILE)
        shutil.copy(os.path.join(ROOT, "tests", "integration", "rings.py"), shared_dir)
        victim = subprocess.Popen(["sleep", str(seconds + 30)])  # (a pid the forgers name)
        kinds = ["truncate", "forge", "flood", "garbage"]
        for i in range(clients):
            procs.append(subprocess.Popen(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
                 script, shared_dir, d, str(seconds), kinds[i % 4], str(victim.pid)],
                stderr=subprocess.PIPE, text=True))
        runs, made, kept, scrapes = 0, 0, 0, 0
        end = time.time() + seconds
        while time.time() < end:
            truth = tmp_path / ("truth%d.json" % runs)
            p = subprocess.Popen([gs.wl("wl_driver")], stderr=subprocess.PIPE, text=True,
                                 env=gs.env(GS_TRUTH=truth, GPUSCOPE_INJECT_DIR=d,
                                            LD_PRELOAD=os.path.join(d,
                                                                    "libgpuscope-inject.so")))
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            t = json.loads(truth.read_text())
            m = a.wait_for(lambda m: launches_of(m, p.pid) == t["launches"], timeout=30)
            assert launches_of(m, victim.pid) == 0
            runs += 1
            made += t["launches"]
            kept += launches_of(m, p.pid)
            scrapes += 1
        m = a.metrics()
        assert a.p.poll() is None and a.get("/healthz")[0] == 200
        lost = value(m, "gpuscope_inject_rings_lost_total")
        assert lost > 0
    finally:
        for q in procs:
            q.kill()
        for q in procs:
            q.wait()
        victim.kill()
        if a.p.poll() is None:
            rc, err = a.stop()
            assert rc == 0, err
            assert "ERROR: AddressSanitizer" not in err and "runtime error" not in err, err
    row("hostile ring writers", "agent (%s)" % build_of(gs),
        "%d processes of another user for %d s: rings truncated under the agent, named after "
        "the victim, forged counters and sizes, 70 at a time, random records and positions"
        % (clients, seconds), runs, made, kept, made - kept,
        "the agent up and serving; %d hostile rings refused or lost; victim's %d runs "
        "counted exactly, nothing attributed to the named pid" % (lost, runs))


# ---- slow HTTP peers ---------------------------------------------------------------------

def slow_client(port, kind, stop):
    """One slow peer until stop: it trickles a request a byte a second, says nothing, or
    asks for /metrics and never reads it; cut, it comes back."""
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            stop.wait(0.2)
            continue
        try:
            if kind == "reader":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 50)
            while not stop.wait(1):
                if kind == "trickle":
                    s.send(b"G")
                elif kind == "silent":
                    s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            continue
        except OSError:
            pass
        finally:
            s.close()


def test_slow_http_clients(gs, tmp_path):
    """100 slow peers (trickling, silent, never reading) from the scraper's own address,
    coming back when cut, while /metrics is scraped every 0.2 s: every scrape answered
    within 2 s."""
    clients, seconds = 100, size(10, 60)
    a = Agent(gs.binary, tmp_path, args=["--no-nvml"], err_file=tmp_path / "agent.err")
    stop = threading.Event()
    kinds = ["trickle", "silent", "reader"]
    threads = [threading.Thread(target=slow_client, args=(a.port, kinds[i % 3], stop),
                                daemon=True) for i in range(clients)]
    lat, failed = [], []
    try:
        for t in threads:
            t.start()
        time.sleep(1)
        end = time.time() + seconds
        while time.time() < end:
            t0 = time.time()
            try:
                req = urllib.request.Request("http://127.0.0.1:%d/metrics" % a.port)
                with urllib.request.urlopen(req, timeout=2) as r:
                    assert r.status == 200 and b"gpuscope_build_info" in r.read()
                lat.append(time.time() - t0)
            except OSError as e:
                failed.append(repr(e))
            time.sleep(0.2)
        cut = value(a.metrics(), "gpuscope_exporter_connections_cut_total")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        rc, err = a.stop()
    assert rc == 0 and "ERROR: AddressSanitizer" not in err, err
    assert not failed, failed[:5]
    assert cut >= clients // 3, cut
    row("slow HTTP clients", "exporter (%s)" % build_of(gs),
        "%d peers from the scraper's address for %d s (trickling, silent, not reading; "
        "back when cut)" % (clients, seconds), len(lat) + len(failed), len(lat) + len(failed),
        len(lat), len(failed), "scrape latency median %.1f ms, max %.0f ms; %d slow "
        "connections cut" % (statistics.median(lat) * 1e3, max(lat) * 1e3, cut))
