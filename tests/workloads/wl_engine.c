// SPDX-License-Identifier: MIT
/*
 * libwl_engine.so, for py_cuda.py --engine: a thread with no Python state that launches,
 * as PyTorch's autograd engine threads run the backward pass while the Python thread waits
 * in loss.backward(). engine_run(ctx, kernel, n, state) starts it (n launches of kernel) and
 * waits for it: the launch result, or'ed. state: the thread has a Python thread state with no
 * frames while it launches, as PyTorch's engine threads have (PythonEngine::thread_init takes
 * the GIL once, which makes one, and lets it go): taken from the interpreter that loaded this
 * library (ctypes.CDLL lets the GIL go for the call).
 */
#include <dlfcn.h>
#include <pthread.h>

#include "fake_cuda.h"

struct job {
	CUcontext ctx;
	CUfunction kernel;
	int n, state, rc;
};

static void *engine_thread(void *arg)
{
	int (*ensure)(void) = dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
	void (*release)(int) = dlsym(RTLD_DEFAULT, "PyGILState_Release");
	void *(*save)(void) = dlsym(RTLD_DEFAULT, "PyEval_SaveThread");
	void (*restore)(void *) = dlsym(RTLD_DEFAULT, "PyEval_RestoreThread");
	struct job *j = arg;
	void *ts = NULL;
	int gil = 0;

	if (j->state && (!ensure || !release || !save || !restore)) {
		j->rc = -1;
		return NULL;
	}
	if (j->state) {
		gil = ensure();
		ts = save();
	}
	j->rc = cuCtxSetCurrent(j->ctx);
	for (int i = 0; i < j->n; i++)
		j->rc |= cuLaunchKernel(j->kernel, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	if (j->state) {
		restore(ts);
		release(gil);
	}
	return NULL;
}

int engine_run(CUcontext ctx, CUfunction kernel, int n, int state)
{
	struct job j = { ctx, kernel, n, state, 0 };
	pthread_t t;

	if (pthread_create(&t, NULL, engine_thread, &j))
		return -1;
	pthread_join(t, NULL);
	return j.rc;
}
