"""A CUDA graph's exec updated from another capture of the same shape (cudaGraphExecUpdate,
as llama.cpp does for each token), for bench/graph_update_gpu.sh: relu(x @ w) * 2 captured
for x1 and for x2; the first graph's exec replayed 20 times (each waited for), updated from the second
graph, replayed 20 times more. Prints one JSON line: the output's checksum and bytes' hash after
each half, and whether the update took (the output is x2's).

    python3 graph_update.py
"""
import ctypes
import hashlib
import json

import torch


def main():
    torch.manual_seed(0)
    n = 1024
    x1, x2, w = (torch.randn(n, n, device="cuda") for _ in range(3))
    out = torch.empty(n, n, device="cuda")

    def body(x):
        out.copy_(torch.relu(x @ w) * 2.0)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as PyTorch's docs do
        body(x1)
    torch.cuda.current_stream().wait_stream(side)
    graphs = []
    for x in (x1, x2):
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g):
            body(x)
        graphs.append(g)
    g1, g2 = graphs
    g1.instantiate()

    def digest():
        torch.cuda.synchronize()
        b = out.cpu().numpy().tobytes()
        return {"sum": float(out.double().sum()), "sha1": hashlib.sha1(b).hexdigest()}

    result = {}
    for _ in range(20):  # (each waited for: one run of a twin at a time)
        g1.replay()
        torch.cuda.synchronize()
    result["before"] = digest()
    cudart = ctypes.CDLL("libcudart.so.13")
    info = ctypes.create_string_buffer(64)  # cudaGraphExecUpdateResultInfo
    rc = cudart.cudaGraphExecUpdate(ctypes.c_void_p(g1.raw_cuda_graph_exec()),
                                    ctypes.c_void_p(g2.raw_cuda_graph()), info)
    result["update_rc"] = rc
    for _ in range(20):
        g1.replay()
        torch.cuda.synchronize()
    result["after"] = digest()
    want = torch.relu(x2 @ w) * 2.0
    result["after_is_x2"] = bool(torch.allclose(out, want, rtol=1e-3, atol=1e-3))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
