"""The pieces built by make test: unit tests (plain and ASan/UBSan), fuzz targets over
their seeds and past crashes plus a timed run, the formatting check, the static build."""
import glob
import os
import re
import struct
import subprocess

import pytest

from conftest import OUT, ROOT

FUZZ_SECONDS = int(os.environ.get("GS_FUZZ_SECONDS", "20"))


def _built_from(pattern, *outdirs):
    """The binaries make builds from the sources matching pattern, one per output folder:
    from the sources, so one that was not built fails rather than goes untested."""
    names = sorted(os.path.basename(s)[:-2] for s in glob.glob(os.path.join(ROOT, pattern)))
    return [os.path.join(OUT, d, n) for d in outdirs for n in names]


UNIT = _built_from("tests/unit/test_*.c", "unit", "unit-asan")
FUZZ = _built_from("tests/fuzz/fuzz_*.c", "fuzz")


@pytest.mark.parametrize("binary", UNIT, ids=[os.path.relpath(u, OUT) for u in UNIT])
def test_unit(binary):
    assert os.path.exists(binary), "%s not built (make unit)" % binary
    p = subprocess.run([binary], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, GS_OUTPUT=OUT))
    assert p.returncode == 0, p.stdout + p.stderr


def test_every_source_has_its_binary():
    assert UNIT and FUZZ
    missing = [b for b in UNIT + FUZZ if not os.path.exists(b)]
    assert missing == [], "not built (make unit fuzz): %s" % missing


