"""Shared fixtures: where the build is, how to run gpuscope against the test doubles."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("GS_OUTPUT", os.path.join(ROOT, ".output"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

BINARIES = {
    "release": os.path.join(OUT, "gpuscope"),
    "asan": os.path.join(OUT, "asan", "gpuscope"),
}


def is_root():
    return os.geteuid() == 0


needs_root = pytest.mark.skipif(not is_root(), reason="eBPF tests need root (sudo make test)")


class Runner:
    """Runs gpuscope (one build flavour) on the test workloads."""

    def __init__(self, binary, tmp_path):
        self.binary = binary
        self.tmp = tmp_path
        self.fakes = os.path.join(OUT, "fakes")
        self.workloads = os.path.join(OUT, "workloads")

    def env(self, **extra):
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = self.fakes
        # ASan's leak check at exit would report libbpf's and libelf's caches as leaks.
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        # No NVML unless a test asks for the double (GPUSCOPE_NVML): run and attach would
        # otherwise find it on LD_LIBRARY_PATH and add device counters to every trace.
        env.setdefault("GPUSCOPE_NVML", "/nonexistent/libnvidia-ml.so.1")
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def wl(self, name):
        return os.path.join(self.workloads, name)

    def run(self, args, env=None, timeout=120, check_rc=None):
        p = subprocess.run([self.binary] + args, env=env or self.env(), capture_output=True,
                           text=True, timeout=timeout)
        if check_rc is not None:
            assert p.returncode == check_rc, "rc %d\nstdout:\n%s\nstderr:\n%s" % (
                p.returncode, p.stdout, p.stderr)
        return p

    def trace(self, workload_args, opts=(), rc=0, env_extra=None):
        """gpuscope run on a workload: returns (report, truth, completed process)."""
        truth_path = self.tmp / "truth.json"
        report_path = self.tmp / "report.json"
        for p in (truth_path, report_path):
            if p.exists():
                p.unlink()
        env = self.env(GS_TRUTH=truth_path, **(env_extra or {}))
        args = ["run", "-q", "--json=%s" % report_path] + list(opts) + ["--"] + \
            [self.wl(workload_args[0])] + list(workload_args[1:])
        p = self.run(args, env=env, check_rc=rc)
        report = json.loads(report_path.read_text())
        if not truth_path.exists():
            pytest.fail("%s wrote no ground truth (%s)" % (workload_args[0], truth_path))
        truth = json.loads(truth_path.read_text())
        return report, truth, p


@pytest.fixture(params=["release", "asan"])
def gs(request, tmp_path):
    """gpuscope, in both the optimised and the AddressSanitizer/UBSan build."""
    binary = BINARIES[request.param]
    if not os.path.exists(binary):
        pytest.fail("%s is not built (make all asan)" % binary)
    return Runner(binary, tmp_path)


@pytest.fixture
def gsr(tmp_path):
    """gpuscope, optimised build only (for tests whose point is not memory safety)."""
    return Runner(BINARIES["release"], tmp_path)


def wait_for(path, timeout=30):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            raise AssertionError("timed out waiting for %s" % path)
        time.sleep(0.02)


def kill_quietly(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
