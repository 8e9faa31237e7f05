"""bpftime's ABI as an input (tests/bpf/bpftime_abi.bpf.c, written as bpftime's GPU examples
are): its map types 1501-1527 with their meanings, its helpers 502-512, 14 and 25 on the
GPU, kprobe/ and kretprobe/ device programs with no context, and a host uprobe program
beside them, named and left to the host. On the reference interpreter (--run plays thread
(5,1,0) of block (2,0,0), grid 4x1x1, blocks 32x2x1, SM 7, warp 3, lane 5, device 1,
process 4242), with ptxas, and `gpuscope probe` against the test double (which runs no
PTX: the maps' contents there are snapshots written here; bench/device_gpu.sh is the GPU's
part)."""
import json
import os
import re
import shutil
import struct
import subprocess

import pytest

from conftest import ROOT
from test_bpf2ptx import CLANG, assemble
from test_probe import PTX, bundle_maps, probe, write_snapshot

PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
SRC = os.path.join(ROOT, "tests", "bpf", "bpftime_abi.bpf.c")
PID_TGID = 4242 << 32 | 4242


def build(tmp_path, kernel=None):
    out = tmp_path / ("abi-%s.o" % (kernel or "default"))
    subprocess.run([CLANG, "-target", "bpf", "-O2", "-mcpu=v3", "-g"] +
                   (["-DKERNEL=\"%s\"" % kernel] if kernel else []) +
                   ["-c", SRC, "-o", str(out)], check=True, capture_output=True)
    return out


def run(gs, obj, prog):
    p = gs.run(["bpf2ptx", str(obj), "-p", prog, "--run", "00" * 8])
    assert p.returncode == 0, p.stderr
    return dict(f.split("=", 1) for f in p.stdout.split()[1:])


def test_device_programs_translate_and_the_host_program_is_named(gsr, tmp_path):
    obj = build(tmp_path)
    p = gsr.run(["bpf2ptx", str(obj)])
    assert p.returncode == 0, p.stderr
    assert "uprobe_cuda_launch: a host program (section uprobe): left to the host" in p.stderr
    assert "// uprobe_cuda_launch: a host program (section uprobe)" in p.stdout
    assert ".func (.param .b64 ret) cuda__probe(" in p.stdout.replace("  ", " ") or \
        "cuda__probe" in p.stdout
    # The table's layout: bpftime's types as the GPU's kinds (1 array, 2 per-thread,
    # 3 hash, 4 ring); the 1527 ring sized for 1024 threads of 4 records of 16 + 24 bytes.
    layout = {ln.split()[2]: ln.split(" ", 3)[3] for ln in p.stdout.splitlines()
              if ln.startswith("// gs_maps[")}
    assert layout == {"calls": "kind 2 key 4 value 8 entries 2",
                      "lanes": "kind 2 key 4 value 8 entries 1",
                      "counts": "kind 1 key 4 value 8 entries 4",
                      "where": "kind 1 key 4 value 8 entries 2",
                      "blocks": "kind 3 key 4 value 8 entries 8",
                      "events": "kind 4 key 4 value 24 entries 262144",
                      "last_uprobe_time": "kind 1 key 4 value 8 entries 1",
                      # (the ring the printing helpers write, added: 1 MiB)
                      "gs_print": "kind 4 key 0 value 0 entries 1048576"}, layout
    # bpf_printk's formats: read-only data, in the module
    assert ".visible .global .align 8 .b8 gs_rodata[" in p.stdout
    if os.path.exists(PTXAS):
        assemble(p.stdout, tmp_path)
    # Asked for by name, or run: refused, with why.
    for args in (["-p", "uprobe_cuda_launch"], ["-p", "uprobe_cuda_launch", "--run", "00"]):
        p = gsr.run(["bpf2ptx", str(obj)] + args)
        assert p.returncode == 2 and "uprobe_cuda_launch is a host program (section uprobe): " \
            "not translated for the GPU" in p.stderr, p.stderr


