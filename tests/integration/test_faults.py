"""Faults and bad input with real eBPF: a full ring buffer, signals, a dying target, what
cannot be executed or traced, recordings cut short. Each gets a clear message, the right
exit code, and never a crash or a hang."""
import json
import os
import signal
import struct
import subprocess
import time

import pytest

from conftest import needs_root, wait_for, kill_quietly

pytestmark = needs_root


class Started:
    """gpuscope in the background, its output in files: a traced command that outlives it
    keeps pipes open, files do not."""

    def __init__(self, gs, args, env=None, new_session=False):
        self.out = open(gs.tmp / "gs.out", "w+")
        self.err = open(gs.tmp / "gs.err", "w+")
        self.proc = subprocess.Popen([gs.binary] + args, env=env or gs.env(),
                                     stdout=self.out, stderr=self.err,
                                     start_new_session=new_session)
        self.pid = self.proc.pid

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def communicate(self, timeout):
        self.proc.wait(timeout=timeout)
        self.out.seek(0)
        self.err.seek(0)
        return self.out.read(), self.err.read()

    @property
    def returncode(self):
        return self.proc.returncode

    def wait(self):
        return self.proc.wait()

    def poll(self):
        return self.proc.poll()


def start(gs, args, env=None, new_session=False):
    return Started(gs, args, env, new_session)


def burst_while_stopped(gs, tmp_path, opts, n=20000):
    """Run wl_driver's burst of n launches while gpuscope (run with opts) is stopped, so its
    ring fills. Returns the report and how many launches it saw and counted as dropped."""
    gate = tmp_path / "gate"
    rep = tmp_path / "r.json"
    tracer = start(gs, ["run", "-q"] + opts + ["--json=%s" % rep, "--", gs.wl("wl_driver"),
                                               "--wait", str(gate), "--burst", str(n)])
    try:
        wait_for(str(gate) + ".ready")
        tracer.send_signal(signal.SIGSTOP)
        gate.write_text("go")
        wait_for(str(gate) + ".done", timeout=120)
        tracer.send_signal(signal.SIGCONT)
        out, err = tracer.communicate(timeout=60)
        assert tracer.returncode == 0, err
    finally:
        kill_quietly(tracer.proc)
    report = json.loads(rep.read_text())
    return report, report["kernels"]["launches"], report["drops"]["by_type"].get("launch", 0)


def test_full_ring_buffer_drops_are_counted_exactly(gs, tmp_path):
    """Stop gpuscope while 20000 launches happen into a 4 KiB ring: what is not seen is
    counted as dropped, launch for launch."""
    report, seen, dropped = burst_while_stopped(gs, tmp_path, ["--buffer-size", "4096"])
    assert dropped > 0
    assert seen + dropped == 20000
    assert report["drops"]["total"] >= dropped
    assert report["drops"]["lost_calls"] == 0


def test_sigint_to_gpuscope_alone_detaches_and_reports(gs, tmp_path):
    gate = tmp_path / "gate"
    rec = tmp_path / "r.gsrec"
    tracer = start(gs, ["run", "-q", "-o", str(rec), "--", gs.wl("wl_driver"), "--wait",
                        str(gate)])
    child = None
    try:
        wait_for(str(gate) + ".ready")
        child = int(open("/proc/%d/task/%d/children" % (tracer.pid, tracer.pid)).read())
        tracer.send_signal(signal.SIGINT)
        t0 = time.time()
        out, err = tracer.communicate(timeout=30)
        assert time.time() - t0 < 10
        assert tracer.returncode == 128 + signal.SIGINT
        assert "still running and will not be traced further" in err
        assert "stopped by a signal" in err
        assert os.path.exists("/proc/%d" % child)  # the command is left running
        p = gs.run(["report", "--json", str(rec)], check_rc=0)  # the recording is complete
        assert json.loads(p.stdout)["session"]["interrupted"] is True
    finally:
        kill_quietly(tracer.proc)
        if child:
            os.kill(child, signal.SIGKILL)


