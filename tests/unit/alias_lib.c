// SPDX-License-Identifier: MIT
/* A library exporting two traced names at one address, as aliases do (NCCL's pnccl*). */
int cuMemcpyHtoD_v2(void)
{
	return 1;
}
int cuMemcpyHtoD_v2_ptds(void) __attribute__((alias("cuMemcpyHtoD_v2")));