def test_map_types_and_helpers_as_bpftime_means_them(gsr, tmp_path):
    obj = build(tmp_path)
    m = run(gsr, obj, "cuda__retprobe")
    # 1502: the thread's own slots (key-major: --run prints the played thread's)
    assert struct.unpack("<2Q", bytes.fromhex(m["calls"])) == (1, 10)
    m = run(gsr, obj, "cuda__probe")
    assert struct.unpack("<4Q", bytes.fromhex(m["counts"])) == (1, 0, 0, 0)  # 1503
    assert struct.unpack("<Q", bytes.fromhex(m["lanes"])) == (5,)  # 1512: lane 5
    assert struct.unpack("<2Q", bytes.fromhex(m["where"])) == (7, 3)  # 1513: SM 7, warp 3
    raw = bytes.fromhex(m["blocks"])  # 1501: block x 2 -> grid x 4
    slots = [struct.unpack_from("<IIIIQ", raw, 24 * i) for i in range(8)]
    assert [(s[2], s[4]) for s in slots if s[0] == 2] == [(2, 4)]
    # 1527 and helper 25: one record, {pid_tgid (14), device (512), thread x + y * 32}
    (rec,) = [r for r in m["events"].split(";") if r]
    size, rest = rec.split("@")
    ns, data = rest.split(":")
    assert int(size) == 24 and int(ns) == 10**9
    assert struct.unpack("<3Q", bytes.fromhex(data)) == (PID_TGID, 1, 5 + 1 * 32)
    assert m["events.drops"] == "0"


def test_printing_from_the_gpu(gsr, tmp_path):
    """Helpers 6 (bpf_printk: its format read-only data) and 501 (ebpf_puts): each call a
    record in the object's printing ring, {helper, length, three arguments, the text};
    the host's formatting of such records is tests/unit/test_gpuprint.c's."""
    m = run(gsr, build(tmp_path), "cuda__print")
    recs = []
    for r in [r for r in m["gs_print"].split(";") if r]:
        size, rest = r.split("@")
        data = bytes.fromhex(rest.split(":")[1])
        helper, n = struct.unpack_from("<II", data)
        assert int(size) == len(data) == 32 + n
        recs.append((helper, struct.unpack_from("<3Q", data, 8), data[32:]))
    # (-7 an int: clang passes its 32 bits; %d reads those)
    assert recs == [(6, (2, 5, 7), b"block %lu thread %lu on SM %lu\n"),
                    (6, ((1 << 32) - 7, 0xab, ord("q")), b"%-4d|%04x|%c|%%\n"),
                    (501, (0, 0, 0), b"done %d")], recs