def test_sigint_from_the_terminal_ends_both(gs, tmp_path):
    gate = tmp_path / "gate"
    tracer = start(gs, ["run", "-q", "--", gs.wl("wl_driver"), "--wait", str(gate)],
                   new_session=True)
    try:
        wait_for(str(gate) + ".ready")
        os.killpg(tracer.pid, signal.SIGINT)  # what Ctrl-C does
        out, err = tracer.communicate(timeout=30)
        assert tracer.returncode == 128 + signal.SIGINT
        assert "killed by signal 2" in err
        assert "Kernels" in err
    finally:
        kill_quietly(tracer.proc)


def test_target_killed_mid_trace(gs, tmp_path):
    gate = tmp_path / "gate"
    tracer = start(gs, ["run", "-q", "--", gs.wl("wl_driver"), "--wait", str(gate)])
    try:
        wait_for(str(gate) + ".ready")
        child = int(open("/proc/%d/task/%d/children" % (tracer.pid, tracer.pid)).read())
        os.kill(child, signal.SIGKILL)
        out, err = tracer.communicate(timeout=30)
        assert tracer.returncode == 128 + signal.SIGKILL
        assert "killed by signal 9" in err
    finally:
        kill_quietly(tracer.proc)


def test_gpuscope_killed_leaves_the_command_running(gsr, tmp_path):
    gate = tmp_path / "gate"
    tracer = start(gsr, ["run", "-q", "--", gsr.wl("wl_driver"), "--wait", str(gate)])
    wait_for(str(gate) + ".ready")
    tracer.send_signal(signal.SIGKILL)
    tracer.wait()
    gate.write_text("go")
    wait_for(str(gate) + ".done", timeout=60)  # it finished its work, untraced


def test_commands_that_cannot_run(gsr, tmp_path):
    p = gsr.run(["run", "--", "no-such-command-xyz"])
    assert p.returncode == 2
    assert p.stderr == "gpuscope: cannot execute 'no-such-command-xyz': command not found\n"
    notexec = tmp_path / "data.txt"
    notexec.write_text("hello")
    p = gsr.run(["run", "--", str(notexec)])
    assert p.returncode == 2 and "Permission denied" in p.stderr
    badformat = tmp_path / "bad"
    badformat.write_bytes(b"\x7fELF\x02garbage")
    badformat.chmod(0o755)
    p = gsr.run(["run", "-q", "--", str(badformat)])
    assert p.returncode == 2
    assert "cannot execute '%s': Exec format error" % badformat in p.stderr


def test_missing_library(gsr, tmp_path):
    # Without LD_LIBRARY_PATH the workload cannot find libcuda.so.1: the loader says so,
    # gpuscope reports the command's exit status.
    env = gsr.env()
    del env["LD_LIBRARY_PATH"]
    p = gsr.run(["run", "-q", "--", gsr.wl("wl_driver")], env=env)
    assert p.returncode == 127
    assert "libcuda.so.1: cannot open shared object file" in p.stderr
    assert "exited with status 127" in p.stderr


def test_without_privileges(gsr):
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "--inh-caps=-all", gsr.binary, "run", "--", "true"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert "missing CAP_BPF and CAP_PERFMON" in p.stderr
    assert p.stderr.count("\n") == 1


def test_attach_errors(gsr):
    p = gsr.run(["attach", "-p", "4000000"])
    assert p.returncode == 2
    assert p.stderr == "gpuscope: no process with PID 4000000\n"
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        p = gsr.run(["attach", "-p", str(sleeper.pid), "-q"])
        assert p.returncode == 2
        assert "process %d (sleep) has no CUDA or NCCL library loaded" % sleeper.pid in p.stderr
    finally:
        kill_quietly(sleeper)


def test_attach_to_a_thread_traces_its_process(gsr):
    proc = subprocess.Popen(["python3", "-c", "import threading, time\n"
                             "t = threading.Thread(target=time.sleep, args=(30,))\n"
                             "t.start(); print(t.native_id, flush=True); t.join()"],
                            stdout=subprocess.PIPE, text=True)
    try:
        tid = int(proc.stdout.readline())
        p = gsr.run(["attach", "-p", str(tid), "-q"])
        assert "%d is a thread of process %d: tracing the process" % (tid, proc.pid) in p.stderr
        assert "process %d (python3) has no CUDA" % proc.pid in p.stderr
        assert p.returncode == 2
    finally:
        kill_quietly(proc)


