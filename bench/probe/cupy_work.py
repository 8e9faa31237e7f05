"""CuPy kernels for a device-side probe (bench/cupy_probe_gpu.sh): LAUNCHES launches of a
RawKernel (scale2, 4,096 x 256 threads) and of an ElementwiseKernel (addone, 1M elements),
then a check of both results.
    cupy_work.py LAUNCHES"""
import sys

import cupy as cp

n, launches = 1 << 20, int(sys.argv[1])
raw = cp.RawKernel(r'''
extern "C" __global__ void scale2(const float *x, float *y, int n)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n)
        y[i] = 2 * x[i];
}''', "scale2")
addone = cp.ElementwiseKernel("float32 x", "float32 y", "y = x + 1", "addone")
x = cp.arange(n, dtype=cp.float32)
y, z = cp.empty_like(x), cp.empty_like(x)
for _ in range(launches):
    raw((n // 256,), (256,), (x, y, cp.int32(n)))
    addone(x, z)
cp.cuda.Device().synchronize()
print("cupy", cp.__version__, "scale2 ok", bool((y == 2 * x).all()),
      "addone ok", bool((z == x + 1).all()))
