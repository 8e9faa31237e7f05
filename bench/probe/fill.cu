// SPDX-License-Identifier: MIT
/* A kernel for bench/probe/routing.cu's driver modules (compiled to PTX and to a fatbin). */
extern "C" __global__ void fill(int *out, int v)
{
	out[threadIdx.x] = v + threadIdx.x;
}
