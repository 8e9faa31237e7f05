"""The eBPF -> PTX translator (src/ptx/translate.c) and its reference interpreter
(src/ptx/interp.c), through `gpuscope bpf2ptx`, on programs clang compiles here
(tests/bpf/): the interpreter's results against values computed independently in Python,
per instruction class, and the translated PTX assembled by ptxas. (That the PTX computes
what the interpreter does is checked on a GPU: no GPU here.) No root needed."""
import os
import re
import random
import shutil
import struct
import subprocess

import pytest

from conftest import ROOT

CLANG = shutil.which("clang")
PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
M64 = (1 << 64) - 1
M32 = (1 << 32) - 1
pytestmark = pytest.mark.skipif(not CLANG, reason="clang is not installed")


def compile_bpf(src, out):
    subprocess.run([CLANG, "-target", "bpf", "-O2", "-mcpu=v3", "-g", "-c", str(src), "-o",
                    str(out)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def objs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bpf")
    return {name: compile_bpf(os.path.join(ROOT, "tests", "bpf", "translate_%s.bpf.c" % name),
                              d / ("%s.o" % name))
            for name in ("cases", "refused")}


def run(gs, obj, prog, a, b, out=None):
    ctx = struct.pack("<QQ", a & M64, b & M64) + struct.pack("<8Q", *(out or [0] * 8))
    p = gs.run(["bpf2ptx", str(obj), "-p", prog, "--run", ctx.hex()])
    assert p.returncode == 0, p.stderr
    name, r0, c = p.stdout.split()
    assert name == prog
    c = bytes.fromhex(c.split("=")[1])
    return int(r0.split("=")[1]), list(struct.unpack("<QQ8Q", c)[2:])


def s64(x):
    x &= M64
    return x - (1 << 64) if x >> 63 else x


def s32(x):
    x &= M32
    return x - (1 << 32) if x >> 31 else x


VALUES = [0, 1, 7, 100, 2**31, 2**32 + 5, 2**63, M64, M64 - 99, 0x0102030405060708]


def pairs():
    rng = random.Random(7)
    out = [(a, b) for a in VALUES for b in VALUES]
    out += [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(20)]
    out += [(rng.getrandbits(64), rng.randrange(64)) for _ in range(20)]
    return out


def test_alu64(gsr, objs):
    for a, b in pairs():
        r0, out = run(gsr, objs["cases"], "alu64", a, b)
        sh = b & 63
        want = [(a + b) & M64, (a - b) & M64, (a * b) & M64, a // b if b else 0,
                a % b if b else a, ((a | b) ^ (a & ~b)) & M64,
                ((a << sh) + (a >> sh)) & M64, (s64(a) >> sh) & M64]
        assert out == want, (a, b)
        assert r0 == (-a) & M64


def test_alu32(gsr, objs):
    for a, b in pairs():
        r0, out = run(gsr, objs["cases"], "alu32", a, b)
        x, y, sh = a & M32, b & M32, b & 31
        want = [(x + y) & M32, (x - y) & M32, (x * y) & M32, x // y if y else 0,
                x % y if y else x, ((x | y) ^ (x & ~y)) & M32,
                ((x << sh) + (x >> sh)) & M32, (s32(x) >> sh) & M32]
        assert out == [w & M64 for w in want], (a, b)
        assert r0 == (-x) & M32


def test_byte_swaps(gsr, objs):
    for a in VALUES:
        _, out = run(gsr, objs["cases"], "bswap", a, 0)
        assert out[0] == int.from_bytes((a & 0xffff).to_bytes(2, "little"), "big")
        assert out[1] == int.from_bytes((a & M32).to_bytes(4, "little"), "big")
        assert out[2] == int.from_bytes(a.to_bytes(8, "little"), "big")


def test_branches(gsr, objs):
    for a, b in pairs():
        r0, _ = run(gsr, objs["cases"], "branches", a, b)
        want = ((s64(a) < s64(b)) | (a < b) << 1 | (s32(a) >= s32(b)) << 2 |
                ((a & M32) > (b & M32)) << 3 | (a == b) << 4 | bool(a & b) << 5 |
                (s64(a) <= -5) << 6)
        assert r0 == want, (a, b)


def test_loop_and_stack(gsr, objs):
    for a, b in pairs()[:40]:
        r0, out = run(gsr, objs["cases"], "loop_stack", a, b)
        n = a & 15
        assert r0 == n
        assert out[0] == sum((i * b + 0x1234567890abcdef) & M64 for i in range(n)) & M64


def test_atomics(gsr, objs):
    init = [1, 2, 3, 0, 5, 0, 7, M32]
    for a, b in ((5, 9), (5, 5), (2**40, 3)):
        r0, out = run(gsr, objs["cases"], "atomics", a, b, init)
        swapped = init[4] == a
        assert r0 == init[0]
        assert out[0] == init[0] + a and out[1] == init[1] | b and out[2] == init[2] ^ a
        assert out[3] == init[4] and out[4] == (b if swapped else init[4])
        assert out[5] == init[6] and out[6] == b
        assert out[7] == (init[7] + a) & M32  # a 32-bit add: the upper half untouched


def test_gpu_helpers(gsr, objs):
    """As --run's thread has them: thread (5,1,0) of block (2,0,0), grid 4x1x1, blocks
    32x2x1, lane 5 of warp 3 on SM 7, all lanes active, the timer at 1 s."""
    def pack(x, y, z):
        return x | y << 16 | z << 32
    r0, out = run(gsr, objs["cases"], "gpu_helpers", 0, 0)
    assert r0 == 10**9
    assert out[:6] == [pack(5, 1, 0), pack(2, 0, 0), pack(32, 2, 1), pack(4, 1, 1),
                       pack(5, 3, 7), 0xffffffff]
    # bpf_cuda_exit ends the thread: nothing after it runs.
    r0, out = run(gsr, objs["cases"], "early_exit", 1, 0)
    assert r0 == 0 and out[0] == 0
    r0, out = run(gsr, objs["cases"], "early_exit", 0, 0)
    assert r0 == 2 and out[0] == 1


@pytest.mark.skipif(not os.path.exists(PTXAS), reason="ptxas is not installed")
@pytest.mark.parametrize("sm", [75, 90])
def test_ptx_assembles(gs, objs, tmp_path, sm):
    p = gs.run(["bpf2ptx", str(objs["cases"]), "--sm", str(sm)])
    assert p.returncode == 0, p.stderr
    assert p.stdout.count(".visible .func (.param .b64 ret) ") == 8
    for fn in ("alu64", "alu32", "bswap", "branches", "loop_stack", "atomics", "gpu_helpers",
               "early_exit"):
        assert " %s(.param .b64 ctx)" % fn in p.stdout
    ptx = tmp_path / "p.ptx"
    ptx.write_text(p.stdout)
    r = subprocess.run([PTXAS, "-arch=sm_%d" % sm, str(ptx), "-o", str(tmp_path / "p.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr


def test_what_is_refused_and_why(gs, objs):
    p = gs.run(["bpf2ptx", str(objs["refused"]), "-p", "helper"])
    assert p.returncode == 2
    assert "helper: instruction 0 (opcode 0x85): helper 5 has no GPU version" in p.stderr
    p = gs.run(["bpf2ptx", str(objs["refused"]), "-p", "map"])
    assert p.returncode == 2 and "instruction 0 refers to map counts of type 9" in p.stderr
    p = gs.run(["bpf2ptx", str(objs["refused"]), "-p", "global"])
    assert p.returncode == 2 and "globals and calls to other functions" in p.stderr
    for args, want in ((["bpf2ptx"], "which object?"),
                       (["bpf2ptx", "/bin/true"], "not an eBPF object"),
                       (["bpf2ptx", str(objs["cases"]), "-p", "nope"], "no program of that name"),
                       (["bpf2ptx", str(objs["cases"]), "--run", "abc"], "hex digits"),
                       (["bpf2ptx", str(objs["cases"]), "--sm", "7"], "compute capability")):
        p = gs.run(args)
        assert p.returncode != 0 and want in p.stderr, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    # A context too small for what the program reads: refused by the interpreter, not read.
    p = gs.run(["bpf2ptx", str(objs["cases"]), "-p", "alu64", "--run", "00" * 8])
    assert p.returncode == 2 and "outside the stack and the context" in p.stderr


# A kernel written by hand with what nvcc rarely emits: an exit predicated on a condition,
# a label on the line of a ret, an `exit`, comments with braces in them.
HAND_PTX = r"""//
// { not a brace: a comment }
.version 8.0
.target sm_90
.address_size 64

/* a block comment { also not a brace
   over two lines } */
.visible .entry hand(
	.param .u32 hand_param_0
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<3>;

	ld.param.u32 	%r1, [hand_param_0];
	setp.eq.s32 	%p1, %r1, 0;
	@%p1 ret;
	setp.eq.s32 	%p2, %r1, 1;
	@!%p2 bra 	$L__done;
	exit;
$L__done: ret;
}
"""


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    d = tmp_path_factory.mktemp("probes")
    return compile_bpf(os.path.join(ROOT, "tests", "bpf", "probe_points.bpf.c"), d / "pp.o")


def instrument(gs, probes, ptx_text, tmp_path):
    src = tmp_path / "in.ptx"
    src.write_text(ptx_text)
    return gs.run(["bpf2ptx", str(probes), "--into", str(src)])


def assemble(ptx_text, tmp_path):
    f = tmp_path / "out.ptx"
    f.write_text(ptx_text)
    r = subprocess.run([PTXAS, "-arch=sm_90", str(f), "-o", str(tmp_path / "out.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr


@pytest.mark.skipif(not os.path.exists(PTXAS), reason="ptxas is not installed")
def test_probes_injected_into_nvcc_kernels(gs, probes, tmp_path):
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("nvcc is not installed")
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void vecAdd(const float *a, const float *b, float *c, int n)\n"
                  "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n"
                  "__global__ void scale(float *a, int n, float s)\n"
                  "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }\n")
    subprocess.run([nvcc, "-ptx", "-arch=sm_90", "-o", str(tmp_path / "k.ptx"), str(cu)],
                   check=True, capture_output=True)
    p = instrument(gs, probes, (tmp_path / "k.ptx").read_text(), tmp_path)
    assert p.returncode == 0, p.stderr
    assert "2 of 2 kernels instrumented: 1 entry, 3 exit, 0 load and 0 store calls" in p.stderr
    out = p.stdout
    # The probes go in before the first kernel; the one that names no probe point is
    # translated but never called.
    assert out.index(".func (.param .b64 ret) gs_probe_on_entry(") < out.index(".entry _Z6vecAdd")
    assert "call (gs_r), gs_probe_other" not in out
    vec = out[out.index(".entry _Z6vecAdd"):out.index(".entry _Z5scale")]
    scale = out[out.index(".entry _Z5scale"):]
    # Entry: right after the body opens, before anything of the kernel's.
    body = vec[vec.index("{"):]
    assert body.index("call (gs_r), gs_probe_on_entry") < body.index("ld.param")
    assert vec.count("call (gs_r), gs_probe_on_exit") == 1
    assert scale.count("call (gs_r), gs_probe_on_exit") == 1
    assert scale.count("call (gs_r), gs_probe_scale_exit") == 1
    assert "gs_probe_on_entry" not in scale
    assemble(out, tmp_path)
    # One kernel alone, as gpuscope probe compiles them: the other is left out, the ids kept.
    src = tmp_path / "in.ptx"
    p = gs.run(["bpf2ptx", str(probes), "--into", str(src), "--kernel", "_Z5scalePfif"])
    assert p.returncode == 0, p.stderr
    assert ".entry _Z6vecAdd" not in p.stdout and ".entry _Z5scalePfif" in p.stdout
    assert "kernel 1 _Z5scalePfif: 3 parameters" in p.stderr
    assemble(p.stdout, tmp_path)
    p = gs.run(["bpf2ptx", str(probes), "--into", str(src), "--kernel", "nosuch"])
    assert p.returncode == 2 and "has no kernel named nosuch" in p.stderr and not p.stdout
    p = gs.run(["bpf2ptx", str(probes), "--kernel", "nosuch"])
    assert p.returncode == 1 and "--kernel goes with --into" in p.stderr


@pytest.mark.skipif(not os.path.exists(PTXAS), reason="ptxas is not installed")
def test_kernels_that_use_module_variables_read_them_through_a_table(gs, probes, tmp_path):
    """An instrumented module is loaded apart from the program's, so its __device__,
    __constant__ and __managed__ variables (printf's format strings too) are read through
    __gs_vars, which gpuscope's loader points at the program's: every reference, directly
    or in the device functions kernels call, by address or in an access, with an offset,
    behind a label or a predicate. As bpf2ptx writes it, the table holds the module's own
    addresses. Texture references cannot be shared: a kernel that uses one is left
    alone."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("nvcc is not installed")
    cu = tmp_path / "v.cu"
    cu.write_text("""
#include <cstdio>
__constant__ float coef[4];
__device__ int hits;
__device__ __managed__ int flag;
static __device__ int table[3] = {1, 2, 3};
__device__ __noinline__ void bump() { atomicAdd(&hits, 1); }
__device__ __noinline__ void via() { bump(); }
__global__ void usesConst(float *a) { a[threadIdx.x] *= coef[threadIdx.x & 3]; }
__global__ void usesViaCalls(float *a) { via(); a[0] = 1; }
__global__ void usesManaged(void) { flag = 1; }
__global__ void usesTable(int *o) { o[0] = table[o[1]]; }
__global__ void prints(int n) { if (n > hits) printf("n=%d\\n", n); }
""")
    subprocess.run([nvcc, "-ptx", "-arch=sm_90", "-o", str(tmp_path / "v.ptx"), str(cu)],
                   check=True, capture_output=True)
    src = (tmp_path / "v.ptx").read_text()
    p = instrument(gs, probes, src, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "5 of 5 kernels instrumented" in p.stderr
    assert "the module's 5 variables are read through __gs_vars" in p.stderr
    table = re.search(r"__gs_vars\[5\] = \{(.*)\};", p.stdout).group(1).split(", ")
    assert sorted(table) == sorted("generic(%s)" % v for v in
                                   ("coef", "hits", "flag", "table", "$str"))
    slot = {t[len("generic("):-1]: i for i, t in enumerate(table)}
    assert p.stdout.index("__gs_vars[5]") < p.stdout.index(".func _Z4bumpv")
    body = p.stdout[p.stdout.index(".visible .entry"):]
    for var in slot:  # no reference left but through the table
        assert not re.search(r"[\s\[,]%s[\s\];+,]" % re.escape(var), body), var
    for kernel, var in (("_Z9usesConstPf", "coef"), ("_Z11usesManagedv", "flag"),
                        ("_Z9usesTablePi", "table"), ("_Z6printsi", "$str"),
                        ("_Z6printsi", "hits")):
        k = body[body.index(".entry " + kernel):]
        k = k[:k.find(".entry", 1)]  # (to the next kernel)
        assert "ld.global.u64 %%gsv0, [__gs_vars+%d];" % (8 * slot[var]) in k, (kernel, var)
        assert "gs_probe" in k
    fn = p.stdout[p.stdout.index(".func _Z4bumpv"):]
    assert "[__gs_vars+%d]" % (8 * slot["hits"]) in fn[:fn.index(".func", 1)]
    assert "ld.const" not in p.stdout and "cvta.const" not in p.stdout
    assemble(p.stdout, tmp_path)

    # A texture reference, and references of every shape, in hand-written PTX.
    p = instrument(gs, probes, """.version 8.0
.target sm_90
.address_size 64
.global .texref tx;
.global .align 4 .u32 cnt;
.const .align 8 .b8 lim[16];
.visible .entry usesTex(.param .u64 p)
{
\t.reg .f32 %f<5>;
\t.reg .b32 %r<2>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [p];
\tmov.u32 %r1, 0;
\ttex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [tx, {%r1}];
\tst.global.f32 [%rd1], %f1;
\tret;
}
.visible .entry shapes(.param .u64 p)
{
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<4>;
\t.reg .pred %p<2>;
\tld.global.u32 %r1, [cnt+4];
\tsetp.eq.u32 %p1, %r1, 0;
\t@%p1 bra $L1;
\tmov.u64 %rd1, lim+8;
\tcvta.const.u64 %rd2, %rd1;
\tld.const.u32 %r3, [%rd1];
$L1:\t@%p1 st.global.u32 [cnt], %r1;
\tsetp.eq.u64 %p1, %rd2, cnt; // an address compared
\tret;
}
""", tmp_path)
    assert p.returncode == 0, p.stderr
    assert "kernel 0 usesTex: left alone, it uses the module's texture, sampler or surface " \
        "reference tx" in p.stderr
    assert "__gs_vars[3] = {0, generic(cnt), generic(lim)};" in p.stdout
    k = p.stdout[p.stdout.index(".entry shapes"):]
    for want in ("ld.global.u64 %gsv0, [__gs_vars+8];\n\tld.global.u32 %r1, [%gsv0+4];",
                 "ld.global.u64 %gsv0, [__gs_vars+16];\n\tadd.s64 %gsv0, %gsv0, 8;\n"
                 "\tmov.u64 %rd1, %gsv0;",
                 "\tmov.u64 %rd2, %rd1;", "\tld.u32 %r3, [%rd1];",
                 "$L1:\n{\n\t.reg .b64 %gsv<1>;\n\tld.global.u64 %gsv0, [__gs_vars+8];\n"
                 "\t@%p1 st.global.u32 [%gsv0], %r1;\n}",
                 "\tsetp.eq.u64 %p1, %rd2, %gsv0;"):
        assert want in k, want
    assemble(p.stdout, tmp_path)

    # An instruction over two lines that uses one: the module is refused, whole.
    assert "[hits]" in src
    p = instrument(gs, probes, src.replace("[hits]", "[\nhits]", 1), tmp_path)
    assert p.returncode != 0 and "uses a module variable is not understood" in p.stderr, \
        p.stderr


@pytest.mark.skipif(not os.path.exists(PTXAS), reason="ptxas is not installed")
def test_exits_of_every_shape(gs, probes, tmp_path):
    p = instrument(gs, probes, HAND_PTX, tmp_path)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "1 of 1 kernels instrumented: 0 entry, 3 exit, 0 load and 0 store calls" in p.stderr
    lines = [ln.strip() for ln in out.splitlines()]
    # The predicated ret: the call carries its predicate, then the ret as it was.
    i = lines.index("@%p1 ret;")
    assert lines[i - 2] == "@%p1 call (gs_r), gs_probe_on_exit, (gs_p);"
    # exit, unpredicated.
    i = lines.index("exit;")
    assert lines[i - 2] == "call (gs_r), gs_probe_on_exit, (gs_p);"
    # The label stays before the call, so the branch to it runs the probe.
    i = lines.index("$L__done:")
    assert lines[i + 10] == "call (gs_r), gs_probe_on_exit, (gs_p);"
    assert lines[i + 12] == "ret;"
    # Comments are left as they were.
    assert "// { not a brace: a comment }" in out
    assemble(out, tmp_path)


def test_ptx_the_rewriter_refuses(gs, probes, objs, tmp_path):
    for text, want in ((HAND_PTX.replace("$L__done: ret;\n}", "$L__done: ret;\n"),
                        "ends inside a function body"),
                       (HAND_PTX + "}\n", "closes nothing"),
                       (HAND_PTX.replace(".version 8.0", ""), "not a PTX module"),
                       ("/* never closed", "ends inside a comment")):
        p = instrument(gs, probes, text, tmp_path)
        assert p.returncode == 2 and want in p.stderr, (want, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and not p.stdout
    src = tmp_path / "in.ptx"
    src.write_text(HAND_PTX)
    p = gs.run(["bpf2ptx", str(objs["cases"]), "--into", str(src)])
    assert p.returncode == 2 and "no program in a probe section" in p.stderr
    p = gs.run(["bpf2ptx", str(probes), "--into", str(tmp_path / "missing.ptx")])
    assert p.returncode == 2 and "cannot read" in p.stderr
    p = gs.run(["bpf2ptx", str(probes), "--into", str(src), "--run", "00"])
    assert p.returncode == 1 and "not both" in p.stderr


@pytest.fixture(scope="module")
def maps_obj(tmp_path_factory):
    d = tmp_path_factory.mktemp("maps")
    return compile_bpf(os.path.join(ROOT, "tests", "bpf", "translate_maps.bpf.c"), d / "maps.o")


def run_prog(gs, obj, prog, a, b, map_name):
    """--run a program of translate_maps.bpf.c on a context {a, b, out[8]}: r0, out, and
    the bytes of one map as --run prints them."""
    ctx = struct.pack("<QQ", a, b) + bytes(64)
    p = gs.run(["bpf2ptx", str(obj), "-p", prog, "--run", ctx.hex()])
    assert p.returncode == 0, p.stderr
    fields = dict(f.split("=", 1) for f in p.stdout.split()[1:])
    out = struct.unpack("<QQ8Q", bytes.fromhex(fields["ctx"]))[2:]
    return int(fields["r0"]), out, bytes.fromhex(fields[map_name])


def run_maps(gs, obj, a, b):
    r0, out, raw = run_prog(gs, obj, "count", a, b, "counts")
    return r0, out, struct.unpack("<4Q", raw)


def test_array_maps(gsr, maps_obj):
    r0, out, counts = run_maps(gsr, maps_obj, 1, 5)
    assert r0 == 0 and counts == (0, 5, 0, 100)
    # update: 0; with BPF_NOEXIST: -EEXIST; delete: -EINVAL; past the end: -E2BIG.
    assert out[:4] == ((0, -17 & M64, -22 & M64, -7 & M64))
    # A key past the end: lookup gives NULL, nothing changes.
    r0, out, counts = run_maps(gsr, maps_obj, 6, 5)
    assert r0 == 1 and counts == (0, 0, 0, 0) and out[:4] == (0, 0, 0, 0)


@pytest.mark.skipif(not os.path.exists(PTXAS), reason="ptxas is not installed")
def test_array_maps_ptx_assembles(gs, maps_obj, tmp_path):
    p = gs.run(["bpf2ptx", str(maps_obj), "-p", "count"])
    assert p.returncode == 0, p.stderr
    assert ".visible .global .align 8 .b8 gs_maps[96];" in p.stdout  # four maps, 24 bytes each
    # The table's layout, for whoever fills it: name, kind (1 array, 2 per-thread, 3 hash,
    # 0 not on the GPU), key and value sizes, entries.
    layout = sorted(ln.split(" ", 2)[2] for ln in p.stdout.splitlines()
                    if ln.startswith("// gs_maps["))
    assert layout == ["by_key kind 3 key 4 value 8 entries 4",
                      "counts kind 1 key 4 value 8 entries 4",
                      "lru kind 0 key 4 value 8 entries 4",
                      "per_thread kind 2 key 4 value 8 entries 4"], layout
    assemble(p.stdout, tmp_path)
    p = gs.run(["bpf2ptx", str(maps_obj), "-p", "per_thread_count"])
    assert p.returncode == 0, p.stderr
    assemble(p.stdout, tmp_path)
    p = gs.run(["bpf2ptx", str(maps_obj), "-p", "hash"])
    assert p.returncode == 0, p.stderr
    assert "atom.cas.b32" in p.stdout  # an insert claims its slot
    assemble(p.stdout, tmp_path)
    p = gs.run(["bpf2ptx", str(maps_obj), "-p", "uses_lru"])
    assert p.returncode == 2
    assert ("refers to map lru of type 9, key size 4: the GPU takes bpftime's GPU_HASH_MAP "
            "(1501), PERGPUTD_ARRAY_MAP (1502, 1512), GPU_ARRAY_MAP (1503, 1513), "
            "GPU_KERNEL_SHARED_ARRAY_MAP (1504) and GPU_RINGBUF_MAP (1527), and the kernel's "
            "arrays (2)") in p.stderr


def test_per_thread_arrays(gsr, maps_obj):
    """A percpu array becomes an array per GPU thread: --run plays thread 165 of a launch
    of 256 (block 2 of 4, thread (5,1) of 32x2); its own array is the one printed."""
    def run(a, b):
        r0, out, raw = run_prog(gsr, maps_obj, "per_thread_count", a, b, "per_thread")
        return r0, out, struct.unpack("<4Q", raw)

    r0, out, mine = run(1, 5)
    assert r0 == 0 and mine == (0, 5, 7, 0)
    # update: 0; with BPF_NOEXIST: -EEXIST; delete: -EINVAL (arrays cannot).
    assert out[:3] == (0, -17 & M64, -22 & M64)
    r0, out, mine = run(6, 5)  # a key past the end: NULL
    assert r0 == 1 and mine == (0, 0, 0, 0)


def fnv1a(b):
    h = 0x811c9dc5
    for x in b:
        h = ((h ^ x) * 16777619) & 0xffffffff
    return h


def test_hash_maps(gsr, maps_obj):
    """A hash map of 4 slots ({u32 state, pad, u32 key + pad, u64 value} = 24 bytes each),
    open addressing from the key's FNV-1a hash: the interpreter's results and the slots it
    left, against this model."""
    def run(a, b):
        r0, out, raw = run_prog(gsr, maps_obj, "hash", a, b, "by_key")
        return r0, out, [struct.unpack_from("<IIIIQ", raw, 24 * i) for i in range(4)]

    key = 12345
    r0, out, slots = run(key, 0)
    # inserted with BPF_NOEXIST: 0; again: -EEXIST; an absent key with BPF_EXIST: -ENOENT;
    # deleting an absent key: -ENOENT; the value read back: 1.
    assert r0 == 0 and out[:5] == (0, -17 & M64, -2 & M64, -2 & M64, 1)
    home = fnv1a(struct.pack("<I", key)) % 4
    assert slots[home][0] == 2 and slots[home][2] == key and slots[home][4] == 1
    assert [s[0] for i, s in enumerate(slots) if i != home] == [0, 0, 0]
    # Filled: three more keys take the other slots (linear probing), the fourth finds
    # none (-E2BIG); deleting the first marks its slot deleted (3), not empty.
    r0, out, slots = run(key, 1)
    assert out[5:8] == (0, -7 & M64, 0)
    assert sorted(s[2] for s in slots) == sorted([key, key + 1, key + 2, key + 3])
    assert slots[home][0] == 3 and sorted(s[0] for s in slots) == [2, 2, 2, 3]
    for s in slots:
        if s[2] != key:
            want = fnv1a(struct.pack("<I", s[2])) % 4
            # each sits at its hash's slot or after it, past occupied ones only
            assert s[0] == 2 and want in range(4)


@pytest.mark.skipif(not os.path.exists(PTXAS), reason="ptxas is not installed")
def test_gpu_maps_bench_module(gsr, tmp_path):
    """What bench/maps_gpu.sh runs on a GPU, built here: the three map kinds probed into
    bench/maps_kernel.cu's kernel assemble, and the table's layout lines are the ones the
    harness (bench/maps_gpu.cu) sets the maps up from, in order."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("nvcc is not installed")
    obj = compile_bpf(os.path.join(ROOT, "tests", "bpf", "gpu_maps.bpf.c"), tmp_path / "m.o")
    ptx = tmp_path / "bump.ptx"
    subprocess.run([nvcc, "-ptx", "-arch=sm_90", "-o", str(ptx),
                    os.path.join(ROOT, "bench", "maps_kernel.cu")], check=True,
                   capture_output=True)
    p = gsr.run(["bpf2ptx", str(obj), "--into", str(ptx)])
    assert p.returncode == 0, p.stderr
    assert "1 of 1 kernels instrumented: 1 entry, 0 exit, 0 load and 0 store calls" in p.stderr
    assert [ln for ln in p.stdout.splitlines() if ln.startswith("// gs_maps[")] == [
        "// gs_maps[0] by_block kind 3 key 4 value 8 entries 64",
        "// gs_maps[1] mine kind 2 key 4 value 8 entries 1",
        "// gs_maps[2] total kind 1 key 4 value 8 entries 1"]
    assemble(p.stdout, tmp_path)


@pytest.fixture(scope="module")
def ring_obj(tmp_path_factory):
    d = tmp_path_factory.mktemp("ring")
    return compile_bpf(os.path.join(ROOT, "tests", "bpf", "translate_ring.bpf.c"), d / "ring.o")


def run_ring(gs, obj, prog, a, b):
    """--run a program of translate_ring.bpf.c: r0, out, and each ring's records
    [(len, gpu_ns, bytes)] and drops."""
    ctx = struct.pack("<QQ", a, b) + bytes(64)
    p = gs.run(["bpf2ptx", str(obj), "-p", prog, "--run", ctx.hex()])
    assert p.returncode == 0, p.stderr
    fields = dict(f.split("=", 1) for f in p.stdout.split()[1:])
    out = struct.unpack("<QQ8Q", bytes.fromhex(fields["ctx"]))[2:]
    rings = {}
    for name in ("rb", "events"):
        recs = []
        for r in filter(None, fields[name].split(";")):
            head, data = r.split(":")
            n, ns = head.split("@")
            recs.append((int(n), int(ns), bytes.fromhex(data)))
        rings[name] = (recs, int(fields[name + ".drops"]))
    return int(fields["r0"]), out, rings


def test_ring_buffers(gsr, ring_obj):
    # Three records of 13 bytes, each whole, stamped with the GPU's timer (--run: 1 s).
    r0, out, rings = run_ring(gsr, ring_obj, "emit", 3, 13)
    assert out[:4] == (3, 0, 0, 0)
    assert rings["rb"] == ([(13, 10**9, bytes([r]) + bytes(range(1, 13))) for r in range(3)], 0)
    # A full ring (4096 bytes, never drained in one run): records of 16 + 104 bytes fit 34
    # times, the other 30 are dropped (-EAGAIN) and counted.
    r0, out, rings = run_ring(gsr, ring_obj, "emit", 64, 100)
    fit = 4096 // (16 + 104)
    assert out[:4] == (fit, 64 - fit, 0, -11 & M64)
    recs, drops = rings["rb"]
    assert len(recs) == fit and drops == 64 - fit
    assert all(d == bytes([i]) + bytes(range(1, 100)) for i, (_, _, d) in enumerate(recs))
    # Empty records; and past the largest (256 bytes): -E2BIG, nothing written or dropped.
    r0, out, rings = run_ring(gsr, ring_obj, "emit", 2, 0)
    assert out[:3] == (2, 0, 0) and [r[0] for r in rings["rb"][0]] == [0, 0]
    r0, out, rings = run_ring(gsr, ring_obj, "emit", 5, 257)
    assert out[:4] == (0, 0, 5, -7 & M64) and rings["rb"] == ([], 0)
    # The perf event way: the same ring records. A lookup in a ring finds nothing; a
    # ring's helper on an array: -EINVAL.
    r0, out, rings = run_ring(gsr, ring_obj, "perf", 0x1122334455667788, 0x99aabbcc)
    assert out[:3] == (0, 0, -22 & M64)
    assert rings["events"] == ([(12, 10**9, struct.pack("<QI", 0x1122334455667788,
                                                          0x99aabbcc))], 0)


@pytest.mark.skipif(not os.path.exists(PTXAS), reason="ptxas is not installed")
def test_ring_buffers_ptx_assembles(gs, ring_obj, tmp_path):
    for prog in ("emit", "perf"):
        p = gs.run(["bpf2ptx", str(ring_obj), "-p", prog])
        assert p.returncode == 0, p.stderr
        # reserved by compare-and-swap, published after a system-wide fence
        assert "atom.global.cas.b64" in p.stdout and "membar.sys" in p.stdout
        assemble(p.stdout, tmp_path)
    layout = [ln.split(" ", 2)[2] for ln in p.stdout.splitlines() if ln.startswith("// gs_maps[")]
    assert layout[:2] == ["rb kind 4 key 0 value 0 entries 4096",
                          "events kind 4 key 4 value 4 entries 4194304"], layout
    p = gs.run(["bpf2ptx", str(ring_obj), "-p", "reserve"])
    assert p.returncode == 2
    assert "helper 131 has no GPU version (bpf_ringbuf_reserve" in p.stderr
    assert "use bpf_ringbuf_output" in p.stderr