def test_recording_errors(gsr, tmp_path):
    p = gsr.run(["run", "-q", "-o", "/nonexistent/dir/r.gsrec", "--", "true"])
    assert p.returncode == 2
    assert "cannot create recording '/nonexistent/dir/r.gsrec': No such file" in p.stderr
    p = gsr.run(["run", "-q", "-o", "/dev/full", "--", gsr.wl("wl_driver")],
                env=gsr.env(GS_TRUTH=tmp_path / "t.json"))
    assert p.returncode == 2
    assert "No space left on device" in p.stderr
    assert "Kernels" in p.stderr  # the report is still given


def make_recording(gsr, tmp_path):
    rec = tmp_path / "r.gsrec"
    gsr.run(["run", "-q", "-o", str(rec), "--json=/dev/null", "--", gsr.wl("wl_driver")],
            env=gsr.env(GS_TRUTH=tmp_path / "t.json"), check_rc=0)
    return rec


def test_lost_calls_are_reported(gs, tmp_path):
    """Calls and OS events the kernel plane lost, for want of room for a thread's state (a
    task storage not made, counted by GS_TRACED_STORAGE, or an entry not kept): carried by
    the recording's drops record, said by the text report and the JSON. (The count itself
    comes from the BPF programs; no test here can make the kernel refuse an allocation.)"""
    import gsrec

    rec = make_recording(gs, tmp_path)
    data = bytearray(rec.read_bytes())
    off, patched = 16, 0
    while off < len(data):
        rtype, _, _, size = struct.unpack_from("<HBBI", data, off)
        if rtype == 13:  # GS_EV_DROPS: by_type[GS_EV_MAX], lost_calls and five more
            body = size - gsrec.HDR.size
            struct.pack_into("<Q", data, off + gsrec.HDR.size + body - 6 * 8, 41)
            patched += 1
        off += size
    assert patched
    lost = tmp_path / "lost.gsrec"
    lost.write_bytes(bytes(data))
    p = gs.run(["report", str(lost)], check_rc=0)
    assert ", 41 calls and OS events lost (no room in the kernel for their state)" in p.stdout
    js = tmp_path / "lost.json"
    gs.run(["report", "--json=%s" % js, str(lost)], check_rc=0)
    assert json.loads(js.read_text())["drops"]["lost_calls"] == 41


def test_truncated_and_corrupt_recordings(gs, tmp_path):
    rec = make_recording(gs, tmp_path)
    data = rec.read_bytes()
    cut = tmp_path / "cut.gsrec"
    cut.write_bytes(data[:len(data) // 2])
    p = gs.run(["report", str(cut)])
    assert p.returncode == 2
    # (cut inside a record, or inside its header)
    assert "truncated record" in p.stderr or "ends without its end record" in p.stderr
    assert "gpuscope report" in p.stdout  # what was there is reported
    bad = bytearray(data)
    bad[16 + 4:16 + 8] = b"\xff\xff\xff\x7f"  # the first record's size field
    corrupt = tmp_path / "corrupt.gsrec"
    corrupt.write_bytes(bytes(bad))
    p = gs.run(["report", str(corrupt)])
    assert p.returncode == 2
    assert "corrupt record at byte 16 (size 2147483647)" in p.stderr
    bad = bytearray(data)
    bad[16 + 28:16 + 32] = b"\x07\x00\x00\x00"  # the session record's mode (offset 28)
    corrupt.write_bytes(bytes(bad))
    p = gs.run(["report", str(corrupt)])
    assert p.returncode == 2
    assert "corrupt record at byte 16: session mode out of range" in p.stderr
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    p = gs.run(["report", str(empty)])
    assert p.returncode == 2
    assert p.stderr == "gpuscope: '%s' is not a gpuscope recording (no GPUSCOPE header)\n" % empty
