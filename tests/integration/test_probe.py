"""`gpuscope probe` against the test double: the probes' PTX put into the program's kernels as
they load (the instrumented PTX assembles with ptxas), every launch path routed to the
instrumented kernel with its launch parameter (sequence number, time on the GPU's clock, as
the double's clock kernel answered), the maps allocated and their table filled, and every
failure falling back to the original code with the program untouched. The tools' views are
checked on snapshots made here (the double runs no PTX; bench/probe_gpu.sh is the GPU's
part), and bad input gets one clear line."""
import json
import os
import re
import shutil
import struct
import subprocess

import pytest

from test_bpf2ptx import compile_bpf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
OFFSET = 5 * 10**9  # the double's GPU clock: ours plus five seconds

PTX = """.version 8.0
.target sm_90
.address_size 64

.visible .entry noargs()
{
	ret;
}

.visible .entry vadd(
	.param .u64 vadd_param_0,
	.param .u64 vadd_param_1,
	.param .u32 vadd_param_2
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<3>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd1, [vadd_param_0];
	ld.param.u64 %rd2, [vadd_param_1];
	ld.param.u32 %r1, [vadd_param_2];
	mov.u32 %r2, %tid.x;
	setp.ge.s32 %p1, %r2, %r1;
	@%p1 bra $L__done;
	cvta.to.global.u64 %rd3, %rd1;
	mul.wide.s32 %rd4, %r2, 4;
	add.s64 %rd5, %rd3, %rd4;
	ld.global.f32 %f1, [%rd5+4];
	ld.u64 %rd6, [%rd2];
	ld.f32 %f2, [%rd6];
	add.f32 %f3, %f1, %f2;
	st.global.f32 [%rd5], %f3;
$L__done:
	ret;
}
"""

TOOLS = ["kernelretsnoop", "threadhist", "launchlate", "memtrace", "smmap"]


@pytest.fixture
def ptx(tmp_path):
    p = tmp_path / "k.ptx"
    p.write_text(PTX)
    return p


def probe(gs, args, tmp_path, **env):
    dump = tmp_path / "dump"
    dump.mkdir(exist_ok=True)
    log = tmp_path / "launches.log"
    e = gs.env(FAKECUDA_DUMP_PTX=dump, FAKECUDA_PROBE_LOG=log,
               FAKECUDA_GLOBALTIMER_OFFSET=OFFSET, **env)
    p = gs.run(["probe"] + args, env=e)
    launches = [ln.split() for ln in log.read_text().splitlines()] if log.exists() else []
    return p, launches, sorted(dump.iterdir())


