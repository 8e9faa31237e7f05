// SPDX-License-Identifier: MIT
// The demo's kernels. demo/kernels_ptx.h is generated from this file with
// `make demo-ptx` (needs nvcc); the build itself never needs the CUDA toolkit.
__global__ void vecAdd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		c[i] = a[i] + b[i];
}

__global__ void saxpy(float alpha, const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] = alpha * x[i] + y[i];
}