def test_probe_takes_a_bpftime_object(gsr, tmp_path):
    """Against the test double: the object is taken (its host program named, not run), the
    kernel it names instrumented at entry and exit, each instrumented module's gs_env
    filled with the process and device (helpers 14, 512); and the maps at the end as JSON
    (--json), each per-thread key with its threads' values."""
    obj = build(tmp_path, "vadd")
    k = tmp_path / "k.ptx"
    k.write_text(PTX)
    d = tmp_path / "keep"
    p, launches, _ = probe(gsr, ["-o", str(d), "--threads", "64", str(obj), "--",
                                 gsr.wl("wl_probe"), str(k)], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "uprobe_cuda_launch (section uprobe) is a host program: run in the program " \
        "before each kernel launch call" in p.stderr
    probed = [ln for ln in launches if ln[1] == "vadd"]
    assert probed, launches
    for ln in probed:
        pid_tgid, device = int(ln[6], 16), int(ln[7])
        assert pid_tgid >> 32 == pid_tgid & 0xffffffff and pid_tgid >> 32 > 0, ln
        assert device == 0, ln
    maps = bundle_maps(d)
    names = [x[0] for x in maps]
    calls, counts, blocks = names.index("calls"), names.index("counts"), names.index("blocks")
    # Thread 3 called once (key 0) and ten times (key 1); thread 40 once; counts[2] = 9;
    # the hash map holds block 2 -> 4.
    per = bytearray(2 * 64 * 8)
    struct.pack_into("<Q", per, (0 * 64 + 3) * 8, 1)
    struct.pack_into("<Q", per, (0 * 64 + 40) * 8, 1)
    struct.pack_into("<Q", per, (1 * 64 + 3) * 8, 10)
    h = bytearray(24 * 8)
    struct.pack_into("<IIQQ", h, 24 * 5, 2, 0, 2, 4)
    write_snapshot(d, [(1, "vadd")], {calls: bytes(per), counts: struct.pack("<4Q", 0, 0, 9, 0),
                                      blocks: bytes(h)})
    p = gsr.run(["probe", str(obj), "--replay", str(d), "--json", "-"])
    assert p.returncode == 0, p.stderr
    js = json.loads(p.stdout[p.stdout.index("\n{\n") + 1:])
    by = {x["name"]: x for x in js["maps"]}
    assert by["calls"]["kind"] == "per_thread" and by["calls"]["threads"] == 64
    (ctx,) = by["calls"]["contexts"]
    assert ctx["pid"] == 4242 and ctx["entries"] == [
        {"key": 0, "threads": {"3": 1, "40": 1}}, {"key": 1, "threads": {"3": 10}}]
    assert by["counts"]["contexts"][0]["entries"] == [{"key": 2, "value": 9}]
    assert by["blocks"]["contexts"][0]["entries"] == [{"key": 2, "value": 4}]
    assert by["events"]["kind"] == "ring" and by["events"]["records"] == []
    # The text output says the same, summed over threads.
    assert "map calls (per GPU thread, 2 entries of 8 bytes, summed over threads):\n" \
        "  [0] = 2  (2 threads)\n  [1] = 10  (1 threads)" in p.stdout


def test_cuda_exit_ends_the_thread(gsr, tmp_path):
    """Helper 507 (bpftime's atomizer): the thread ends where it is called, in PTX an `exit`;
    --run's thread (block 2) is past the blocks kept, so it ends before counting."""
    src = os.path.join(ROOT, "tests", "bpf", "bpftime_exit.bpf.c")
    obj = tmp_path / "exit.o"
    subprocess.run([CLANG, "-target", "bpf", "-O2", "-mcpu=v3", "-g", "-c", src, "-o",
                    str(obj)], check=True, capture_output=True)
    m = run(gsr, obj, "cuda__atomizer")
    assert m["r0"] == "0" and struct.unpack("<Q", bytes.fromhex(m["went_on"])) == (0,)
    p = gsr.run(["bpf2ptx", str(obj)])
    assert p.returncode == 0 and "\texit;\n" in p.stdout, p.stderr
    if os.path.exists(PTXAS):
        assemble(p.stdout, tmp_path)


LATE = os.path.join(ROOT, "tests", "bpf", "bpftime_launchlate.bpf.c")


def build_src(tmp_path, src, name, kernel="vadd"):
    out = tmp_path / (name + ".o")
    subprocess.run([CLANG, "-target", "bpf", "-O2", "-mcpu=v3", "-g", "-I",
                    os.path.dirname(LATE), "-DKERNEL=\"%s\"" % kernel, "-c", str(src), "-o",
                    str(out)], check=True, capture_output=True)
    return out


def build_text(tmp_path, text, name):
    """An object from source text written as bpftime's examples are (bpftime.h)."""
    src = tmp_path / (name + ".bpf.c")
    src.write_text('#include "bpftime.h"\n' + text)
    return build_src(tmp_path, src, name)


def map_index(d, name):
    return [m[0] for m in bundle_maps(d)].index(name)


def test_host_programs_run_at_launches_and_share_maps_with_the_gpu(gs, tmp_path):
    """launchlate's shape: a uprobe and a uretprobe on the launch run in the program at each
    of wl_probe's 14 launch calls (every path: kernelParams, extra, cuLaunchKernelEx, the
    library's CUkernel); what they write into an ARRAY and a 1504 map is what the device
    programs read through their gs_maps table at each launch (the double logs the first word
    of host_calls as the kernel finds it); bpf_ktime_get_ns on the host is on the GPU's timer
    (the double's is ours plus five seconds); the host's print is in the output."""
    obj = build_src(tmp_path, LATE, "late")
    k = tmp_path / "k.ptx"
    k.write_text(PTX)
    d = tmp_path / "keep"
    # (host_calls' index in gs_maps, from bpf2ptx's layout: the bundle's order)
    layout = [ln.split()[2] for ln in gs.run(["bpf2ptx", str(obj)]).stdout.splitlines()
              if ln.startswith("// gs_maps[")]
    p, launches, _ = probe(gs, ["-o", str(d), "--json", str(tmp_path / "m.json"), str(obj),
                                "--", gs.wl("wl_probe"), str(k)], tmp_path,
                           FAKECUDA_PROBE_MAP=str(layout.index("host_calls")))
    assert p.returncode == 0, p.stderr
    assert "uprobe_cuda_launch (section uprobe) is a host program: run in the program " \
        "before each kernel launch call" in p.stderr
    assert "uretprobe_cuda_launch (section uretprobe) is a host program: run in the " \
        "program after each kernel launch call" in p.stderr
    vadd = [ln for ln in launches if ln[1] == "vadd"]
    assert len(vadd) == 12, launches
    # (noargs: no probe is for it; its module has PTX)
    assert "12 instrumented, 0 the original code, 0 of kernels with no PTX to instrument, " \
        "2 of kernels no probe is for" in p.stdout, p.stdout
    # Each launch's kernel finds the count of launch calls made so far, this one included:
    # rising, distinct, the last at most 14 (noargs' two launches count, not probed).
    seen = [int(ln[9]) for ln in vadd]
    assert seen == sorted(seen) and len(set(seen)) == 12 and 12 <= seen[-1] <= 14, seen
    js = json.load(open(tmp_path / "m.json"))
    by = {x["name"]: x for x in js["maps"]}
    (ctx,) = by["host_calls"]["contexts"]
    got = {e["key"]: e["value"] for e in ctx["entries"]}
    assert got[0] == 14 and got[1] == 14, got
    assert got[2] == ctx["pid"] > 0, got
    # The latest launch time, on the GPU's timer: within a second of the last launch's.
    (late,) = by["last_uprobe_time"]["contexts"][0]["entries"]
    assert late["key"] == 0 and abs(late["value"] - int(launches[-1][4])) < 10**9, late
    # The host program's bpf_printk: a record of device "host", formatted.
    (rec,) = by["gs_print"]["records"]
    assert rec["device"] == -1 and rec["text"] == "CPU: first launch call, pid %d" % got[2]
    assert "host        CPU: first launch call, pid %d" % got[2] in p.stdout, p.stdout
    # The bundle marks the host's maps shared (host memory): the ARRAYs the uprobe uses
    # and the 1504 map; the GPU's own arrays stay in device memory.
    shared = {ln.split()[1]: ln.split()[7] for ln in
              (d / "bundle").read_bytes().decode("latin-1").splitlines()
              if ln.startswith("map ")}
    assert shared == {"clock_offset": "1", "host_calls": "1", "last_uprobe_time": "1",
                      "time_histogram": "0", "seen": "0", "gs_print": "0"}, shared


def test_a_failing_host_program_is_stopped_and_the_program_goes_on(gs, tmp_path):
    """A host program reading past its context: stopped at its first run with a note, the
    launches made as the program made them, the other host program still run."""
    obj = build_text(tmp_path, """
struct { __uint(type, 2); __uint(max_entries, 2); __type(key, u32); __type(value, u64); }
    n SEC(".maps");
SEC("uprobe") int bad(unsigned long long *ctx) { return ctx[4000] != 0; }
SEC("uretprobe") int good(void *ctx) {
    u32 k = 0; u64 *v = bpf_map_lookup_elem(&n, &k); if (v) *v += 1; return 0; }
SEC("kprobe/vadd") int cuda__probe() { return 0; }
""", "bad")
    k = tmp_path / "k.ptx"
    k.write_text(PTX)
    p, launches, _ = probe(gs, ["-v", "--json", str(tmp_path / "m.json"), str(obj), "--",
                                gs.wl("wl_probe"), str(k)], tmp_path)
    assert p.returncode == 0, p.stderr
    assert len([ln for ln in launches if ln[1] == "vadd"]) == 12
    assert re.search(r"host program bad: instruction \d+ \(opcode 0x79\): memory access "
                     r"outside the stack and the context: not run from then on",
                     p.stdout + p.stderr), p.stdout + p.stderr
    js = json.load(open(tmp_path / "m.json"))
    (m,) = [x for x in js["maps"] if x["name"] == "n"]
    assert m["contexts"][0]["entries"] == [{"key": 0, "value": 14}]


@pytest.mark.parametrize("body,why", [
    ("static long (*rd)(void *, u32, const void *) = (void *)112;\n"
     "SEC(\"uprobe\") int up(void *ctx) { char b[8]; return rd(b, 8, ctx); }",
     "up (section uprobe): instruction 4 calls helper 112; a host program run in the "
     "program has map lookup, update and delete (1-3), bpf_ktime_get_ns (5: the host's "
     "clock on the GPU's global timer), bpf_trace_printk (6), bpf_get_current_pid_tgid "
     "(14) and ebpf_puts (501)"),
    ("struct { __uint(type, 1); __uint(max_entries, 4); __type(key, u32); "
     "__type(value, u64); } h SEC(\".maps\");\n"
     "SEC(\"uprobe\") int up(void *ctx) { u32 k = 0; return bpf_map_lookup_elem(&h, &k) != 0; }",
     "up (section uprobe): instruction 4 refers to map h of type 1: a host program run in "
     "the program shares array maps with the GPU (2, 1503, 1504, 1513, 4-byte keys), "
     "nothing else"),
])
def test_host_programs_gpuscope_cannot_run_are_refused_clearly(gsr, tmp_path, body, why):
    obj = build_text(tmp_path, body + '\nSEC("kprobe/vadd") int cuda__probe() { return 0; }\n',
                     "h")
    p = gsr.run(["probe", str(obj), "--", "/bin/true"])
    assert p.returncode == 2, p.stderr
    assert why in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_host_programs_on_other_functions_are_named_not_run(gsr, tmp_path):
    obj = build_text(tmp_path,
                     'SEC("uprobe//lib/libc.so.6:malloc") int m(void *ctx) { return 0; }\n'
                     'SEC("uprobe/libcudart.so:_Z16cudaLaunchKernelIcE9cudaErrorPKT_4dim3S4_'
                     'PPvmP11CUstream_st") int l(void *ctx) { return 0; }\n'
                     'SEC("tracepoint/sched/sched_switch") int t(void *ctx) { return 0; }\n'
                     'SEC("kprobe/vadd") int cuda__probe() { return 0; }\n', "o")
    p = gsr.run(["probe", str(obj), "--", "/bin/true"])
    assert p.returncode == 0, p.stderr
    assert "m (section uprobe//lib/libc.so.6:malloc) is a host program: not run (gpuscope " \
        "runs uprobe and uretprobe programs on the launch only)" in p.stderr
    assert "t (section tracepoint/sched/sched_switch) is a host program: not run" in p.stderr
    assert "l (section uprobe/libcudart.so:_Z16cudaLaunchKernelIcE9cudaErrorPKT_4dim3S4_" \
        "PPvmP11CUstream_st) is a host program: run in the program before each kernel " \
        "launch call" in p.stderr
