// SPDX-License-Identifier: MIT
/*
 * libwl_engine.so, for py_cuda.py --engine: a thread with no Python state that launches,
 * as PyTorch's autograd engine threads run the backward pass while the Python thread waits
 * in loss.backward(). engine_run(ctx, kernel, n) starts it (n launches of kernel) and waits
 * for it: the launch result, or'ed.
 */
#include <pthread.h>

#include "fake_cuda.h"

struct job {
	CUcontext ctx;
	CUfunction kernel;
	int n, rc;
};

static void *engine_thread(void *arg)
{
	struct job *j = arg;

	j->rc = cuCtxSetCurrent(j->ctx);
	for (int i = 0; i < j->n; i++)
		j->rc |= cuLaunchKernel(j->kernel, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	return NULL;
}

int engine_run(CUcontext ctx, CUfunction kernel, int n)
{
	struct job j = { ctx, kernel, n, 0 };
	pthread_t t;

	if (pthread_create(&t, NULL, engine_thread, &j))
		return -1;
	pthread_join(t, NULL);
	return j.rc;
}
