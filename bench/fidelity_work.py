"""The workloads of the fidelity table (bench/fidelity.py), each run whole under the PyTorch
profiler (CUPTI), itself under gpuscope:

    python3 fidelity_work.py WORKLOAD OUTDIR [RANK WORLD]

eager     a small convolutional network trained 30 steps (Adam), a batch copied in and the
          loss read back each step
compile   a transformer encoder block under torch.compile, trained 20 steps
compile_ro  the same under torch.compile's reduce-overhead mode (its CUDA graphs, forward and
          backward replayed from two threads: the main and autograd threads)
compile_gpt2  GPT-2 small (transformers) under torch.compile, trained 10 steps (not in the
          default set: slow to compile)
graphs    a whole training step (forward, backward, SGD) captured in a CUDA graph and
          replayed 50 times (PyTorch's documented whole-network capture)
graphs_sync  the same, waiting for the GPU after each replay
jax       a jitted MLP training step (XLA, its kernels in CUDA graphs it builds with the
          graph API), 30 steps
cupy      CuPy: a RawKernel, elementwise, a reduction and cuBLAS GEMMs, 50 rounds, copies
          both ways
nccl2     two ranks on two GPUs (this script started once per rank by the parent):
          10 all_reduce, 10 broadcast, 10 all_gather each

The profiler is entered before the first CUDA call, so CUPTI and gpuscope see the same
executions (FIDELITY_NO_PROFILER=1: none, for gpuscope's --gpu-time=cupti, which the
profiler would take CUPTI from: bench/cupti_fidelity.py). Each process writes OUTDIR/cupti-<workload>[-rank].json (the trace) and
OUTDIR/facts-<workload>[-rank].json: what the workload itself knows (its pid, the NCCL
calls it made, what its allocator reserved).
"""
import json
import os
import subprocess
import sys

import torch
from torch.profiler import ProfilerActivity, profile


def eager(facts):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).cuda()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x_host = torch.randn(64, 3, 32, 32)
    y_host = torch.randint(0, 10, (64,))
    losses = []
    for _ in range(30):
        x, y = x_host.cuda(), y_host.cuda()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    facts["loss_first_last"] = [losses[0], losses[-1]]
    torch_memory(facts)


def compiled(facts, mode=None):
    torch.manual_seed(0)
    block = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True).cuda()
    step = torch.compile(block, mode=mode)
    opt = torch.optim.SGD(block.parameters(), lr=1e-3)
    x = torch.randn(8, 128, 256, device="cuda")
    for _ in range(20):
        out = step(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    facts["loss"] = float(loss)
    torch_memory(facts)


def compiled_gpt2(facts):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).cuda()
    step_model = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 50257, (4, 256), device="cuda")
    for _ in range(10):
        opt.zero_grad(set_to_none=True)
        loss = step_model(ids, labels=ids).loss
        loss.backward()
        opt.step()
    facts["loss"] = float(loss)
    torch_memory(facts)


