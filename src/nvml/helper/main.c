// SPDX-License-Identifier: MIT
/*
 * gpuscope-nvml: NVML for the static build. A static gpuscope cannot load libnvidia-ml (its C
 * library is not the system's), so it carries this small dynamically linked program, runs
 * it, and asks it over a pipe (nvml/proxy.h): it loads NVML with the system's C library and
 * answers each request with the GPUs' latest state, as struct nvml_gpu records of the very
 * build that carries it. It ends when its input does.
 */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "nvml/nvml.h"
#include "nvml/proxy.h"
#include "core/util.h"

static struct nvml_gpu g[NVML_MAX_DEVICES];

static int put(const void *p, size_t n)
{
	return gs_io_full(STDOUT_FILENO, (void *)p, n, true);
}

static int get(void *p, size_t n)
{
	return gs_io_full(STDIN_FILENO, p, n, false);
}

int main(void)
{
	struct nvml_proxy_hello hello = { .magic = NVML_PROXY_MAGIC };
	struct nvml_proxy_request req;
	struct nvml *n;

	prctl(PR_SET_NAME, "gpuscope-nvml"); /* (run from a memory file: named "3" else) */
	n = nvml_open(hello.err, sizeof(hello.err));

	hello.ok = n != NULL;
	if (n)
		snprintf(hello.driver, sizeof(hello.driver), "%s", nvml_driver_version(n));
	if (put(&hello, sizeof(hello)) || !n)
		return n ? 1 : 0;
	while (get(&req, sizeof(req)) == 0) {
		struct nvml_proxy_reply rep = { .magic = NVML_PROXY_MAGIC };

		if (req.op == NVML_PROXY_SAMPLE)
			nvml_sample(n, req.slow_every);
		rep.count = nvml_snapshot(n, g, NVML_MAX_DEVICES);
		rep.errors = nvml_errors(n);
		nvml_call_stats(n, rep.stats);
		if (put(&rep, sizeof(rep)) || put(g, rep.count * sizeof(g[0])))
			break;
	}
	nvml_close(n);
	return 0;
}
