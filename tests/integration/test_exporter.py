"""gpuscope exporter against the NVML test double (tests/fakes/libnvidia-ml.c), whose values
come from a script file the test rewrites while the agent runs; scraped directly, checked with
promtool, and scraped by a real Prometheus server queried through its HTTP API."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import OUT, ROOT, kill_quietly, needs_root, wait_for

NVML = os.path.join(OUT, "fakes", "libnvidia-ml.so.1")
FAKE_LIBS = ["--lib", os.path.join(OUT, "fakes", "libcuda.so.1"),
             "--lib", os.path.join(OUT, "fakes", "libnccl.so.2")]
# wl_driver's kernels as the exporter names them (demangled).
DRIVER_KERNELS = {"_Z6vecAddPKfS0_Pfi": "vecAdd(float const*, float const*, float*, int)",
                  "_Z5scalePfif": "scale(float*, int, float)",
                  "triton_poi_fused_add_0": "triton_poi_fused_add_0",
                  "_Z9reduceSumPKfPfi": "reduceSum(float const*, float*, int)"}

SCRIPT = """gpus 2
driver 580.99
gpu0.util 42
gpu0.mem_util 17
gpu0.mem_total 85899345920
gpu0.mem_used 10737418240
gpu0.mem_reserved 536870912
gpu0.power_mw 312500
gpu0.energy_mj 123456789
gpu0.temp 61
gpu0.sm_clock 1980
gpu0.mem_clock 2619
gpu0.reasons 4
gpu0.pstate 0
gpu0.sm_active 55
gpu0.tensor_active 30
gpu0.dram_active 20
gpu0.pcie_tx_mibs 100
gpu0.ecc_corrected 3
gpu0.remap_corrected 2
gpu0.proc 4242 1073741824 40 10
gpu0.proc 4343 2147483648 0 0
gpu1.util 7
gpu1.mem_used 1048576
gpu1.gpm 0
gpu1.unsupported GetTotalEnergyConsumption
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def parse(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        assert m, line
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"',
                                      m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def value(metrics, name, **want):
    found = [v for (n, ls), v in metrics.items()
             if n == name and all((k, str(x)) in ls for k, x in want.items())]
    assert len(found) <= 1, (name, want, found)
    return found[0] if found else None


class Agent:
    def __init__(self, binary, tmp, script=SCRIPT, args=(), env=None, ebpf=False,
                 err_file=None):
        self.script = tmp / "nvml.script"
        self.script.write_text(script)
        self.stats = tmp / "nvml.stats"
        self.port = free_port()
        e = dict(os.environ, GPUSCOPE_NVML=NVML, FAKENVML_SCRIPT=str(self.script),
                 FAKENVML_STATS=str(self.stats), ASAN_OPTIONS="detect_leaks=1")
        e.update(env or {})
        self.p = subprocess.Popen([binary, "exporter", "--listen", "127.0.0.1:%d" % self.port,
                                   "--interval", "0.1"] +
                                  (list(args) if ebpf else ["--no-ebpf"] + list(args)),
                                  env=e, stdout=subprocess.PIPE, text=True,
                                  stderr=open(err_file, "w") if err_file else subprocess.PIPE)
        self.err_file = err_file
        deadline = time.time() + 20
        while True:
            try:
                self.get("/healthz")
                break
            except OSError:
                assert self.p.poll() is None, self.p.communicate()
                assert time.time() < deadline, "exporter did not start"
                time.sleep(0.05)

    def get(self, path, method="GET"):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode()

    def metrics(self):
        return parse(self.get("/metrics")[2])

    def rewrite(self, text):
        self.script.write_text(text)
        # (the double re-reads on a new modification time; make sure it is one)
        st = os.stat(self.script)
        os.utime(self.script, ns=(st.st_atime_ns, st.st_mtime_ns + 1000000))

    def wait_for(self, pred, timeout=10):
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if pred(m):
                return m
            assert time.time() < deadline, "condition not met; metrics:\n%s" % m
            time.sleep(0.05)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        out, err = self.p.communicate(timeout=20)
        if self.err_file:  # (a file where the agent may say much: a pipe would fill)
            err = open(self.err_file).read()
        return self.p.returncode, err


@pytest.fixture
def agent(gs, tmp_path):
    agents = []

    def start(**kw):
        a = Agent(gs.binary, tmp_path, **kw)
        agents.append(a)
        return a
    yield start
    for a in agents:
        if a.p.poll() is None:
            rc, err = a.stop()
            assert rc == 0, err
            assert "ERROR: AddressSanitizer" not in err and "runtime error" not in err, err


def test_device_metrics_from_nvml(agent):
    a = agent()
    # (GPM figures need two samples: the first page has none.)
    a.wait_for(lambda m: value(m, "DCGM_FI_PROF_SM_ACTIVE", gpu=0) is not None)
    status, headers, text = a.get("/metrics")
    assert status == 200
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    m = parse(text)
    g0 = dict(gpu=0, uuid="GPU-fake0000-0000-0000-0000-000000000000",
              pci_bus_id="00000000:18:00.0", device="nvidia0",
              model_name="gpuscope NVML test double", hostname=socket.gethostname())
    assert value(m, "DCGM_FI_DEV_GPU_UTIL", **g0) == 42
    assert value(m, "DCGM_FI_DEV_MEM_COPY_UTIL", gpu=0) == 17
    assert value(m, "DCGM_FI_DEV_FB_USED", gpu=0) == 10240
    assert value(m, "DCGM_FI_DEV_FB_RESERVED", gpu=0) == 512
    assert value(m, "DCGM_FI_DEV_FB_FREE", gpu=0) == 81920 - 10240 - 512
    assert value(m, "DCGM_FI_DEV_POWER_USAGE", gpu=0) == 312.5
    assert value(m, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu=0) == 123456789
    assert value(m, "DCGM_FI_DEV_GPU_TEMP", gpu=0) == 61
    assert value(m, "DCGM_FI_DEV_SM_CLOCK", gpu=0) == 1980
    assert value(m, "DCGM_FI_DEV_MEM_CLOCK", gpu=0) == 2619
    assert value(m, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", gpu=0) == 4
    assert value(m, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", gpu=0) == 3
    assert value(m, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", gpu=0) == 2
    # GPM (Hopper+): ratios over the interval between two samples; PCIe in bytes/s.
    assert value(m, "DCGM_FI_PROF_SM_ACTIVE", gpu=0) == 0.55
    assert value(m, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gpu=0) == 0.3
    assert value(m, "DCGM_FI_PROF_DRAM_ACTIVE", gpu=0) == 0.2
    assert value(m, "DCGM_FI_PROF_PCIE_TX_BYTES", gpu=0) == 100 * 1048576
    # Per process (the slow tier).
    assert value(m, "gpuscope_gpu_process_memory_bytes", gpu=0, pid=4242) == 1 << 30
    assert value(m, "gpuscope_gpu_process_memory_bytes", gpu=0, pid=4343) == 2 << 30
    assert value(m, "gpuscope_gpu_process_sm_utilization_ratio", gpu=0, pid=4242) == 0.4
    assert value(m, "gpuscope_gpu_process_sm_utilization_ratio", gpu=0, pid=4343) == 0
    # GPU 1: what it does not support is left out, not shown as 0.
    assert value(m, "DCGM_FI_DEV_GPU_UTIL", gpu=1) == 7
    assert value(m, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu=1) is None
    assert value(m, "DCGM_FI_PROF_SM_ACTIVE", gpu=1) is None
    assert value(m, "gpuscope_nvml_up") == 1
    assert value(m, "gpuscope_gpu_lost", gpu=0) == 0
    assert value(m, "process_resident_memory_bytes") > 0


def test_promtool_finds_nothing_to_fix(agent):
    a = agent()
    text = a.get("/metrics")[2]
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    assert p.returncode == 0 and not p.stdout and not p.stderr, p.stdout + p.stderr


def test_dcgm_labels(agent):
    """--dcgm-labels: the DCGM exporter's exact label names, for dashboards keyed on them."""
    a = agent(args=["--dcgm-labels"])
    m = a.metrics()
    assert value(m, "DCGM_FI_DEV_GPU_UTIL", gpu=0, UUID="GPU-fake0000-0000-0000-0000-000000000000",
                 modelName="gpuscope NVML test double", Hostname=socket.gethostname()) == 42
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in a.get("/metrics")[2]


def test_tiers(agent):
    """Process lists, ECC and remapped rows every 5th sample; utilisation every sample; a
    field a GPU does not support is asked once."""
    a = agent(args=["--slow-every", "5"])
    a.wait_for(lambda m: value(m, "gpuscope_exporter_samples_total") >= 30)
    rc, err = a.stop()
    assert rc == 0, err
    calls = dict(line.split() for line in a.stats.read_text().splitlines())
    util = int(calls["GetUtilizationRates"]) / 2  # two GPUs
    procs = int(calls["GetComputeRunningProcesses_v3"]) / 2
    assert util >= 30 and abs(procs - util / 5) <= 1.5, calls
    assert int(calls["GetTotalEnergyConsumption"]) == procs + 1  # (slow) and GPU 1's one try
    assert int(calls.get("GetPcieThroughput", 0)) == 2 * procs  # GPU 1, no GPM: tx and rx


def test_http_faults(agent):
    a = agent()
    assert a.get("/metrics", method="HEAD")[0] == 200
    for path, code in (("/nope", 404), ("/metrics?x=1", 200)):
        try:
            assert a.get(path)[0] == code
        except urllib.error.HTTPError as e:
            assert e.code == code
    try:
        a.get("/metrics", method="POST")
        assert False, "POST answered"
    except urllib.error.HTTPError as e:
        assert e.code == 405
    # A client that goes away mid-request, and one that says nothing: others are served.
    s = socket.create_connection(("127.0.0.1", a.port))
    s.sendall(b"GET /metr")
    s.close()
    idle = [socket.create_connection(("127.0.0.1", a.port)) for _ in range(8)]
    for _ in range(5):
        assert value(a.metrics(), "gpuscope_nvml_up") == 1
    for s in idle:
        s.close()
    # A client that reads nothing of a large page and hangs up.
    s = socket.create_connection(("127.0.0.1", a.port))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    s.close()
    assert a.get("/metrics")[0] == 200


def test_nvml_errors_at_run_time(agent):
    """A field that starts failing is left out while it fails and counted; a GPU that falls
    off the bus is marked lost (and stays so); XIDs are counted, 79 marks the GPU lost."""
    a = agent()
    a.rewrite(SCRIPT + "gpu0.fail GetPowerUsage\n")
    m = a.wait_for(lambda m: value(m, "DCGM_FI_DEV_POWER_USAGE", gpu=0) is None)
    assert value(m, "DCGM_FI_DEV_GPU_UTIL", gpu=0) == 42
    m = a.wait_for(lambda m: value(m, "gpuscope_nvml_errors_total", field="power") >= 1)
    a.rewrite(SCRIPT)
    a.wait_for(lambda m: value(m, "DCGM_FI_DEV_POWER_USAGE", gpu=0) == 312.5)
    a.rewrite(SCRIPT + "gpu0.xid 1 13\n")
    m = a.wait_for(lambda m: value(m, "gpuscope_xid_errors_total", gpu=0) == 1)
    assert value(m, "DCGM_FI_DEV_XID_ERRORS", gpu=0) == 13 and \
        value(m, "gpuscope_gpu_lost", gpu=0) == 0
    a.rewrite(SCRIPT + "gpu0.xid 2 79\n")
    m = a.wait_for(lambda m: value(m, "gpuscope_gpu_lost", gpu=0) == 1)
    assert value(m, "DCGM_FI_DEV_XID_ERRORS", gpu=0) == 79
    assert value(m, "gpuscope_xid_errors_total", gpu=0) == 2
    a.wait_for(lambda m: value(m, "DCGM_FI_DEV_GPU_UTIL", gpu=0) is None)
    a.rewrite(SCRIPT + "gpu1.lost 1\n")
    m = a.wait_for(lambda m: value(m, "gpuscope_gpu_lost", gpu=1) == 1)
    assert value(m, "DCGM_FI_DEV_GPU_UTIL", gpu=1) is None
    assert value(m, "gpuscope_nvml_up") == 1


@pytest.mark.parametrize("env,why", [
    ({"GPUSCOPE_NVML": "/nonexistent/libnvidia-ml.so.1"}, "NVML not found"),
    ({"FAKENVML_INIT_FAIL": "1"}, "NVML failed to initialise: Driver Not Loaded"),
])
def test_without_nvml_it_still_serves(agent, env, why):
    a = agent(env=env)
    m = a.metrics()
    assert value(m, "gpuscope_nvml_up") == 0 and value(m, "process_cpu_seconds_total") >= 0
    assert not [k for k in m if k[0].startswith("DCGM_")]
    rc, err = a.stop()
    assert rc == 0 and why in err and "serving without device metrics" in err, err


def test_bad_listen_and_port_in_use(gs, tmp_path):
    env = gs.env(GPUSCOPE_NVML=NVML)
    for spec, msg in (("9491", "exporter: --listen wants ADDR:PORT"),
                      ("localhost:9491", "exporter: --listen: 'localhost' is not an IPv4 or "
                                         "IPv6 address"),
                      ("127.0.0.1:99999", "exporter: --listen wants ADDR:PORT")):
        p = gs.run(["exporter", "--listen", spec], env=env)
        assert p.returncode == 1 and p.stderr.startswith("gpuscope: " + msg), p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    p = gs.run(["exporter", "--listen", "127.0.0.1:%d" % port], env=env)
    s.close()
    assert p.returncode == 2
    assert p.stderr.strip() == ("gpuscope: exporter: cannot listen on 127.0.0.1:%d: Address "
                                "already in use (another exporter? --listen another port)"
                                % port)
    p = gs.run(["exporter", "--interval", "0"], env=env)
    assert p.returncode == 1 and "--interval wants seconds" in p.stderr


def prom_query(port, q):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": q}))
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus is not installed")
def test_prometheus_server_scrapes_the_exporter(agent, gs, tmp_path):
    """A real Prometheus server scrapes the agent every second while a test-double workload
    runs; PromQL through its HTTP API gives the scripted device values (and follows them
    when they change) and the workload's own figures."""
    root = os.geteuid() == 0
    inject = tmp_path / "inject"
    a = agent(ebpf=root, args=FAKE_LIBS + ["--retain", "120"] +
              (["--inject-dir", str(inject)] if root else []))
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                   "scrape_configs:\n  - job_name: gpuscope\n    static_configs:\n"
                   "      - targets: ['127.0.0.1:%d']\n" % a.port)
    prom = subprocess.Popen(["prometheus", "--config.file=%s" % cfg,
                             "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
                             "--web.listen-address=127.0.0.1:%d" % port],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60

        def until(q, pred):
            while True:
                try:
                    r = prom_query(port, q)
                    if r and pred(r):
                        return r
                except (OSError, urllib.error.URLError):
                    pass
                assert prom.poll() is None, prom.communicate()[1][-2000:]
                assert time.time() < deadline, "Prometheus never answered %s" % q
                time.sleep(0.25)

        r = until('DCGM_FI_DEV_GPU_UTIL{gpu="0"}', lambda r: True)
        assert float(r[0]["value"][1]) == 42 and r[0]["metric"]["job"] == "gpuscope"
        assert r[0]["metric"]["uuid"] == "GPU-fake0000-0000-0000-0000-000000000000"
        r = until('sum(gpuscope_gpu_process_memory_bytes)', lambda r: True)
        assert float(r[0]["value"][1]) == 3 << 30
        r = until('up{job="gpuscope"}', lambda r: True)
        assert float(r[0]["value"][1]) == 1
        if os.geteuid() == 0:
            truth = run_workload(gs, tmp_path, "wl_driver")
            r = until('sum(gpuscope_kernel_launches_total{comm="wl_driver"})',
                      lambda r: float(r[0]["value"][1]) == truth["launches"])
            r = until('max(gpuscope_process_device_memory_peak_bytes{comm="wl_driver"})',
                      lambda r: float(r[0]["value"][1]) == truth["peak:device"])
            run_workload(gs, tmp_path, "wl_nccl")
            # GPU time per kernel, from a program that preloads the in-process library.
            p = subprocess.run([gs.wl("wl_gputime")], capture_output=True, text=True,
                               env=preload_env(gs, inject, tmp_path / "t.json", **GPU_ENV),
                               timeout=60)
            assert p.returncode == 0, p.stderr
            # The Grafana dashboard: every panel's query gives data.
            dash = json.loads(open(os.path.join(ROOT, "deploy", "grafana",
                                                "gpuscope-dashboard.json")).read())
            for panel in dash["panels"]:
                q = panel["targets"][0]["expr"].replace("$instance", ".*").replace(
                    "$gpu", ".*").replace("$__rate_interval", "15s")
                until(q, lambda r: len(r) > 0)
        a.rewrite(SCRIPT.replace("gpu0.util 42", "gpu0.util 77"))
        until('DCGM_FI_DEV_GPU_UTIL{gpu="0"}', lambda r: float(r[0]["value"][1]) == 77)
        # Energy as a counter Prometheus can take a rate of.
        a.rewrite(SCRIPT.replace("gpu0.energy_mj 123456789", "gpu0.energy_mj 123556789"))
        until('increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0"}[30s])',
              lambda r: float(r[0]["value"][1]) > 0)
    finally:
        prom.send_signal(signal.SIGTERM)
        prom.wait(timeout=30)


def run_workload(gs, tmp_path, name, *args):
    truth = tmp_path / ("%s.truth.json" % name)
    p = subprocess.run([gs.wl(name)] + list(args), env=gs.env(GS_TRUTH=truth),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(truth.read_text())


def pids_of(m, name="gpuscope_kernel_launches_total"):
    return {dict(ls)["pid"] for (n, ls) in m if n == name}


def run_workload_as(gs, tmp_path, pid, name, *args):
    """run_workload, the process given pid (the kernel's next pid set just before it is
    made: tried again where another process took it first)."""
    truth = tmp_path / ("%s.again.truth.json" % name)
    for _ in range(50):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen([gs.wl(name)] + list(args), env=gs.env(GS_TRUTH=truth),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert p.wait(timeout=60) == 0
        if p.pid == pid:
            return json.loads(truth.read_text())
    pytest.fail("pid %d not given to %s in 50 tries" % (pid, name))


@needs_root
def test_pid_given_out_again(agent, gs, tmp_path):
    """A process that exits stays in the metrics for --retain; where its pid is given to a
    new CUDA process meanwhile (pid_max is 32,768 on many hosts), the new one's series are
    its own: its launches and memory not added to the dead one's, and not dropped when the
    dead one's time would have been up."""
    a = agent(ebpf=True, args=FAKE_LIBS + ["--retain", "60"])
    before = a.metrics()
    truth = run_workload(gs, tmp_path, "wl_driver")
    m = a.wait_for(lambda m: pids_of(m) - pids_of(before))
    pid = int((pids_of(m) - pids_of(before)).pop())

    def launches(m):
        return sum(v for (n, ls), v in m.items()
                   if n == "gpuscope_kernel_launches_total" and ("pid", str(pid)) in ls)

    a.wait_for(lambda m: launches(m) == truth["launches"])
    time.sleep(1)  # (retired: its records all in)
    again = run_workload_as(gs, tmp_path, pid, "wl_driver", "--loops", "2")
    assert again["launches"] != truth["launches"]
    m = a.wait_for(lambda m: launches(m) == again["launches"])
    time.sleep(1)  # (its records all read: not one run's added to the other's)
    m = a.metrics()
    assert launches(m) == again["launches"], (launches(m), truth["launches"])
    assert value(m, "gpuscope_process_device_memory_bytes", pid=pid, gpu=0) == \
        again["outstanding:device"]


@needs_root
def test_per_process_metrics_from_the_probes(agent, gs, tmp_path):
    """Every CUDA process on the node, as the kernel probes see it: launches by kernel,
    device memory by GPU, copies, synchronisation, NCCL, errors; gone a while after it
    exits."""
    a = agent(ebpf=True, args=FAKE_LIBS + ["--retain", "3"])
    before = a.metrics()
    truth = run_workload(gs, tmp_path, "wl_driver")
    m = a.wait_for(lambda m: pids_of(m) - pids_of(before))
    pid = (pids_of(m) - pids_of(before)).pop()
    m = a.wait_for(lambda m: value(m, "gpuscope_process_device_memory_peak_bytes", pid=pid,
                                   gpu=0) == truth["peak:device"])
    launches = {dict(ls)["kernel"]: v for (n, ls), v in m.items()
                if n == "gpuscope_kernel_launches_total" and ("pid", pid) in ls}
    assert launches == {DRIVER_KERNELS[k[7:]]: v for k, v in truth.items()
                        if k.startswith("launch:")}
    assert sum(launches.values()) == truth["launches"]
    assert value(m, "gpuscope_process_device_memory_bytes", pid=pid, gpu=0) == \
        truth["outstanding:device"]
    assert all(dict(ls)["comm"] == "wl_driver" for (n, ls) in m if ("pid", pid) in ls)
    # (wl_driver's set captured into its graph: its 4096 bytes at each of 4 replays.)
    graphed = {"memset": 3 * 4096}
    for d in ("HtoD", "DtoH", "DtoD", "peer", "memset"):
        assert value(m, "gpuscope_copy_bytes_total", direction=d) - \
            (value(before, "gpuscope_copy_bytes_total", direction=d) or 0) == \
            truth["copy:%s:bytes" % d] + graphed.get(d, 0), d
    assert value(m, "gpuscope_cuda_errors_total", api="cuMemAlloc_v2",
                 error="CUDA_ERROR_OUT_OF_MEMORY") >= truth["error:cuMemAlloc_v2:2"]
    assert value(m, "gpuscope_sync_wait_seconds_total", api="cuStreamSynchronize") > 0
    assert value(m, "gpuscope_dropped_events_total") == 0
    # NCCL: calls and their duration histogram.
    nt = run_workload(gs, tmp_path, "wl_nccl")
    m = a.wait_for(lambda m: (value(m, "gpuscope_nccl_calls_total", op="all_reduce") or 0) >=
                   nt["nccl:all_reduce:count"])
    for op in ("all_reduce", "all_gather", "reduce_scatter", "reduce", "send", "recv"):
        n = value(m, "gpuscope_nccl_calls_total", op=op)
        assert n == nt["nccl:%s:count" % op], op
        assert value(m, "gpuscope_nccl_call_duration_seconds_count", op=op) == n
        assert value(m, "gpuscope_nccl_call_duration_seconds_bucket", op=op, le="+Inf") == n
    # Gone: after --retain, its series are not shown any more.
    a.wait_for(lambda m: pid not in pids_of(m) and
               pid not in pids_of(m, "gpuscope_process_device_memory_bytes"))
    text = a.get("/metrics")[2]
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    assert p.returncode == 0 and not p.stdout + p.stderr, p.stdout + p.stderr


@needs_root
def test_kernels_of_a_process_running_before_the_exporter(agent, gs, tmp_path):
    """A process that looked its kernels up before the exporter started: its launches by
    kernel, under their names as read from the driver's objects (source/kernel_names.c);
    without them (GPUSCOPE_NO_DRIVER_NAMES=1), as unknown kernels."""
    for env in ({}, {"GPUSCOPE_NO_DRIVER_NAMES": "1"}):
        gate, stay, truth = (tmp_path / ("%s%d" % (n, len(env))) for n in ("gate", "stay", "t"))
        wl = subprocess.Popen([gs.wl("wl_driver"), "--wait", str(gate), "--linger", str(stay)],
                              env=gs.env(GS_TRUTH=truth))
        try:
            wait_for(str(gate) + ".ready")
            a = agent(ebpf=True, args=FAKE_LIBS + ["--retain", "30"], env=env)
            gate.write_text("go")
            wait_for(str(truth))
            t = json.loads(truth.read_text())
            m = a.wait_for(lambda m: sum(v for (n, ls), v in m.items()
                                         if n == "gpuscope_kernel_launches_total" and
                                         ("pid", str(wl.pid)) in ls) == t["launches"])
            launches = {dict(ls)["kernel"]: v for (n, ls), v in m.items()
                        if n == "gpuscope_kernel_launches_total" and ("pid", str(wl.pid)) in ls}
            if env:
                assert all(k.startswith("unknown 0x") for k in launches), launches
            else:
                assert launches == {DRIVER_KERNELS[k[7:]]: v for k, v in t.items()
                                    if k.startswith("launch:")}
            a.stop()
        finally:
            stay.write_text("go")
            wl.wait(timeout=60)
            kill_quietly(wl)


@needs_root
def test_top_kernels_and_other(agent, gs, tmp_path):
    a = agent(ebpf=True, args=FAKE_LIBS + ["--top-kernels", "2", "--retain", "30"])
    truth = run_workload(gs, tmp_path, "wl_driver")
    m = a.wait_for(lambda m: any(n == "gpuscope_kernel_launches_total" and
                                 ("kernel", "other") in ls for (n, ls) in m))
    mine = {dict(ls)["kernel"]: v for (n, ls), v in m.items()
            if n == "gpuscope_kernel_launches_total"}
    assert mine == {DRIVER_KERNELS["_Z6vecAddPKfS0_Pfi"]: 112,
                    DRIVER_KERNELS["_Z5scalePfif"]: 23, "other": 8}
    assert sum(mine.values()) == truth["launches"]


@needs_root
def test_inject_beside_the_exporter(agent, gs):
    """The exporter's return probes on libcuda replace return addresses with the kernel's
    trampoline: `gpuscope run --inject` on the same node still counts a driver tail call
    (cuLaunchKernel_ptsz into cuLaunchKernel) once."""
    agent(ebpf=True, args=FAKE_LIBS + ["--no-nvml"])
    report, truth, _ = gs.trace(["wl_driver"], opts=["--inject"])
    assert report["kernels"]["launches"] == truth["launches"] == 143
    assert report["kernels"]["by_api"]["cuLaunchKernel"] == truth["launch_api:cuLaunchKernel"]


def test_top_once_json_gpus(gs, tmp_path):
    """gpuscope top --once --json: the GPUs as NVML (the double) has them."""
    script = tmp_path / "nvml.script"
    script.write_text(SCRIPT)
    p = gs.run(["top", "--once", "--json", "--interval", "0.3", "--no-ebpf"],
               env=gs.env(GPUSCOPE_NVML=NVML, FAKENVML_SCRIPT=script), check_rc=0)
    v = json.loads(p.stdout)
    assert 0.3 <= v["interval_s"] < 5 and v["processes"] == []
    g0, g1 = v["gpus"]
    assert (g0["index"], g0["utilization_percent"], g0["memory_used_bytes"],
            g0["power_watts"], g0["temperature_c"]) == (0, 42, 10 << 30, 312.5, 61)
    assert g0["sm_active"] == 0.55 and "sm_active" not in g1 and not g0["lost"]


@needs_root
def test_top_once_json_processes(gs, tmp_path):
    """A workload that runs during the interval: its launches (and their rate), device
    memory, copies and top kernels."""
    top = subprocess.Popen([gs.binary, "top", "--once", "--json", "--interval", "3",
                            "--no-nvml"] + FAKE_LIBS, env=gs.env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    # Its interval starts once its probes are attached (over 1.5 s with asan on a loaded
    # machine: a fixed wait missed the workload): it says so on stderr.
    assert top.stderr.readline().startswith("gpuscope: top: watching for 3.0 s")
    truth = run_workload(gs, tmp_path, "wl_driver")
    out, err = top.communicate(timeout=60)
    assert top.returncode == 0, err
    v = json.loads(out)
    procs = [p for p in v["processes"] if p["comm"] == "wl_driver"]
    assert len(procs) == 1, v
    p = procs[0]
    assert p["launches"] == truth["launches"] and not p["running"]
    assert abs(p["launches_per_s"] * v["interval_s"] - truth["launches"]) < 0.01
    assert p["device_memory_peak_bytes"] >= truth["peak:device"]
    assert p["copy_bytes_per_s"] > 0
    k = p["top_kernels"]
    assert [x["kernel"] for x in k[:2]] == [DRIVER_KERNELS["_Z6vecAddPKfS0_Pfi"],
                                            DRIVER_KERNELS["_Z5scalePfif"]]
    assert k[0]["launches"] == 112


def test_top_bad_options(gs):
    p = gs.run(["top", "--json"])
    assert p.returncode == 1 and p.stderr.strip() == \
        "gpuscope: top: --json goes with --once (a live view is text)"
    p = gs.run(["top", "--interval", "x"])
    assert p.returncode == 1 and "--interval wants seconds" in p.stderr


# The in-process plane through the agent (--inject-dir): programs preload the library from
# the agent's directory and get GPU time per kernel (the double's simulated event clock).
GPU_ENV = {"FAKECUDA_KERNEL_NS": "200000", "FAKECUDA_GBPS": "1", "FAKECUDA_DEVICES": "2",
           "GPUSCOPE_FIRST_GATE_US": "20000", "GPUSCOPE_WATCHDOG_US": "10000"}


def preload_env(gs, d, truth, **extra):
    return gs.env(GS_TRUTH=truth, LD_PRELOAD=d / "libgpuscope-inject.so",
                  GPUSCOPE_INJECT_DIR=d, **extra)


def by_kernel(m, name, pid):
    return {dict(ls)["kernel"]: v for (n, ls), v in m.items()
            if n == name and ("pid", pid) in ls}


def check_gputime_through_agent(a, gs, tmp_path, d, argv_prefix=()):
    truth_path = tmp_path / "gputime.truth.json"
    before = a.metrics()
    p = subprocess.run(list(argv_prefix) + [gs.wl("wl_gputime"), "--devices", "2"],
                       env=preload_env(gs, d, truth_path, **GPU_ENV), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    truth = json.loads(truth_path.read_text())
    # Its ring read to the end (the process is gone) and removed.
    m = a.wait_for(lambda m: pids_of(m) - pids_of(before) and
                   value(m, "gpuscope_inject_processes") == 0)
    pid = (pids_of(m) - pids_of(before)).pop()
    # Every launch once: the kernel probes' records of the calls the ring has are left out.
    # (wl_gputime: busy 20 + 3 captured into a graph + 4 on device 1; idle 10 + 5 _ptsz)
    assert by_kernel(m, "gpuscope_kernel_launches_total", pid) == {"busy": 27, "idle": 15}
    timed = by_kernel(m, "gpuscope_kernel_gpu_timed_launches_total", pid)
    secs = by_kernel(m, "gpuscope_kernel_gpu_seconds_total", pid)
    # (A gate the watchdog had to open, on a loaded machine, leaves its launch untimed.)
    assert 20 <= timed["busy"] <= 24 and 11 <= timed["idle"] <= 15, timed
    for k, want in (("busy", truth["gpu:busy:ns"]), ("idle", truth["gpu:idle:ns"])):
        assert abs(secs[k] / timed[k] * 1e9 - want) <= 2000, (k, secs[k], timed[k], want)
    assert value(m, "gpuscope_process_device_memory_peak_bytes", pid=pid, gpu=1) == \
        truth["mem:dev1:peak"]
    return pid


@needs_root
def test_in_process_plane_through_the_agent(agent, gs, tmp_path):
    d = tmp_path / "inject"
    a = agent(ebpf=True, args=FAKE_LIBS + ["--inject-dir", str(d), "--retain", "30"])
    assert stat_mode(os.stat(d)) == 0o1777 and (d / "agent.lock").exists()
    assert os.stat(d / "libgpuscope-inject.so").st_mode & 0o777 == 0o755
    check_gputime_through_agent(a, gs, tmp_path, d)
    # wl_driver through the ring: the same counts as the kernel probes give it.
    before = a.metrics()
    truth_path = tmp_path / "driver.truth.json"
    p = subprocess.run([gs.wl("wl_driver")], env=preload_env(gs, d, truth_path),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    truth = json.loads(truth_path.read_text())
    m = a.wait_for(lambda m: pids_of(m) - pids_of(before) and
                   value(m, "gpuscope_inject_processes") == 0)
    pid = (pids_of(m) - pids_of(before)).pop()
    assert by_kernel(m, "gpuscope_kernel_launches_total", pid) == \
        {DRIVER_KERNELS[k[7:]]: v for k, v in truth.items() if k.startswith("launch:")}
    assert value(m, "gpuscope_process_device_memory_peak_bytes", pid=pid, gpu=0) == \
        truth["peak:device"]
    # Rings of processes that are gone are read out and removed.
    assert not list(d.glob("*.ring")), list(d.iterdir())
    assert value(a.metrics(), "gpuscope_dropped_events_total") == 0


@needs_root
def test_in_process_plane_from_another_pid_namespace(agent, gs, tmp_path):
    """A program in its own pid namespace (a container) writes its ring under its own pid;
    the agent finds the process by who maps the ring, and labels it with the node's pid."""
    if not shutil.which("unshare"):
        pytest.skip("no unshare")
    d = tmp_path / "inject"
    a = agent(ebpf=True, args=FAKE_LIBS + ["--inject-dir", str(d), "--retain", "30"])
    pid = check_gputime_through_agent(a, gs, tmp_path, d,
                                      argv_prefix=["unshare", "--pid", "--fork"])
    assert pid not in ("1", "2")


@needs_root
def test_in_process_plane_without_kernel_probes(agent, gs, tmp_path):
    """--no-ebpf --inject-dir: the rings alone (what an agent without root could read)."""
    d = tmp_path / "inject"
    a = agent(ebpf=False, args=["--inject-dir", str(d), "--retain", "30"])
    check_gputime_through_agent(a, gs, tmp_path, d)


def test_library_stays_inactive_without_the_agent(agent, gs, tmp_path):
    """The agent gone (its lock free), a program that preloads the library runs untouched and
    writes no ring."""
    d = tmp_path / "inject"
    a = agent(args=["--inject-dir", str(d), "--no-nvml"])
    rc, err = a.stop()
    assert rc == 0, err
    truth_path = tmp_path / "truth.json"
    p = subprocess.run([gs.wl("wl_driver")], env=preload_env(gs, d, truth_path),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert not list(d.glob("*.ring*")), list(d.iterdir())


def test_inject_dir_bad_input(agent, gs, tmp_path):
    env = gs.env(GPUSCOPE_NVML=NVML)
    base = ["exporter", "--no-ebpf", "--no-nvml", "--listen", "127.0.0.1:%d" % free_port()]
    p = gs.run(base + ["--inject-dir", "relative/dir"], env=env)
    assert p.returncode != 0 and "absolute path" in p.stderr
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    p = gs.run(base + ["--inject-dir", str(link)], env=env)
    assert p.returncode != 0 and "symbolic link" in p.stderr
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    p = gs.run(base + ["--inject-dir", str(open_dir)], env=env)
    assert p.returncode != 0 and "not sticky" in p.stderr
    d = tmp_path / "inject"
    agent(args=["--inject-dir", str(d), "--no-nvml"])
    p = gs.run(base + ["--inject-dir", str(d)], env=env)
    assert p.returncode != 0 and "in use by another gpuscope exporter" in p.stderr
    for q in (p,):
        assert len(q.stderr.strip().splitlines()) == 1, q.stderr


def stat_mode(st):
    return st.st_mode & 0o7777


@needs_root
def test_memory_findings_in_the_exporter(agent, gs, tmp_path):
    """Out-of-memory failures by cause, fragmentation and suspected leaks, per process (the
    agent takes no stacks: its sites are the allocating functions)."""
    a = agent(ebpf=True, args=FAKE_LIBS + ["--retain", "30", "--no-nvml"])

    def run(*phases):
        before = pids_of(a.metrics(), "gpuscope_process_device_memory_peak_bytes")
        p = subprocess.run([gs.wl("wl_memory")] + list(phases), capture_output=True, text=True,
                           env=gs.env(GS_TRUTH=tmp_path / "t.json",
                                      FAKECUDA_MEM=str(64 << 20)), timeout=60)
        assert p.returncode == 0, p.stderr
        m = a.wait_for(lambda m: pids_of(m, "gpuscope_process_device_memory_peak_bytes") -
                       before)
        return (pids_of(m, "gpuscope_process_device_memory_peak_bytes") - before).pop()

    pid = run("fragment", "linger")
    m = a.wait_for(lambda m: value(m, "gpuscope_oom_total", pid=pid, cause="fragmentation")
                   == 1)
    assert value(m, "gpuscope_oom_total", pid=pid, cause="exhaustion") == 1
    assert value(m, "gpuscope_oom_total", pid=pid, cause="unclear") == 0
    assert value(m, "gpuscope_memory_fragmentation_ratio", pid=pid, gpu=0) > 0.45
    assert value(m, "gpuscope_memory_leak_suspected_sites", pid=pid) == 0
    pid = run("leak")
    m = a.wait_for(lambda m: value(m, "gpuscope_memory_leak_suspected_sites", pid=pid) == 1)
    assert value(m, "gpuscope_memory_leak_suspected_bytes", pid=pid) > 0
    text = a.get("/metrics")[2]
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    assert p.returncode == 0 and not p.stdout + p.stderr, p.stdout + p.stderr


@needs_root
def test_step_durations_in_the_exporter(agent, gs, tmp_path):
    """A training loop's steps, found online from the launch sequence: a histogram of their
    durations per process, nothing per step (bounded labels)."""
    steps, slow = 300, 7
    a = agent(ebpf=True, args=FAKE_LIBS + ["--retain", "30", "--no-nvml"])
    before = pids_of(a.metrics())
    p = subprocess.run(["/usr/bin/python3",
                        os.path.join(ROOT, "tests", "workloads", "py_steps.py"), str(steps),
                        str(slow)], capture_output=True, text=True, env=gs.env(), timeout=120)
    assert p.returncode == 0, p.stderr
    m = a.wait_for(lambda m: pids_of(m) - before)
    pid = (pids_of(m) - before).pop()
    # (Every step but the last ends with the next one's first launch.)
    m = a.wait_for(lambda m: value(m, "gpuscope_step_duration_seconds_count", pid=pid) ==
                   steps - 1)
    assert value(m, "gpuscope_step_duration_seconds_bucket", pid=pid, le="0.05") == steps - 2
    assert value(m, "gpuscope_step_duration_seconds_bucket", pid=pid, le="0.1") == steps - 1
    assert value(m, "gpuscope_step_duration_seconds_bucket", pid=pid, le="0.001") == 0
    total = value(m, "gpuscope_step_duration_seconds_sum", pid=pid)
    assert 0.08 + (steps - 2) * 0.002 < total < 0.08 + (steps - 2) * 0.02, total
    assert {tuple(sorted(dict(ls))) for (n, ls) in m
            if n.startswith("gpuscope_step_duration_seconds")} <= \
        {("comm", "le", "pid"), ("comm", "pid")}
    text = a.get("/metrics")[2]
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    assert p.returncode == 0 and not p.stdout + p.stderr, p.stdout + p.stderr
