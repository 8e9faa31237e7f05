"""gpuscope as an attacker and an operator meet it (docs/security.md): rings another user
writes, a library that must never end its program, slow HTTP peers, outputs of a root
session. Each test here failed on the code before its fix."""
import json
import os
import pathlib
import shutil
import signal
import socket
import struct
import tempfile
import threading
import time
import urllib.request

import pytest

from conftest import ROOT, needs_root
from rings import Ring
from test_exporter import agent, value  # noqa: F401 (the fixture)


def rings_lost(a):
    return value(a.metrics(), "gpuscope_inject_rings_lost_total")


# ---- 1. a ring file cut short under the agent's mapping -----------------------------------

def test_truncated_ring_is_lost_not_the_agent(agent, tmp_path):
    """The owner of a ring truncates it while the agent has it mapped: the next read would
    be SIGBUS in the root agent. It is an error for that ring alone."""
    d = tmp_path / "inject"
    a = agent(args=["--inject-dir", str(d), "--no-nvml"])
    ring = Ring(d)
    a.wait_for(lambda m: value(m, "gpuscope_inject_processes") == 1)
    ring.truncate()
    m = a.wait_for(lambda m: value(m, "gpuscope_inject_rings_lost_total") == 1)
    assert value(m, "gpuscope_inject_processes") == 0
    assert a.p.poll() is None
    assert a.get("/healthz")[0] == 200
    ring.close()


@needs_root
def test_truncated_ring_under_run_inject(gs, tmp_path):
    """The traced program cuts its own ring: gpuscope finishes, the program's status is its
    own, the ring counts as lost."""
    prog = ("import ctypes, glob, os, time\n"
            "c = ctypes.CDLL('libcuda.so.1')\n"
            "assert c.cuInit(0) == 0\n"
            "ring = os.path.join(os.environ['GPUSCOPE_INJECT_DIR'], '%d.ring' % os.getpid())\n"
            "ino = ' %d ' % os.stat(ring).st_ino\n"
            "def mapped_by_another():\n"
            "    for m in glob.glob('/proc/[0-9]*/maps'):\n"
            "        try:\n"
            "            if m != '/proc/%d/maps' % os.getpid() and ino in open(m).read():\n"
            "                return True\n"
            "        except OSError:\n"
            "            pass\n"
            "deadline = time.time() + 20\n"
            "while not mapped_by_another() and time.time() < deadline:\n"
            "    time.sleep(0.02)\n"
            "os.truncate(ring, 0)\n"
            "time.sleep(0.3)\n")
    js = tmp_path / "r.json"
    p = gs.run(["run", "-q", "--inject", "--json=%s" % js, "--", "python3", "-c", prog])
    assert p.returncode == 0, p.stderr
    assert "cut short" in p.stderr, p.stderr
    r = json.loads(js.read_text())
    assert r["drops"]["rings_lost"] == 1, r["drops"]


# ---- 2. a ring that lies about who it is, or what it counted ------------------------------

def test_ring_named_after_another_process_is_refused(agent, tmp_path):
    """A ring named after pid 1 that no process of its owner maps: nobody's (before, it was
    read as pid 1's when the kernel probes were off)."""
    d = tmp_path / "inject"
    a = agent(args=["--inject-dir", str(d), "--no-nvml"])
    forged = Ring(d, pid=1, mapped=False)
    m = a.wait_for(lambda m: rings_lost(a) == 1)
    assert value(m, "gpuscope_inject_processes") == 0
    assert not os.path.exists(forged.path)


@needs_root
def test_ring_of_another_user_is_refused(agent, tmp_path):
    """A ring owned by one user and mapped by a process of another proves nothing."""
    d = tmp_path / "inject"
    a = agent(args=["--inject-dir", str(d), "--no-nvml"])
    ring = Ring(d, uid=65534)
    a.wait_for(lambda m: rings_lost(a) == 1)
    assert value(a.metrics(), "gpuscope_inject_processes") == 0
    ring.close()


def test_ring_header_counters_are_bounded(agent, tmp_path):
    """A ring's header carries its drop counters; its writer may set them to anything. The
    agent believes no more than a process could have counted in the ring's life."""
    d = tmp_path / "inject"
    a = agent(args=["--inject-dir", str(d), "--no-nvml"])
    t0 = time.monotonic()
    ring = Ring(d, drops=0xe6 << 56, unwrapped=1 << 63, created_ns=time.monotonic_ns())
    m = a.wait_for(lambda m: value(m, "gpuscope_inject_processes") == 1 and
                   value(m, "gpuscope_dropped_events_total") > 0)
    age = time.monotonic() - t0
    dropped = value(m, "gpuscope_dropped_events_total")
    # 25 counters, each at most 100 million a second of the ring's life (plus a second).
    assert 0 < dropped <= 25 * 1e8 * (age + 2), dropped
    ring.close()