def graph_step():
    """An MLP's training step (forward, backward, SGD) captured in a CUDA graph: the graph
    and the loss tensor it writes (also bench/workload.py's graphs)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                              torch.nn.Linear(1024, 512)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    x = torch.randn(64, 512, device="cuda")
    y = torch.randn(64, 512, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as PyTorch's docs do
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
    return g, loss


def graphs(facts, sync=False):
    g, loss = graph_step()
    for _ in range(50):
        g.replay()
        if sync:  # (a training loop that reads its loss every step)
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    facts["graph_replays"] = 50
    facts["loss"] = float(loss)
    torch_memory(facts)


def jax_step():
    """A jitted MLP training step and its first parameters (also bench/workload.py's jax).
    XLA runs it as a command buffer (a CUDA graph it builds with the graph API) and sets
    each kernel node of it again before each launch."""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    params = {"w1": jax.random.normal(k1, (512, 1024)) * 0.02, "b1": jnp.zeros(1024),
              "w2": jax.random.normal(k2, (1024, 10)) * 0.02, "b2": jnp.zeros(10)}
    x = jax.random.normal(k3, (256, 512))
    y = jnp.arange(256) % 10

    def loss_fn(p):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        logits = h @ p["w2"] + p["b2"]
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(256), y])

    @jax.jit
    def step(p):
        loss, g = jax.value_and_grad(loss_fn)(p)
        return jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g), loss

    return step, params


def jax_mlp(facts):
    import jax

    step, params = jax_step()
    for _ in range(30):
        params, loss = step(params)
    facts["loss"] = float(loss)
    facts["jax"] = jax.__version__
    facts["devices"] = [str(d) for d in jax.devices()]
    stats = jax.devices()[0].memory_stats() or {}
    facts["framework_reserved_peak"] = stats.get("peak_pool_bytes", stats.get("pool_bytes"))


def cupy_loop(facts):
    import cupy as cp
    import numpy as np

    scale = cp.RawKernel(r'''
extern "C" __global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}''', "scale")
    n = 1 << 20
    host = np.ones(n, dtype=np.float32)
    a = cp.asarray(host)
    m = cp.random.rand(512, 512, dtype=cp.float32)
    for _ in range(50):
        scale(((n + 255) // 256,), (256,), (a, np.float32(1.0), np.int32(n)))
        b = a * 2 + 1
        s = b.sum()
        c = m @ m
    back = cp.asnumpy(b)
    facts["sum"] = float(s) + float(back[0]) + float(c[0, 0])
    facts["cupy"] = cp.__version__
    facts["framework_reserved_peak"] = cp.get_default_memory_pool().total_bytes()


def nccl_rank(facts, rank, world):
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            device_id=torch.device("cuda:%d" % rank))
    x = torch.ones(1 << 20, device="cuda")
    parts = [torch.empty(1 << 20, device="cuda") for _ in range(world)]
    for _ in range(10):
        dist.all_reduce(x)
    for _ in range(10):
        dist.broadcast(x, 0)
    for _ in range(10):
        dist.all_gather(parts, x)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    facts["nccl_calls"] = {"all_reduce": 10, "broadcast": 10, "all_gather": 10}
    torch_memory(facts)


def torch_memory(facts):
    st = torch.cuda.memory_stats()
    facts["framework_reserved_peak"] = st.get("reserved_bytes.all.peak", 0)
    facts["framework_allocs"] = st.get("segment.all.allocated", 0)


WORKLOADS = {"eager": eager, "compile": compiled, "compile_gpt2": compiled_gpt2,
             "compile_ro": lambda facts: compiled(facts, "reduce-overhead"),
             "graphs": graphs, "graphs_sync": lambda facts: graphs(facts, sync=True),
             "jax": jax_mlp, "cupy": cupy_loop}


def main():
    name, out = sys.argv[1], sys.argv[2]
    if name == "nccl2" and len(sys.argv) == 3:  # the parent: one process per rank
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT="29561",
                   NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
        ranks = [subprocess.Popen([sys.executable, os.path.abspath(__file__), name, out,
                                   str(r), "2"], env=env) for r in range(2)]
        sys.exit(max(p.wait() for p in ranks))
    tag = name if len(sys.argv) == 3 else "%s-%s" % (name, sys.argv[3])
    facts = {"pid": os.getpid()}
    prof = None if os.environ.get("FIDELITY_NO_PROFILER") else \
        profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    if prof:
        prof.__enter__()
    if name == "nccl2":
        nccl_rank(facts, int(sys.argv[3]), int(sys.argv[4]))
    else:
        WORKLOADS[name](facts)
    torch.cuda.synchronize()
    if prof:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(os.path.join(out, "cupti-%s.json" % tag))
    with open(os.path.join(out, "facts-%s.json" % tag), "w") as f:
        json.dump(facts, f)


if __name__ == "__main__":
    main()