def test_every_launch_path_is_routed(gs, ptx, tmp_path):
    p, launches, dumped = probe(gs, ["kernelretsnoop", "--", gs.wl("wl_probe"), str(ptx)],
                                tmp_path)
    assert p.returncode == 0, p.stderr
    # 12 launches of vadd (kernelParams, extra, cuLaunchKernelEx, the library's CUkernel
    # and its function, a reloaded module) and 2 of noargs, all instrumented.
    assert "2 kernels instrumented in 1 process: 14 launches ran instrumented, 0 the " \
        "original code" in p.stdout
    # Every launch of the program accounted for, by the in-process plane's own count.
    assert "the program launched 2 kernels 14 times (the in-process plane's count): 14 " \
        "instrumented, 0 the original code, 0 of kernels with no PTX to instrument" in p.stdout
    names = [ln[1] for ln in launches]
    assert names.count("vadd") == 12 and names.count("noargs") == 2
    # Each with __gs_launch as its last parameter: vadd's three, then it.
    assert {ln[2] for ln in launches if ln[1] == "vadd"} == {"4"}
    assert {ln[2] for ln in launches if ln[1] == "noargs"} == {"1"}
    # Sequence numbers: one per launch, from 1.
    assert sorted(int(ln[3]) for ln in launches) == list(range(1, 15))
    # The launch time is on the GPU's clock: within a second of the double's timer at the
    # launch (which is ours plus OFFSET: a clock not compared would be five seconds off).
    for ln in launches:
        assert abs(int(ln[5]) - int(ln[4])) < 10**9, ln
    # Each kernel is compiled on its own, with its module's other kernels left out: vadd and
    # noargs of the module, vadd of the library and of the module loaded again. What the
    # driver was given assembles.
    assert len(dumped) == 4
    entries = [re.findall(r"\.entry (\w+)", d.read_text()) for d in dumped]
    assert sorted(entries) == [["noargs"], ["vadd"], ["vadd"], ["vadd"]]
    if os.path.exists(PTXAS):
        for d in dumped:
            text = d.read_text()
            assert "__gs_launch" in text and "call (gs_r), gs_probe_on_exit" in text
            r = subprocess.run([PTXAS, "-arch=sm_90", str(d), "-o", str(tmp_path / "o.cubin")],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr


def test_graph_kernel_nodes_are_routed_and_counted_apart_from_launches(gs, ptx, tmp_path):
    """wl_probe's graphs: a captured launch, kernel nodes added and set by the graph API (by
    function, CUkernel, cuGraphAddNode; on the graph and the instantiated graph), two graph
    launches, modules from files. The summary's launches are the program's launch calls; the
    nodes set are counted apart (they are not launches), and every node's run in the
    replays is the instrumented code's."""
    p, launches, _ = probe(gs, ["kernelretsnoop", "--", gs.wl("wl_probe"), str(ptx), "32",
                                "graphs"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "the program launched 2 kernels 17 times (the in-process plane's count): 17 " \
        "instrumented, 0 the original code, 0 of kernels with no PTX to instrument; and 2 " \
        "graph launches (kernel nodes set by the graph API: 8 to the instrumented code, 0 " \
        "to the original)" in p.stdout, p.stdout
    # 17 launches and 2 replays of the graph's 4 nodes, each the instrumented kernel
    names = [ln[1] for ln in launches]
    assert len(names) == 25 and names.count("noargs") == 5, names


def test_a_kernel_that_uses_module_variables_reads_the_programs(gsr, tmp_path):
    # noargs counts its calls in a __device__ variable and reads a __constant__ one: the
    # instrumented copy reads and writes the program's (its __gs_vars hold the addresses
    # of the original module's variables). If one of them cannot be found in the
    # program's module, the kernel runs the original code, with a note.
    ptx = tmp_path / "v.ptx"
    ptx.write_text(PTX.replace(".address_size 64\n",
                               ".address_size 64\n\n.global .align 4 .u32 calls;\n"
                               ".const .align 4 .b8 limit[8];\n")
                   .replace("{\n\tret;\n}", "{\n\t.reg .b32 %r<3>;\n"
                            "\tatom.global.add.u32 %r1, [calls], 1;\n"
                            "\tld.const.u32 %r2, [limit+4];\n\tret;\n}"))
    p, launches, dumped = probe(gsr, ["kernelretsnoop", "--", gsr.wl("wl_probe"), str(ptx)],
                                tmp_path)
    assert p.returncode == 0, p.stderr
    assert "14 launches ran instrumented, 0 the original code" in p.stdout
    assert {ln[1] for ln in launches} == {"vadd", "noargs"}
    for ln in launches:
        # (__gs_vars's slots in the module's order: calls, limit; vadd's reads neither)
        assert ln[8] == ("calls,limit" if ln[1] == "noargs" else "0,0"), ln
    (text,) = [d.read_text() for d in dumped if ".entry noargs" in d.read_text()]
    assert "__gs_vars[2] = {generic(calls), generic(limit)}" in text
    assert "[calls]" not in text and "[limit" not in text and "ld.const" not in text
    if os.path.exists(PTXAS):
        r = subprocess.run([PTXAS, "-arch=sm_90", "-o", str(tmp_path / "v.cubin"), "-"],
                           input=text, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    (tmp_path / "missing").mkdir()
    p, launches, dumped = probe(gsr, ["kernelretsnoop", "--", gsr.wl("wl_probe"), str(ptx)],
                                tmp_path / "missing", FAKECUDA_GLOBAL_MISSING="limit")
    assert p.returncode == 0, p.stderr
    assert "12 launches ran instrumented, 2 the original code" in p.stdout
    assert "its variables' table (limit not found in the program's module: error 500) " \
        "could not be filled: the original code runs" in p.stdout
    assert {ln[1] for ln in launches} == {"vadd"}


@pytest.mark.skipif(not os.path.exists(PTXAS), reason="ptxas is not installed")
def test_a_triton_cubin_is_instrumented_from_the_ptx_in_its_cache(gs, ptx, tmp_path):
    # Triton loads cubins (SASS only) and keeps each kernel's PTX beside the cubin in its
    # cache: the cubin the program loads is found there by its bytes, and the PTX beside
    # it instrumented. Not taken from a file another user could have written, nor beside a
    # cubin that differs.
    cubin = tmp_path / "k.cubin"
    subprocess.run([PTXAS, "-arch=sm_90", str(ptx), "-o", str(cubin)], check=True)
    cache = tmp_path / "cache"
    other = cache / "0otherkernel"
    entry = cache / "6JZR4OQDH3K5G4XQ"
    for d in (other, entry):
        d.mkdir(parents=True)
    b = cubin.read_bytes()
    (other / "k.cubin").write_bytes(b[:64] + bytes([b[64] ^ 1]) + b[65:])
    (other / "k.ptx").write_text("not this one")
    (entry / "k.cubin").write_bytes(cubin.read_bytes())
    (entry / "k.ptx").write_text(PTX)
    (entry / "k.json").write_text("{}")

    def run(name):
        (tmp_path / name).mkdir()
        return probe(gs, ["kernelretsnoop", "--", gs.wl("wl_probe"), str(cubin)],
                     tmp_path / name, TRITON_CACHE_DIR=cache)

    p, launches, _ = run("found")
    assert p.returncode == 0, p.stderr
    assert "a cubin: its PTX from Triton's cache, %s" % entry in p.stdout
    assert "14 launches ran instrumented, 0 the original code" in p.stdout
    assert len(launches) == 14

    os.chmod(entry / "k.ptx", 0o666)
    p, launches, _ = run("writable")
    assert p.returncode == 0, p.stderr
    assert "Triton's cache" not in p.stdout and not launches
    assert "0 launches ran instrumented" in p.stdout or "no kernel instrumented" in p.stdout, \
        p.stdout


def test_cupy_is_asked_for_ptx(gs, tmp_path):
    # CuPy compiles its kernels to cubins (no PTX to instrument) unless CUPY_COMPILE_WITH_PTX
    # is 1: probe sets it for the program, and leaves a value the user gave alone.
    cmd = ["probe", "kernelretsnoop", "--", "sh", "-c", "echo cupy=$CUPY_COMPILE_WITH_PTX"]
    p = gs.run(cmd)
    assert p.returncode == 0 and "cupy=1\n" in p.stdout, p.stdout + p.stderr
    p = gs.run(cmd, env=gs.env(CUPY_COMPILE_WITH_PTX="0"))
    assert p.returncode == 0 and "cupy=0\n" in p.stdout, p.stdout + p.stderr
    p = gs.run(["run", "--inject", "--", "sh", "-c", "echo cupy=$CUPY_COMPILE_WITH_PTX"])
    assert p.returncode == 0 and "cupy=\n" in p.stdout, p.stdout + p.stderr


def test_memory_probes_see_global_and_generic_accesses(gsr, ptx, tmp_path):
    p, launches, dumped = probe(gsr, ["memtrace", "--", gsr.wl("wl_probe"), str(ptx)],
                                tmp_path)
    assert p.returncode == 0, p.stderr
    # noargs has no memory access: memtrace has nothing to put in it.
    assert "12 launches ran instrumented, 2 the original code" in p.stdout
    assert "kernel noargs: none of the probes' points is in it" in p.stdout
    text = dumped[0].read_text()
    vadd = text[text.index(".entry vadd"):]
    # ld.global (8 bytes past the register... +4), two generic loads (global only if
    # isspacep says so), the store; the call goes before each, with the address and size.
    assert vadd.count("call (gs_r), gs_probe_on_access") == 4
    assert "add.s64 gs_a, %rd5, 4;" in vadd
    assert vadd.count("isspacep.global gs_q, gs_a;") == 2
    assert vadd.count("@gs_q call (gs_r)") == 2
    assert vadd.count("st.local.u32 [__gs_ctx+4], 3;") == 3  # loads
    assert vadd.count("st.local.u32 [__gs_ctx+4], 4;") == 1  # the store
    # The predicated branch around them is left as it was.
    assert "@%p1 bra $L__done;" in vadd
    if os.path.exists(PTXAS):
        r = subprocess.run([PTXAS, "-arch=sm_90", str(dumped[0]), "-o",
                            str(tmp_path / "o.cubin")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_a_jit_failure_runs_the_original(gsr, ptx, tmp_path):
    p, launches, _ = probe(gsr, ["smmap", "--", gsr.wl("wl_probe"), str(ptx)], tmp_path,
                           FAKECUDA_JIT_FAIL=1)
    assert p.returncode == 0, p.stderr
    assert "0 launches ran instrumented, 14 the original code" in p.stdout
    assert "the driver's JIT refused the instrumented PTX (error 218)" in p.stdout
    assert launches == []


def test_a_refused_launch_is_made_again_with_the_original(gsr, ptx, tmp_path):
    p, launches, _ = probe(gsr, ["smmap", "--", gsr.wl("wl_probe"), str(ptx)], tmp_path,
                           FAKECUDA_PROBED_FAIL_LAUNCH=1)
    # The program saw every launch succeed (it checks each one).
    assert p.returncode == 0, p.stderr
    assert "the driver refused a launch of the instrumented kernel (error 701)" in p.stdout
    assert "0 launches ran instrumented, 14 the original code" in p.stdout


def test_blocks_too_large_for_the_instrumented_kernel(gsr, ptx, tmp_path):
    # Instrumented, the kernels allow 256 threads a block; the program launches 512.
    p, launches, _ = probe(gsr, ["smmap", "--", gsr.wl("wl_probe"), str(ptx), "512"],
                           tmp_path, FAKECUDA_PROBED_MAX_THREADS=256)
    assert p.returncode == 0, p.stderr
    assert "a block of 512 threads is more than the instrumented kernel allows (256" in p.stdout
    # vadd's 12 launches ran the original; noargs (32 threads) was instrumented.
    assert "2 launches ran instrumented, 12 the original code" in p.stdout


def test_code_without_ptx_is_left_alone(gsr, tmp_path):
    cubin = tmp_path / "k.cubin"
    # A cubin for the double: an ELF whose kernel name it reads from a .text. section.
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("nvcc is not installed")
    (tmp_path / "k.cu").write_text("__global__ void only_sass(int *p) { p[0] = 1; }\n")
    subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-o", str(cubin), str(tmp_path / "k.cu")],
                   check=True, capture_output=True)
    p, launches, dumped = probe(gsr, ["kernelretsnoop", "--", gsr.wl("wl_devcode"),
                                      "data:%s:_Z9only_sassPi" % cubin], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "1 of 1 modules had no PTX (SASS only" in p.stdout
    assert dumped == [] and launches == []
    # Its launch is counted all the same, and its kernel named (probe's count was 0 before:
    # on PyTorch it said 2 launches where the program made 3,005).
    assert "the program launched 1 kernel 3 times (the in-process plane's count): 0 " \
        "instrumented, 0 the original code, 3 of kernels with no PTX to instrument" in p.stdout
    assert re.search(r"\n +3  only_sass\(int\*\): no PTX in its module \(SASS only\)\n",
                     p.stdout), p.stdout


def test_the_ptx_suited_to_the_device_is_chosen(gsr, tmp_path):
    """A fatbin with PTX for compute_80 and compute_100: the newest PTX the device can run
    is instrumented (the driver JITs only PTX for its own architecture or older); for an
    older device, the oldest PTX retargeted to it (PyTorch ships PTX for its newest target
    only), which its JIT refuses if it uses anything newer: then the original runs."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("nvcc is not installed")
    (tmp_path / "k.cu").write_text("__global__ void twoptx() {}\n")
    fatbin = tmp_path / "k.fatbin"
    # (uncompressed: the double reads kernel names from its bytes)
    subprocess.run([nvcc, "-fatbin", "--compress-mode=none",
                    "-gencode", "arch=compute_80,code=compute_80",
                    "-gencode", "arch=compute_100,code=compute_100", "-o", str(fatbin),
                    str(tmp_path / "k.cu")], check=True, capture_output=True)
    for cc, target in (("90", "sm_80"), ("100", "sm_100"), ("120", "sm_100"), ("75", "sm_75")):
        d = tmp_path / cc
        d.mkdir()
        p, launches, dumped = probe(gsr, ["kernelretsnoop", "--", gsr.wl("wl_devcode"),
                                          "fatbin:%s:_Z6twoptxv" % fatbin], d, FAKECUDA_CC=cc)
        assert p.returncode == 0, p.stderr
        assert "3 launches ran instrumented, 0 the original code" in p.stdout, cc
        assert len(dumped) == 1 and re.search(r"\.target %s *\n" % target,
                                              dumped[0].read_text()), cc
        if cc == "75":  # older than any: retargeted, and said
            assert "its PTX is for sm_80, newer than device 0 (sm_75): retargeted to sm_75" \
                in p.stdout
    # The JIT refuses it (it uses something newer): said, and the original runs.
    p, launches, dumped = probe(gsr, ["kernelretsnoop", "--", gsr.wl("wl_devcode"),
                                      "fatbin:%s:_Z6twoptxv" % fatbin], tmp_path / "75",
                                FAKECUDA_CC="75", FAKECUDA_JIT_FAIL="1")
    assert "0 launches ran instrumented, 3 the original code" in p.stdout, p.stdout
    assert "the driver's JIT refused the instrumented PTX" in p.stdout


def test_bad_input(gsr, ptx, tmp_path):
    wl = [gsr.wl("wl_probe"), str(ptx)]
    p = gsr.run(["probe", "nosuchtool", "--"] + wl)
    assert p.returncode == 1 and "no tool named 'nosuchtool'" in p.stderr
    p = gsr.run(["probe", "kernelretsnoop"])
    assert p.returncode == 1 and "no command given" in p.stderr
    p = gsr.run(["probe"])
    assert p.returncode == 1 and "which tool or object" in p.stderr
    p = gsr.run(["probe", str(tmp_path / "missing.bpf.o"), "--"] + wl)
    assert p.returncode == 2 and "not an eBPF object" in p.stderr
    # An object whose map the GPU has no kind for, one with a helper it has no version of,
    # and one without a probe section.
    src = tmp_path / "bad.bpf.c"
    src.write_text("""
#define SEC(s) __attribute__((section(s), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name
struct { __uint(type, 9); __uint(max_entries, 8); __type(key, int); __type(value, long); }
    lru SEC(".maps");
static void *(*lookup)(void *map, const void *key) = (void *)1;
SEC("gpu/exit/*") int uses_lru(void *ctx) { int k = 0; return lookup(&lru, &k) != 0; }
""")
    obj = compile_bpf(str(src), tmp_path / "bad.o")
    p = gsr.run(["probe", str(obj), "--"] + wl)
    assert p.returncode == 2 and "map lru is of type 9" in p.stderr, p.stderr
    src.write_text("""
#define SEC(s) __attribute__((section(s), used))
static long (*ktime)(void) = (void *)5;
SEC("gpu/entry/*") int t(void *ctx) { return ktime(); }
""")
    obj = compile_bpf(str(src), tmp_path / "bad2.o")
    p = gsr.run(["probe", str(obj), "--"] + wl)
    assert p.returncode == 2 and "helper 5 has no GPU version" in p.stderr, p.stderr
    src.write_text("""
#define SEC(s) __attribute__((section(s), used))
SEC("xdp") int t(void *ctx) { return 0; }
""")
    obj = compile_bpf(str(src), tmp_path / "bad3.o")
    p = gsr.run(["probe", str(obj), "--"] + wl)
    assert p.returncode == 2 and "no program in a probe section" in p.stderr
    for r in (p,):
        assert len(r.stderr.strip().splitlines()) == 1
    p = gsr.run(["probe", "kernelretsnoop", "--replay", str(tmp_path / "nothing")])
    assert p.returncode == 2 and "cannot read" in p.stderr


# ---- the tools' views, on snapshots made here ---------------------------------------------

def kept(gsr, tool, ptx, tmp_path):
    """A kept directory of a real run (its bundle gives the maps' layout), the snapshot's
    maps then replaced by what the test writes."""
    d = tmp_path / ("keep-" + tool)
    p, _, _ = probe(gsr, ["-o", str(d), tool, "--", gsr.wl("wl_probe"), str(ptx)], tmp_path)
    assert p.returncode == 0, p.stderr
    return d


def bundle_maps(d):
    maps = []
    for ln in (d / "bundle").read_bytes().decode("latin-1").splitlines():
        if ln.startswith("map "):
            _, name, kind, key, value, entries, threads, _shared = ln.split()
            maps.append((name, int(kind), int(key), int(value), int(entries), int(threads)))
        if ln.startswith(("funcs ", "host ", "rodata ")):
            break
    return maps


def write_snapshot(d, kernels, data, notes=(), stats=()):
    """kernels: [(id, name)]; data: {map index: bytes}."""
    for f in d.iterdir():
        if f.name.startswith("probe."):
            f.unlink()
    out = bytearray(b"gpuscope-probe-snapshot 1\npid 4242\n")
    for kid, name in kernels:
        out += b"kernel %d 1 5 0 %s\n" % (kid, name.encode())
    for n in notes:
        out += b"note " + n.encode() + b"\n"
    for s in stats:
        out += b"stat " + s.encode() + b"\n"
    out += b"ctx 0 90\n"
    for m, blob in sorted(data.items()):
        out += b"data %d %d\n" % (m, len(blob)) + blob
    out += b"end\n"
    (d / "probe.4242").write_bytes(bytes(out))


def u64s(n, values):
    b = bytearray(8 * n)
    for i, v in values.items():
        struct.pack_into("<Q", b, 8 * i, v)
    return bytes(b)


def replay(gsr, tool, d):
    p = gsr.run(["probe", "-v", tool, "--replay", str(d)])
    assert p.returncode == 0, p.stderr
    return p.stdout


STRIPES = 16


def test_kernelretsnoop_view(gsr, ptx, tmp_path):
    d = kept(gsr, "kernelretsnoop", ptx, tmp_path)
    maps = bundle_maps(d)
    names = [m[0] for m in maps]
    hist, stats = names.index("hist"), names.index("stats")
    # Kernel 1: 96 threads in [1024, 2048) ns and 32 in [8192, 16384), split over two
    # stripes; 128 threads, sum, the slowest 9000 ns at block 3 thread (5, 1).
    row = 1 * STRIPES
    h = {(row + 2) * 40 + 10: 64, (row + 5) * 40 + 10: 32, (row + 5) * 40 + 13: 32}
    s = {(row + 2) * 4: 64, (row + 2) * 4 + 1: 64 * 1500, (row + 5) * 4: 64,
         (row + 5) * 4 + 1: 32 * 1500 + 32 * 9000, (row + 5) * 4 + 2: 9000,
         (row + 5) * 4 + 3: (3 << 32) | (1 << 16) | 5, (row + 2) * 4 + 2: 1900}
    write_snapshot(d, [(1, "_Z4vaddPfS_i")], {hist: u64s(maps[hist][4], h),
                                              stats: u64s(maps[stats][4], s)},
                   stats=["clock 0 1800"])
    out = replay(gsr, "kernelretsnoop", d)
    assert "kernel vadd(float*, float*, int)" in out
    assert "128 threads, mean 3.4 us, slowest 9.0 us (block 3, thread (5,1))" in out
    assert "1024 -> 2047     : 96" in out and "8192 -> 16383    : 32" in out
    assert "2048 -> 4095" in out and "device 0: the GPU's clock read to within 0.9 us" in out


def test_threadhist_view(gsr, ptx, tmp_path):
    d = kept(gsr, "threadhist", ptx, tmp_path)
    maps = bundle_maps(d)
    names = [m[0] for m in maps]
    hist, stats = names.index("hist"), names.index("stats")
    row = 0 * STRIPES + 7
    h = {row * 122 + 8: 224, row * 122 + 10: 32}
    s = {row * 5: 256, row * 5 + 1: 224 * 8 + 32 * 10, row * 5 + 2: 10,
         row * 5 + 3: (2 << 32) | 17, row * 5 + 4: 128}
    write_snapshot(d, [(0, "_Z10imbalancedPfi")], {hist: u64s(maps[hist][4], h),
                                                   stats: u64s(maps[stats][4], s)})
    out = replay(gsr, "threadhist", d)
    assert "256 threads, 2112 accesses: min 8, mean 8.25, max 10 a thread; imbalance " \
        "(max/mean) 1.21" in out
    assert "busiest: block 2, thread (17,0) (blocks of 128)" in out
    assert "8 : 224" in out and "10 : 32" in out


def test_launchlate_view(gsr, ptx, tmp_path):
    d = kept(gsr, "launchlate", ptx, tmp_path)
    maps = bundle_maps(d)
    name, kind, key, value, entries, _ = maps[0]
    assert (name, kind, key, value) == ("launches", 3, 8, 16)
    slot = 8 + 8 + 16
    b = bytearray(slot * entries)
    lat = [3000, 5000, 7000, 9000, 200000]
    for i, v in enumerate(lat):
        struct.pack_into("<IIQQQ", b, slot * (100 + i), 2, 0, i + 1, v, 2)
    struct.pack_into("<IIQQQ", b, slot * 200, 3, 0, 99, 1, 2)  # deleted: not counted
    write_snapshot(d, [(2, "_Z4vaddPfS_i")], {0: bytes(b)})
    out = replay(gsr, "launchlate", d)
    assert "5 launches: min 3.0 us, median 7.0 us, p99 200.0 us, max 200.0 us" in out
    assert "2 -> 3        : 1" in out and "128 -> 255      : 1" in out


def test_memtrace_view(gsr, ptx, tmp_path):
    d = kept(gsr, "memtrace", ptx, tmp_path)
    maps = bundle_maps(d)
    # kernel 0's loads: 1024 accesses of 4 bytes, 32 requests, 32 sectors each (strided);
    # its stores: coalesced, 4 sectors each, split over two stripes.
    v = {}
    ld = (0 * 2 + 0) * STRIPES * 4
    st = (0 * 2 + 1) * STRIPES * 4
    v.update({ld + 0: 1024, ld + 1: 32, ld + 2: 1024, ld + 3: 4096})
    v.update({st + 0: 512, st + 1: 16, st + 2: 64, st + 3: 2048,
              st + 4: 512, st + 5: 16, st + 6: 64, st + 7: 2048})
    write_snapshot(d, [(0, "_Z7stridedPKfPf")], {0: u64s(maps[0][4], v)})
    out = replay(gsr, "memtrace", d)
    assert "kernel strided(float const*, float*)" in out
    lines = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.strip().startswith(("loads", "stores"))}
    assert lines["loads"][1:] == ["1024", "4096", "32", "32.00", "4.00", "12%"]
    assert lines["stores"][1:] == ["1024", "4096", "32", "4.00", "4.00", "100%"]


def test_smmap_view(gsr, ptx, tmp_path):
    d = kept(gsr, "smmap", ptx, tmp_path)
    maps = bundle_maps(d)
    # 10 blocks of kernel 3 on 4 SMs of 4: 4, 2, 2, 2 (8 warps a block).
    v = {}
    for sm, blocks in enumerate([4, 2, 2, 2]):
        v[(3 * 256 + sm) * 2] = blocks
        v[(3 * 256 + sm) * 2 + 1] = blocks * 8
    write_snapshot(d, [(3, "_Z5stepsv")], {0: u64s(maps[0][4], v)}, stats=["sms 0 4"])
    out = replay(gsr, "smmap", d)
    assert "10 blocks, 80 warps on 4 of 4 SMs; blocks per SM: min 2, mean 2.5, max 4; " \
        "balance (mean/max) 0.62" in out
    # (half the most warps: the middle of the scale)
    assert "|@+++|" in out


def test_user_maps_view(gsr, ptx, tmp_path):
    obj = tmp_path / "count.o"
    subprocess.run(["clang", "-target", "bpf", "-O2", "-mcpu=v3", "-g", "-I",
                    os.path.join(ROOT, "include"), "-c",
                    os.path.join(ROOT, "bench", "probe", "count.bpf.c"), "-o", str(obj)],
                   check=True, capture_output=True)
    d = tmp_path / "keep-user"
    p, launches, _ = probe(gsr, ["-o", str(d), str(obj), "--", gsr.wl("wl_probe"), str(ptx)],
                           tmp_path)
    assert p.returncode == 0, p.stderr
    # count.bpf.c's exit probe goes into every kernel; the per-block one into vector_add's
    # mangled name only, which this program has not.
    assert "14 launches ran instrumented" in p.stdout
    maps = bundle_maps(d)
    assert [m[:2] for m in maps] == [("threads", 3), ("per_block", 1)]
    slot = 8 + 8 + 8
    h = bytearray(slot * maps[0][4])
    struct.pack_into("<IIQQ", h, slot * 7, 2, 0, 1, 262144)
    struct.pack_into("<IIQQ", h, slot * 9, 2, 0, 0, 32)
    write_snapshot(d, [(0, "noargs"), (1, "vadd")],
                   {0: bytes(h), 1: u64s(64, {0: 256, 63: 256})})
    out = gsr.run(["probe", str(obj), "--replay", str(d)]).stdout
    assert "map threads (hash, 64 entries of 8 bytes):\n  [1] = 262144\n  [0] = 32" in out
    assert "map per_block (array, 64 entries of 8 bytes):\n  [0] = 256\n  [63] = 256" in out


def test_probe_section_names(gsr, tmp_path):
    """gpu/load and gpu/store put a probe before loads or stores only; kprobe/kretprobe (as
    bpftime names them) are entry and exit; bpftime's kprobe/__memcapture is every load and
    store of every kernel."""
    src = tmp_path / "pts.bpf.c"
    src.write_text("""
#define SEC(s) __attribute__((section(s), used))
SEC("gpu/load/vadd") int l(void *c) { return 1; }
SEC("gpu/store/vadd") int s(void *c) { return 2; }
SEC("kprobe/noargs") int e(void *c) { return 3; }
SEC("kretprobe/noargs") int x(void *c) { return 4; }
""")
    obj = compile_bpf(str(src), tmp_path / "pts.o")
    k = tmp_path / "k.ptx"
    k.write_text(PTX)
    p = gsr.run(["bpf2ptx", str(obj), "--into", str(k)])
    assert p.returncode == 0, p.stderr
    assert "2 of 2 kernels instrumented: 1 entry, 1 exit, 3 load and 1 store calls" in p.stderr
    assert "kernel 1 vadd: 3 parameters, __gs_launch at 24" in p.stderr
    src.write_text("""
#define SEC(s) __attribute__((section(s), used))
SEC("kprobe/__memcapture") int cuda__trace(void *c) { return 0; }
""")
    obj = compile_bpf(str(src), tmp_path / "mem.o")
    p = gsr.run(["bpf2ptx", str(obj), "--into", str(k)])
    assert p.returncode == 0, p.stderr
    # vadd's three loads (a global one, two generic) and its store (noargs has none)
    assert "1 of 2 kernels instrumented: 0 entry, 0 exit, 3 load and 1 store calls" in p.stderr


def test_warp_helpers(gsr, tmp_path):
    """522-526 (once-per-warp work): the interpreter plays a warp of 32 lanes holding one
    value (--run's thread is lane 5, so not the leader); the PTX assembles (match.any,
    shfl.sync, vote)."""
    src = tmp_path / "warp.bpf.c"
    src.write_text("""
#define SEC(s) __attribute__((section(s), used))
typedef unsigned long long u64;
static u64 (*unique)(u64) = (void *)522;
static u64 (*count)(u64) = (void *)523;
static u64 (*leader)(u64) = (void *)524;
static u64 (*sum)(u64) = (void *)525;
static u64 (*max)(u64) = (void *)526;
SEC("gpu/exit/*") u64 w(u64 *c) {
    u64 v = c[0];
    c[0] = unique(v); c[1] = count(v); c[2] = leader(v); c[3] = sum(v); c[4] = max(v);
    return 0;
}
""")
    obj = compile_bpf(str(src), tmp_path / "warp.o")
    p = gsr.run(["bpf2ptx", str(obj), "--run", struct.pack("<5Q", 7, 0, 0, 0, 0).hex()])
    assert p.returncode == 0, p.stderr
    ctx = bytes.fromhex(p.stdout.split("ctx=")[1].split()[0])
    assert struct.unpack("<5Q", ctx) == (1, 32, 0, 7 * 32, 7)
    if os.path.exists(PTXAS):
        p = gsr.run(["bpf2ptx", str(obj)])
        (tmp_path / "w.ptx").write_text(p.stdout)
        r = subprocess.run([PTXAS, "-arch=sm_90", str(tmp_path / "w.ptx"), "-o",
                            str(tmp_path / "w.cubin")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_ring_buffer_records_reach_the_event_stream(gs, ptx, tmp_path):
    """A probe's ring: the double writes 5 records {launch sequence, i} into it at each
    launch, as the translated bpf_ringbuf_output would; the plane drains them while the
    program runs into the event stream (the recording kept with -o), and they are printed
    in order with their drops (none: the ring is drained in time)."""
    obj = compile_bpf(os.path.join(ROOT, "tests", "bpf", "probe_ring.bpf.c"),
                      tmp_path / "ring.o")
    keep = tmp_path / "keep"
    p, launches, _ = probe(gs, ["-o", str(keep), "--records", "0", str(obj), "--",
                                gs.wl("wl_probe"), str(ptx)], tmp_path,
                           FAKECUDA_RING_RECORDS="5")
    assert p.returncode == 0, p.stderr
    assert "14 launches ran instrumented" in p.stdout
    assert "ring buffer out (4096 bytes on each device):" in p.stdout
    rows = [ln.split() for ln in p.stdout.splitlines()
            if len(ln.split()) == 6 and re.match(r"\d+\.\d+$", ln.split()[0])]
    recs = [(int(r[4], 16), int(r[5], 16)) for r in rows]
    # Every launch's five records, each launch's in order, none lost.
    assert sorted(recs) == sorted((s, i) for s in range(1, 15) for i in range(5))
    for s in range(1, 15):
        assert [i for q, i in recs if q == s] == list(range(5))
    assert "70 records, 0 dropped (the ring was full)" in p.stdout
    # Times: the GPU's timer turned into ours (the double's runs OFFSET ahead): within the
    # run, not five seconds on.
    times = [float(r[0]) for r in rows]
    assert all(0 <= t < 4 for t in times), times
    # The recording has them as events: gpuscope report counts them.
    r = gs.run(["report", str(keep / "events.gsrec")])
    assert r.returncode == 0, r.stderr
    assert "Device-side probes wrote 70 records (1120 bytes) into GPU ring buffers" in \
        r.stdout + r.stderr
    # In a trace: an instant per record, at its time, on its ring's track under the GPU.
    ch, pf = tmp_path / "trace.json", tmp_path / "trace.pftrace"
    r = gs.run(["report", str(keep / "events.gsrec"), "--chrome", str(ch), "--perfetto",
                str(pf)])
    assert r.returncode == 0, r.stderr
    assert b"probe ring 0 (pid " in pf.read_bytes() and b"probe record" in pf.read_bytes()
    trace = json.loads(ch.read_text())["traceEvents"]
    ring = [e for e in trace if e.get("ph") == "M" and e["name"] == "thread_name" and
            e["args"]["name"].startswith("probe ring 0 (pid ")]
    assert len(ring) == 1 and ring[0]["pid"] == 0  # GPU 0
    got = [e for e in trace if e.get("name") == "probe record"]
    assert len(got) == 70
    assert all(e["pid"] == 0 and e["tid"] == ring[0]["tid"] and e["cat"] == "gpu_probe" and
               e["args"]["bytes"] == 16 for e in got)
    assert sorted((int(e["args"]["u64[0]"], 16), int(e["args"]["u64[1]"], 16))
                  for e in got) == sorted(recs)
    # The bytes as written (little-endian words).
    assert all(e["args"]["data"] == struct.pack("<QQ", int(e["args"]["u64[0]"], 16),
                                                int(e["args"]["u64[1]"], 16)).hex()
               for e in got)
    # --replay shows the same.
    r = gs.run(["probe", str(obj), "--replay", str(keep), "--records", "3"])
    assert r.returncode == 0, r.stderr
    assert "(67 more; --records 0 shows all)" in r.stdout
    assert "70 records, 0 dropped" in r.stdout


def test_ring_buffer_full_drops_are_counted(gs, ptx, tmp_path):
    """More than the ring holds at once (4096 bytes: 128 records of 32): the rest are
    dropped and counted, nothing is overwritten, and the program runs on."""
    obj = compile_bpf(os.path.join(ROOT, "tests", "bpf", "probe_ring.bpf.c"),
                      tmp_path / "ring.o")
    p, launches, _ = probe(gs, ["--records", "1", str(obj), "--", gs.wl("wl_probe"),
                                str(ptx)], tmp_path, FAKECUDA_RING_RECORDS="300")
    assert p.returncode == 0, p.stderr
    m = re.search(r"(\d+) records, (\d+) dropped \(the ring was full\)", p.stdout)
    assert m, p.stdout
    got, dropped = int(m.group(1)), int(m.group(2))
    assert got + dropped == 14 * 300
    assert got >= 128 and dropped >= 300 - 128