# ---- 3. the library inside the program: nothing it meets may end it -----------------------

def fatbin_claiming(size):
    """The fuzz seed's LZ fatbin (nvcc --compress-mode=speed), its PTX entry saying it
    decompresses to `size` bytes (within the parser's bound, so the library allocates)."""
    b = bytearray(open(os.path.join(ROOT, "tests", "fuzz", "seeds", "fatbin",
                                    "k-speed.fatbin"), "rb").read())
    off = struct.unpack_from("<H", b, 6)[0]
    while off < len(b):
        kind, hsize, payload = struct.unpack_from("<HxxIQ", b, off)
        if kind == 1:
            struct.pack_into("<Q", b, off + 56, size)
            return bytes(b)
        off += hsize + payload
    raise AssertionError("no PTX entry")


@needs_root
def test_library_out_of_memory_never_ends_the_program(gs, tmp_path):
    """The library reads the device code a program loads (--device-code). A fatbin whose
    PTX claims 200 MiB, in a process that may map only 64 MiB more: the allocation fails.
    Before, the library's allocator called exit(2) inside the program."""
    crafted = tmp_path / "claims-200m.fatbin"
    crafted.write_bytes(fatbin_claiming(200 << 20))
    rec, js, truth = tmp_path / "r.gsrec", tmp_path / "r.json", tmp_path / "t.json"
    p = gs.run(["run", "-o", str(rec), "--inject", "--device-code", "--",
                gs.wl("wl_devcode"), "limit:64", "library:%s" % crafted],
               env=gs.env(GS_TRUTH=truth))
    assert p.returncode == 0, p.stderr
    assert json.loads(truth.read_text())["launches"] == 0
    q = gs.run(["report", str(rec), "--json=%s" % js])
    assert q.returncode == 0, q.stderr
    mods = json.loads(js.read_text())["device_code"]["modules"]
    assert len(mods) == 1 and mods[0]["error"] == (
        "entry at 10976: out of memory for its 209715200 bytes"), mods


# ---- 5. the exporter's peers: slow ones must not hold up the others ------------------------

def trickle(port, n):
    """n connections that send a request's first bytes, then keep them coming slowly."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"G")
        socks.append(s)
    return socks


def test_slow_clients_do_not_block_scrapes(agent):
    """100 connections from the scraper's own address trickle a byte a second (before, 16
    of them took every connection that address was allowed). 50 scrapes are served as
    usual meanwhile, and the tricklers are cut at their deadline."""
    a = agent(args=["--no-nvml"])
    socks = trickle(a.port, 100)
    stop = threading.Event()

    def keep_trickling():
        while not stop.wait(1):
            for s in socks:
                try:
                    s.send(b"E")
                except OSError:
                    pass
    t = threading.Thread(target=keep_trickling, daemon=True)
    t.start()
    try:
        for _ in range(50):
            req = urllib.request.Request("http://127.0.0.1:%d/metrics" % a.port)
            with urllib.request.urlopen(req, timeout=2) as r:
                assert r.status == 200 and b"gpuscope_build_info" in r.read()
        # Cut within their deadline (5 s) and a reaper's round; the agent says how many.
        m = a.wait_for(lambda m: value(m, "gpuscope_exporter_connections_cut_total") >= 100,
                       timeout=20)
        for s in socks:
            s.settimeout(5)
            try:
                assert s.recv(1024) == b""
            except ConnectionResetError:
                pass
        assert value(m, "gpuscope_exporter_connections_cut_total") == 100
    finally:
        stop.set()
        t.join()
        for s in socks:
            s.close()


# ---- 6. sudo gpuscope run: the program runs as its user, the outputs are the user's -----

@pytest.fixture
def shared_dir():
    """A directory the unprivileged user (nobody) can reach and write to."""
    d = tempfile.mkdtemp(prefix="gs-shared-", dir="/tmp")
    os.chmod(d, 0o777)
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


@needs_root
def test_user_option_runs_the_command_as_that_user(gs, tmp_path, shared_dir):
    d = shared_dir
    ids = d / "ids"
    js = tmp_path / "r.json"
    p = gs.run(["run", "-q", "-u", "nobody", "--json=%s" % js, "--", "/usr/bin/python3", "-c",
                "import os; open(%r, 'w').write('%%d %%d %%s' %% (os.getuid(), os.getgid(), "
                "os.getgroups()))" % str(ids)])
    assert p.returncode == 0, p.stderr
    assert ids.read_text() == "65534 65534 [65534]"
    assert json.loads(js.read_text())["session"]["command"].startswith("/usr/bin/python3 -c")


@needs_root
def test_user_option_with_the_in_process_plane(gs, tmp_path, shared_dir):
    """The rings of a command run as another user are made in the session's directory
    and read as that user's."""
    d = shared_dir
    js = tmp_path / "r.json"
    p = gs.run(["run", "-q", "-u", "nobody", "--inject", "--json=%s" % js, "--",
                gs.wl("wl_driver")], env=gs.env(GS_TRUTH=d / "truth.json"))
    assert p.returncode == 0, p.stderr
    report = json.loads(js.read_text())
    truth = json.loads((d / "truth.json").read_text())
    assert report["kernels"]["launches"] == truth["launches"] and truth["launches"] > 0
    assert report["drops"]["rings_lost"] == 0