@pytest.mark.parametrize("binary", FUZZ, ids=[os.path.basename(f) for f in FUZZ])
def test_fuzz(binary, tmp_path):
    name = os.path.basename(binary)[len("fuzz_"):]
    seeds = os.path.join(ROOT, "tests", "fuzz", "seeds", name)
    assert os.path.exists(binary), "%s not built (make fuzz)" % binary
    assert glob.glob(os.path.join(seeds, "*")), "no seeds in %s" % seeds
    regressions = sorted(glob.glob(os.path.join(ROOT, "tests", "fuzz", "regressions",
                                                name + "-*")))
    # A recording's regression input is read only in the current format: one of another
    # format would stop at its header and test nothing (set its version on a change).
    version = int(re.search(r"#define GS_REC_VERSION (\d+)",
                            open(os.path.join(ROOT, "src", "core", "recording.h")).read())[1])
    for f in regressions if name == "recording" else ():
        with open(f, "rb") as fh:
            assert struct.unpack("<8sI", fh.read(12))[1] == version, f
    if regressions:
        p = subprocess.run([binary] + regressions, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr[-4000:]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    p = subprocess.run([binary, "-max_total_time=%d" % FUZZ_SECONDS, "-rss_limit_mb=2048",
                        "-artifact_prefix=%s/" % tmp_path, str(corpus), seeds],
                       capture_output=True, text=True, timeout=FUZZ_SECONDS + 120)
    assert p.returncode == 0, p.stderr[-4000:]


def test_clang_format():
    p = subprocess.run(["make", "-s", "format-check"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_static_build_runs_without_libraries():
    p = subprocess.run(["make", "-s", "static"], cwd=ROOT, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    binary = os.path.join(OUT, "static", "gpuscope")
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True)
    assert "not a dynamic executable" in ldd.stdout + ldd.stderr
    p = subprocess.run([binary, "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("gpuscope ")


def _defined_and_used(obj):
    """The global symbols an object file defines, and those it uses."""
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCGSWV":
            defined.add(parts[2])
    return defined, used


def _circles(nodes, edges):
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def _dependencies(objdir, sources):
    """File A depends on file B when A uses a symbol B defines: an edge per pair."""
    defs, uses = {}, {}
    for src in sources:
        obj = os.path.join(objdir, src[:-2] + ".o")
        assert os.path.exists(obj), "%s not built (make all)" % obj
        defs[src], uses[src] = _defined_and_used(obj)
    owner = {s: f for f, d in defs.items() for s in d}
    edges = {f: {owner[s] for s in u if s in owner and owner[s] != f} for f, u in uses.items()}
    return edges


def _folder(src):
    parts = src.split("/")
    return parts[1] if len(parts) > 2 else "."


@pytest.mark.parametrize("plane", ["gpuscope", "inject"])
def test_no_dependency_circles(plane):
    """No circle of uses among the files of one folder of src/, nor among its folders: each
    layer uses only those below it (docs/architecture.md)."""
    os.chdir(ROOT)
    if plane == "gpuscope":
        sources = [s for s in glob.glob("src/**/*.c", recursive=True)
                   if not s.startswith(("src/inject/", "src/probes/", "src/static/"))
                   and not s.endswith(".bpf.c")]
        objdir = os.path.join(OUT, "obj")
    else:
        sources = glob.glob("src/inject/*.c")
        objdir = os.path.join(OUT, "pic")
    edges = _dependencies(objdir, sorted(sources))
    within = {f: {g for g in e if _folder(g) == _folder(f)} for f, e in edges.items()}
    assert _circles(sorted(edges), within) == []
    folders = {}
    for f, e in edges.items():
        folders.setdefault(_folder(f), set()).update(
            _folder(g) for g in e if _folder(g) != _folder(f))
    assert _circles(sorted(folders), folders) == []


def test_no_include_circles_among_folders():
    """Headers and sources of one folder of src/ include no folder that includes it back."""
    edges = {}
    for path in glob.glob(os.path.join(ROOT, "src", "**", "*.[ch]"), recursive=True):
        folder = _folder(os.path.relpath(path, ROOT))
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith('#include "') and "/" in line:
                    other = line.split('"')[1].split("/")[0]
                    if other != folder and other != "gpuscope":
                        edges.setdefault(folder, set()).add(other)
    assert _circles(sorted(edges), edges) == []


def test_static_build_serves_nvml_through_its_helper(tmp_path):
    """A static binary cannot load libnvidia-ml (its C library is not the system's): it runs
    the dynamically linked helper it carries, and serves the GPUs' metrics as the dynamic
    build does (here from the NVML test double)."""
    import socket
    import time
    import urllib.request

    p = subprocess.run(["make", "-s", "static"], cwd=ROOT, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    script = tmp_path / "nvml.script"
    script.write_text("gpus 2\ndriver 580.65.06\ngpu0.util 42\ngpu1.util 7\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, GPUSCOPE_NVML=os.path.join(OUT, "fakes", "libnvidia-ml.so.1"),
               FAKENVML_SCRIPT=str(script))
    agent = subprocess.Popen([os.path.join(OUT, "static", "gpuscope"), "exporter", "--listen",
                              "127.0.0.1:%d" % port, "--no-ebpf"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        body, deadline = "", time.time() + 30
        while "DCGM_FI_DEV_GPU_UTIL" not in body and time.time() < deadline:
            time.sleep(0.2)
            try:
                body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                              timeout=5).read().decode()
            except OSError:
                pass
        util = {l.split("gpu=\"")[1][0]: float(l.split()[-1]) for l in body.splitlines()
                if l.startswith("DCGM_FI_DEV_GPU_UTIL{")}
        assert util == {"0": 42.0, "1": 7.0}, body[-2000:]
        # Through the helper (a static dlopen of the double would work on this machine).
        helpers = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/status" % pid) as f:
                    st = dict(l.split(":\t", 1) for l in f.read().splitlines() if ":\t" in l)
            except OSError:
                continue
            if st.get("PPid") == str(agent.pid) and st.get("Name") == "gpuscope-nvml":
                helpers.append(pid)
        assert len(helpers) == 1
    finally:
        agent.terminate()
        _, err = agent.communicate(timeout=30)
    assert agent.returncode == 0, err
    assert "NVML loaded" in err


def _assert_abi(tmp_path, checks, theirs, ours, headers):
    """Each (ours, theirs) of checks equal, as the compiler sees them with each of headers'
    folders: our header (include/gpuscope/ours) against the toolkit's (theirs)."""
    src = tmp_path / "abi.c"
    src.write_text("#include <stddef.h>\n#include <%s>\n" % theirs +
                   "#include \"gpuscope/%s\"\n" % ours +
                   "".join('_Static_assert(%s == %s, "%s");\n' % (a, b, a) for a, b in checks))
    for h in headers:
        p = subprocess.run(["cc", "-fsyntax-only", "-I", os.path.dirname(h),
                            "-I", os.path.join(ROOT, "include"), str(src)],
                           capture_output=True, text=True)
        assert p.returncode == 0, (h, p.stderr)


CUDA_HEADERS = sorted(glob.glob("/usr/local/cuda*/include/cuda.h"))


@pytest.mark.skipif(not CUDA_HEADERS, reason="no CUDA toolkit here")
def test_cuda_abi_matches_the_real_header(tmp_path):
    """include/gpuscope/cuda_abi.h declares the driver's structures' offsets and constants
    gpuscope reads, so that the toolkit is not a build dependency: each checked against the
    driver's own header (cuda.h)."""
    fields = {"CUDA_MEMCPY2D": ("MEMCPY2D", [
                  ("SRC_MEMTYPE", "srcMemoryType"), ("SRC_HOST", "srcHost"),
                  ("SRC_DEVICE", "srcDevice"), ("DST_MEMTYPE", "dstMemoryType"),
                  ("DST_HOST", "dstHost"), ("DST_DEVICE", "dstDevice"),
                  ("WIDTH", "WidthInBytes"), ("HEIGHT", "Height")]),
              "CUDA_MEMCPY3D": ("MEMCPY3D", [
                  ("SRC_MEMTYPE", "srcMemoryType"), ("SRC_HOST", "srcHost"),
                  ("SRC_DEVICE", "srcDevice"), ("DST_MEMTYPE", "dstMemoryType"),
                  ("DST_HOST", "dstHost"), ("DST_DEVICE", "dstDevice"),
                  ("WIDTH", "WidthInBytes"), ("HEIGHT", "Height"), ("DEPTH", "Depth")]),
              "CUlaunchConfig": ("LAUNCHCFG", [
                  ("STREAM", "hStream"), ("ATTRS", "attrs"), ("NATTRS", "numAttrs")]),
              "CUmemAllocationProp": ("MEMPROP", [
                  ("LOCATION_TYPE", "location.type"), ("LOCATION_ID", "location.id")])}
    checks = [("GS_%s_%s" % (prefix, k), "offsetof(%s, %s)" % (struct_, f))
              for struct_, (prefix, fs) in fields.items() for k, f in fs] + [
        ("GS_LAUNCHCFG_SIZE", "sizeof(CUlaunchConfig)"),
        ("GS_LAUNCHATTR_SIZE", "sizeof(CUlaunchAttribute)"),
        ("GS_LAUNCH_ATTR_COOPERATIVE", "CU_LAUNCH_ATTRIBUTE_COOPERATIVE"),
        ("GS_LAUNCH_ATTR_CLUSTER_DIMENSION", "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION"),
        ("GS_MEM_LOCATION_TYPE_DEVICE", "CU_MEM_LOCATION_TYPE_DEVICE"),
        ("GS_CU_MEMORYTYPE_HOST", "CU_MEMORYTYPE_HOST"),
        ("GS_CU_MEMORYTYPE_DEVICE", "CU_MEMORYTYPE_DEVICE"),
        ("GS_CU_MEMORYTYPE_ARRAY", "CU_MEMORYTYPE_ARRAY"),
        ("GS_CU_MEMORYTYPE_UNIFIED", "CU_MEMORYTYPE_UNIFIED"),
        ("(CUstream)GS_CU_STREAM_LEGACY", "CU_STREAM_LEGACY"),
        ("(CUstream)GS_CU_STREAM_PER_THREAD", "CU_STREAM_PER_THREAD")]
    _assert_abi(tmp_path, checks, "cuda.h", "cuda_abi.h", CUDA_HEADERS)


CUPTI_HEADERS = sorted(glob.glob("/usr/local/cuda*/include/cupti_activity.h") +
                       glob.glob("/usr/local/cuda*/extras/CUPTI/include/cupti_activity.h"))


@pytest.mark.skipif(not CUPTI_HEADERS, reason="no CUDA toolkit with CUPTI's headers here")
def test_cupti_abi_matches_the_real_header(tmp_path):
    """include/gpuscope/cupti_abi.h declares the kernel, memcpy and memset records' layouts so
    that the toolkit is not a build dependency: each offset and value checked against
    CUPTI's own header."""
    checks = [("GS_CUPTI_K_%s" % k, "offsetof(CUpti_ActivityKernel10, %s)" % f) for k, f in (
        ("START", "start"), ("END", "end"), ("DEVICE", "deviceId"), ("CONTEXT", "contextId"),
        ("STREAM", "streamId"), ("GRID", "gridX"), ("DYNAMIC_SMEM", "dynamicSharedMemory"),
        ("CORRELATION", "correlationId"), ("NAME", "name"), ("GRAPH_NODE", "graphNodeId"),
        ("GRAPH", "graphId"))] + [
        ("GS_CUPTI_K_SIZE", "sizeof(CUpti_ActivityKernel10)"),
        ("GS_CUPTI_K_GRID + 20", "offsetof(CUpti_ActivityKernel10, blockZ)"),
        ("GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL"),
        ("GS_CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMCPY"),
        ("GS_CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_MEMSET"),
        ("GS_CUPTI_MEMCPY_SIZE", "sizeof(CUpti_ActivityMemcpy6)"),
        ("GS_CUPTI_MEMSET_SIZE", "sizeof(CUpti_ActivityMemset4)")] + [
        ("GS_CUPTI_C_%s" % k, "offsetof(CUpti_Activity%s, %s)" % (rec, f))
        for rec in ("Memcpy6", "Memset4") for k, f in (
            ("BYTES", "bytes"), ("START", "start"), ("END", "end"), ("DEVICE", "deviceId"),
            ("CONTEXT", "contextId"), ("STREAM", "streamId"), ("GRAPH", "graphId"))] + [
        ("GS_CUPTI_SUCCESS", "CUPTI_SUCCESS"),
        ("GS_CUPTI_ERROR_NOT_INITIALIZED", "CUPTI_ERROR_NOT_INITIALIZED")]
    _assert_abi(tmp_path, checks, "cupti_activity.h", "cupti_abi.h", CUPTI_HEADERS)
