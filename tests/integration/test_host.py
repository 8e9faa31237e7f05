"""Host facts are records (src/source/host.c, the NVML source's GPU identity): a report, its
JSON and both timelines of a recording equal those of the live run, and say what the
machine, its GPUs, the processes' command lines and cgroups and the block devices were."""
import json
import os

import pytest

from pftrace import Trace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DISK_DIR = os.path.join(ROOT, ".output")  # on a block device (/tmp may be a tmpfs)
NVML = os.path.join(ROOT, ".output", "fakes", "libnvidia-ml.so.1")

WORKLOADS = [
    ([], ["wl_driver", "--fork", "2", "--exec-child"]),
    ([], ["wl_memory", "leak"]),
    ([], ["wl_stack"]),
    ([], ["wl_nccl"]),
    (["--inject"], ["wl_gputime"]),
    ([], ["wl_os", DISK_DIR]),
    ([], ["wl_stall", DISK_DIR]),
]


def nvml_env(gs, tmp_path):
    script = tmp_path / "nvml.script"
    script.write_text("gpus 2\ndriver 580.65.06\ngpu0.mem_total 85899345920\n"
                      "gpu1.mem_total 85899345920\n")
    return gs.env(GPUSCOPE_NVML=NVML, FAKENVML_SCRIPT=str(script))


def live_and_replay(gs, tmp_path, opts, workload, env):
    rec, out = tmp_path / "run.gsrec", {}
    for name in ("live", "replay"):
        out[name] = {k: tmp_path / ("%s.%s" % (name, k)) for k in ("json", "pftrace", "chrome")}
    live, replay = out["live"], out["replay"]
    gs.run(["run", "-q", "-o", str(rec), "--json=%s" % live["json"], "--perfetto",
            str(live["pftrace"]), "--chrome", str(live["chrome"])] + opts + ["--"] +
           [gs.wl(workload[0])] + workload[1:], env=env, check_rc=0)
    text = gs.run(["report", str(rec)], env=env, check_rc=0).stdout
    gs.run(["report", "--json=%s" % replay["json"], "--perfetto", str(replay["pftrace"]),
            "--chrome", str(replay["chrome"]), str(rec)], env=env, check_rc=0)
    return out, text


@pytest.mark.parametrize("opts,workload", WORKLOADS, ids=lambda w: " ".join(w))
def test_replay_equals_the_live_run(gs, tmp_path, opts, workload):
    out, _ = live_and_replay(gs, tmp_path, opts, workload, nvml_env(gs, tmp_path))
    live = json.loads(out["live"]["json"].read_text())
    replay = json.loads(out["replay"]["json"].read_text())
    assert live["host"] is not None and live["host"]["hostname"] == os.uname().nodename
    assert len(live["host"]["gpus"]) == 2
    # Every field, timings included: both come from the same records.
    assert replay == live
    assert json.loads(out["replay"]["chrome"].read_text()) == \
        json.loads(out["live"]["chrome"].read_text())
    assert out["replay"]["pftrace"].read_bytes() == out["live"]["pftrace"].read_bytes()


def meminfo_total():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return None


def own_cgroup():
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def test_the_machine_gpus_and_processes(gs, tmp_path):
    argv = [gs.wl("wl_driver"), "--fork", "1", "--exec-child"]
    out, text = live_and_replay(gs, tmp_path, [], ["wl_driver", "--fork", "1", "--exec-child"],
                                nvml_env(gs, tmp_path))
    r = json.loads(out["replay"]["json"].read_text())
    h = r["host"]
    u = os.uname()
    assert (h["hostname"], h["kernel"], h["arch"]) == (u.nodename, u.release, u.machine)
    assert h["cpus"] == os.sysconf("SC_NPROCESSORS_ONLN")
    assert h["memory_bytes"] == meminfo_total()
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert h["boot_id"] == f.read().strip()
    assert h["gpuscope_version"] == gs.run(["--version"]).stdout.split()[1]
    assert [(g["index"], g["name"], g["uuid"], g["pci_bus_id"], g["memory_bytes"], g["driver"])
            for g in h["gpus"]] == [
        (i, "gpuscope NVML test double", "GPU-fake0000-0000-0000-0000-00000000000%d" % i,
         "00000000:%02X:00.0" % (0x18 + i), 85899345920, "580.65.06") for i in (0, 1)]
    procs = {p["pid"]: p for p in r["processes"]}
    target = procs[r["session"]["target_pid"]]
    assert target["command_line"] == " ".join(argv)
    assert not target["command_line_cut"]
    assert target["cgroup"] == own_cgroup()
    assert target["uid"] == os.getuid()
    # The forked child has its parent's; the exec'd one its own, or, gone before it could
    # be read, the file it executed.
    others = sorted(p["command_line"] for p in r["processes"] if p is not target)
    assert len(others) == 2 and " ".join(argv) in others
    assert [c for c in others if c != " ".join(argv)][0] in (
        "%s --mini" % gs.wl("wl_driver"), "/proc/self/exe")
    assert "  host: %s, Linux %s" % (u.nodename, u.release) in text
    assert "  GPU 1: gpuscope NVML test double, 80.0 GiB, 00000000:19:00.0, " \
           "GPU-fake0000-0000-0000-0000-000000000001" in text
    assert " ".join(argv) in text
    # The timelines: each process's track with its command line.
    tracks = Trace(str(out["replay"]["pftrace"])).tracks.values()
    assert [t["cmdline"] for t in tracks
            if t["kind"] == "process" and t["pid"] == target["pid"]] == [[" ".join(argv)]]
    chrome = json.loads(out["replay"]["chrome"].read_text())["traceEvents"]
    assert {"ph": "M", "name": "process_labels", "pid": target["pid"], "tid": 0,
            "args": {"name": " ".join(argv)}} in chrome


def test_block_devices_named_from_the_recording(gs, tmp_path):
    out, text = live_and_replay(gs, tmp_path, [], ["wl_os", DISK_DIR], nvml_env(gs, tmp_path))
    r = json.loads(out["replay"]["json"].read_text())
    devices = r["os"]["total"]["block_io"]["devices"]
    assert devices
    for d in devices:
        # A name from /sys/dev/block, recorded (major:minor only for one without a name).
        assert ":" not in d["device"], d
        assert os.path.exists("/sys/class/block/%s" % d["device"]), d
        assert "block I/O on %s" % d["device"] in text


def test_long_command_line_is_cut_and_said_so(gs, tmp_path):
    arg = "x" * 3000
    report, _, _ = gs.trace(["wl_driver", "--loops", "1", "--note", arg])
    target = [p for p in report["processes"] if p["pid"] == report["session"]["target_pid"]][0]
    assert target["command_line_cut"]
    assert len(target["command_line"]) == 1023
    assert target["command_line"].startswith(gs.wl("wl_driver") + " --loops 1 --note xxx")