def test_user_option_bad_input(gs):
    p = gs.run(["run", "-u", "no-such-user-here", "--", "true"])
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == ["gpuscope: run: --user: no user "
                                             "'no-such-user-here'"]


@needs_root
def test_outputs_are_private_and_the_sudo_users(gs, tmp_path):
    """Under sudo, what gpuscope creates is the user's who ran sudo, and private (the
    command line and environment-derived names are in it). A file that was there keeps its
    owner and mode."""
    kept = tmp_path / "kept.json"
    kept.write_text("")
    os.chmod(kept, 0o644)
    files = {"-o": tmp_path / "r.gsrec", "--folded": tmp_path / "f.txt",
             "--perfetto": tmp_path / "t.pftrace", "--chrome": tmp_path / "t.json",
             "--memory-map": tmp_path / "m.svg"}
    args = ["run", "-q", "--json=%s" % kept]
    for opt, path in files.items():
        args += [opt, str(path)]
    p = gs.run(args + ["--", gs.wl("wl_driver")],
               env=gs.env(SUDO_UID="65534", SUDO_GID="65534", SUDO_USER="nobody",
                          GS_TRUTH=tmp_path / "t"))
    assert p.returncode == 0, p.stderr
    for path in files.values():
        st = os.stat(path)
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (65534, 65534, 0o600), path
        assert st.st_size > 0, path
    st = os.stat(kept)
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o644) and st.st_size > 0


@pytest.mark.parametrize("opt", ["-o", "--json", "--folded", "--memory-map", "--perfetto"])
def test_output_paths_are_checked_before_the_command_runs(gs, tmp_path, opt):
    marker = tmp_path / "ran"
    bad = str(tmp_path / "no" / "such" / "dir" / "out")
    p = gs.run(["run", "-q"] + ([opt + "=" + bad] if opt == "--json" else [opt, bad]) +
               ["--", "touch", str(marker)])
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and "No such file or directory" in p.stderr
    assert not marker.exists()


# ---- 7. small ones: SIGTERM's status, a report written onto a directory ----------------------

@needs_root
def test_sigterm_to_gpuscope_alone_is_143(gs, tmp_path):
    from conftest import wait_for
    from test_faults import start
    gate = tmp_path / "gate"
    tracer = start(gs, ["run", "-q", "--", gs.wl("wl_driver"), "--wait", str(gate)])
    child = None
    try:
        wait_for(str(gate) + ".ready")
        child = int(open("/proc/%d/task/%d/children" % (tracer.pid, tracer.pid)).read())
        tracer.send_signal(signal.SIGTERM)
        out, err = tracer.communicate(timeout=30)
        assert tracer.returncode == 128 + signal.SIGTERM, err
        assert "still running and will not be traced further" in err
    finally:
        if tracer.poll() is None:
            tracer.proc.kill()
        if child:
            os.kill(child, signal.SIGKILL)


def test_report_onto_a_directory(gs, tmp_path):
    marker = tmp_path / "ran"
    for args in (["--json=%s" % tmp_path], ["--folded", str(tmp_path)], ["-o", str(tmp_path)]):
        p = gs.run(["run", "-q"] + args + ["--", "touch", str(marker)])
        assert p.returncode == 2
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].endswith(
            "'%s': it is a directory (give a file name)" % tmp_path), lines
        assert not marker.exists()
