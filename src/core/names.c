// SPDX-License-Identifier: MIT
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/names.h"
#include "core/util.h"

const struct gs_api_desc gs_api_descs[GS_API_MAX] = { GS_API_LIST(GS_API_DESC) };

#define GS_API_NAME(id, sym, lib, fam, shape, arg, flags) [GS_API_##id] = sym,
static const char *const api_names[GS_API_MAX] = { GS_API_LIST(GS_API_NAME) };
#undef GS_API_NAME

const char *api_name(unsigned int api)
{
	return api < GS_API_MAX && api_names[api] ? api_names[api] : "?";
}

int api_lookup(const char *symbol)
{
	for (int i = 1; i < GS_API_MAX; i++)
		if (api_names[i] && !strcmp(api_names[i], symbol))
			return i;
	return -1;
}

const struct gs_api_desc *api_desc(unsigned int api)
{
	return api > 0 && api < GS_API_MAX ? &gs_api_descs[api] : NULL;
}

struct code_name {
	int code;
	const char *name;
};

/* CUresult values (cuda.h); the common ones. */
static const struct code_name cu_results[] = {
	{ 0, "CUDA_SUCCESS" },
	{ 1, "CUDA_ERROR_INVALID_VALUE" },
	{ 2, "CUDA_ERROR_OUT_OF_MEMORY" },
	{ 3, "CUDA_ERROR_NOT_INITIALIZED" },
	{ 4, "CUDA_ERROR_DEINITIALIZED" },
	{ 5, "CUDA_ERROR_PROFILER_DISABLED" },
	{ 34, "CUDA_ERROR_STUB_LIBRARY" },
	{ 46, "CUDA_ERROR_DEVICE_UNAVAILABLE" },
	{ 100, "CUDA_ERROR_NO_DEVICE" },
	{ 101, "CUDA_ERROR_INVALID_DEVICE" },
	{ 102, "CUDA_ERROR_DEVICE_NOT_LICENSED" },
	{ 200, "CUDA_ERROR_INVALID_IMAGE" },
	{ 201, "CUDA_ERROR_INVALID_CONTEXT" },
	{ 205, "CUDA_ERROR_MAP_FAILED" },
	{ 206, "CUDA_ERROR_UNMAP_FAILED" },
	{ 209, "CUDA_ERROR_NO_BINARY_FOR_GPU" },
	{ 214, "CUDA_ERROR_ECC_UNCORRECTABLE" },
	{ 218, "CUDA_ERROR_INVALID_PTX" },
	{ 222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" },
	{ 300, "CUDA_ERROR_INVALID_SOURCE" },
	{ 301, "CUDA_ERROR_FILE_NOT_FOUND" },
	{ 400, "CUDA_ERROR_INVALID_HANDLE" },
	{ 401, "CUDA_ERROR_ILLEGAL_STATE" },
	{ 500, "CUDA_ERROR_NOT_FOUND" },
	{ 600, "CUDA_ERROR_NOT_READY" },
	{ 700, "CUDA_ERROR_ILLEGAL_ADDRESS" },
	{ 701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" },
	{ 702, "CUDA_ERROR_LAUNCH_TIMEOUT" },
	{ 704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED" },
	{ 709, "CUDA_ERROR_CONTEXT_IS_DESTROYED" },
	{ 710, "CUDA_ERROR_ASSERT" },
	{ 719, "CUDA_ERROR_LAUNCH_FAILED" },
	{ 720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE" },
	{ 800, "CUDA_ERROR_NOT_PERMITTED" },
	{ 801, "CUDA_ERROR_NOT_SUPPORTED" },
	{ 900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED" },
	{ 901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED" },
	{ 905, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED" },
	{ 906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT" },
	{ 999, "CUDA_ERROR_UNKNOWN" },
};

/* cudaError_t values (driver_types.h), for the runtime's entry points. */
static const struct code_name cudart_results[] = {
	{ 0, "cudaSuccess" },
	{ 1, "cudaErrorInvalidValue" },
	{ 2, "cudaErrorMemoryAllocation" },
	{ 3, "cudaErrorInitializationError" },
	{ 35, "cudaErrorInsufficientDriver" },
	{ 98, "cudaErrorInvalidDeviceFunction" },
	{ 100, "cudaErrorNoDevice" },
	{ 101, "cudaErrorInvalidDevice" },
	{ 209, "cudaErrorNoKernelImageForDevice" },
	{ 400, "cudaErrorInvalidResourceHandle" },
	{ 500, "cudaErrorSymbolNotFound" },
	{ 600, "cudaErrorNotReady" },
	{ 999, "cudaErrorUnknown" },
};

/* ncclResult_t (nccl.h). */
static const struct code_name nccl_results[] = {
	{ 0, "ncclSuccess" },	    { 1, "ncclUnhandledCudaError" }, { 2, "ncclSystemError" },
	{ 3, "ncclInternalError" }, { 4, "ncclInvalidArgument" },    { 5, "ncclInvalidUsage" },
	{ 6, "ncclRemoteError" },   { 7, "ncclInProgress" },
};

static const char *lookup_code(const struct code_name *t, size_t n, int code)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].code == code)
			return t[i].name;
	return NULL;
}

const char *result_name(unsigned int api, int result)
{
	const struct gs_api_desc *d = api_desc(api);

	if (!d)
		return NULL;
	switch (d->lib) {
	case GS_LIB_CUDART:
		return lookup_code(cudart_results, ARRAY_SIZE(cudart_results), result);
	case GS_LIB_NCCL:
		return lookup_code(nccl_results, ARRAY_SIZE(nccl_results), result);
	default:
		return lookup_code(cu_results, ARRAY_SIZE(cu_results), result);
	}
}

bool result_is_status(unsigned int api, int result)
{
	return result == 600 &&
	       (api == GS_API_CU_STREAM_QUERY || api == GS_API_CU_STREAM_QUERY_PTSZ ||
		api == GS_API_CU_EVENT_QUERY);
}

const char *copy_kind_name(unsigned int kind)
{
	static const char *const n[GS_COPY_KIND_MAX] = {
		[GS_COPY_UNKNOWN] = "unknown", [GS_COPY_HTOD] = "HtoD",
		[GS_COPY_DTOH] = "DtoH",       [GS_COPY_DTOD] = "DtoD",
		[GS_COPY_HTOH] = "HtoH",       [GS_COPY_PEER] = "peer",
		[GS_COPY_DEFAULT] = "default", [GS_COPY_MEMSET] = "memset",
		[GS_COPY_ARRAY] = "array",
	};

	return kind < GS_COPY_KIND_MAX ? n[kind] : "?";
}

const char *nccl_op_name(unsigned int op)
{
	static const char *const n[] = {
		[GS_NCCL_ALL_REDUCE] = "all_reduce",
		[GS_NCCL_ALL_GATHER] = "all_gather",
		[GS_NCCL_REDUCE_SCATTER] = "reduce_scatter",
		[GS_NCCL_BROADCAST] = "broadcast",
		[GS_NCCL_REDUCE] = "reduce",
		[GS_NCCL_SEND] = "send",
		[GS_NCCL_RECV] = "recv",
		[GS_NCCL_GROUP_START] = "group_start",
		[GS_NCCL_GROUP_END] = "group_end",
		[GS_NCCL_COMM_INIT] = "comm_init",
		[GS_NCCL_COMM_DESTROY] = "comm_destroy",
	};

	return op < ARRAY_SIZE(n) && n[op] ? n[op] : "?";
}

static const struct {
	const char *name;
	int size;
} nccl_types[] = {
	{ "int8", 1 },	  { "uint8", 1 },    { "int32", 4 },	  { "uint32", 4 },
	{ "int64", 8 },	  { "uint64", 8 },   { "float16", 2 },	  { "float32", 4 },
	{ "float64", 8 }, { "bfloat16", 2 }, { "float8e4m3", 1 }, { "float8e5m2", 1 },
};

int nccl_type_size(int t)
{
	return t >= 0 && t < (int)ARRAY_SIZE(nccl_types) ? nccl_types[t].size : 0;
}

const char *lib_kind_name(unsigned int kind)
{
	static const char *const n[GS_LIB_KIND_MAX] = {
		[GS_LIB_NONE] = "other",       [GS_LIB_CUDA] = "libcuda",
		[GS_LIB_CUDART] = "libcudart", [GS_LIB_NCCL] = "libnccl",
		[GS_LIB_EXE] = "executable",
	};

	return kind < GS_LIB_KIND_MAX ? n[kind] : "?";
}

const char *event_type_name(unsigned int type)
{
	static const char *const n[GS_EV_MAX] = {
		[GS_EV_NONE] = "none",
		[GS_EV_LAUNCH] = "launch",
		[GS_EV_KNAME] = "kname",
		[GS_EV_KALIAS] = "kalias",
		[GS_EV_MEM] = "mem",
		[GS_EV_COPY] = "copy",
		[GS_EV_SYNC] = "sync",
		[GS_EV_API] = "api",
		[GS_EV_NCCL] = "nccl",
		[GS_EV_PROC] = "proc",
		[GS_EV_LIB] = "lib",
		[GS_EV_SESSION] = "session",
		[GS_EV_ATTACH] = "attach",
		[GS_EV_DROPS] = "drops",
		[GS_EV_GPU] = "gpu",
		[GS_EV_OFFCPU] = "offcpu",
		[GS_EV_FAULTS] = "faults",
		[GS_EV_BLOCK] = "block",
		[GS_EV_NET] = "net",
		[GS_EV_SYSCALL] = "syscall",
		[GS_EV_STACK] = "stack",
		[GS_EV_SYMBOL] = "symbol",
		[GS_EV_NVML] = "nvml",
		[GS_EV_DEVCODE] = "devcode",
		[GS_EV_PROBE_OUT] = "probe_out",
		[GS_EV_HOST] = "host",
		[GS_EV_GPU_INFO] = "gpu_info",
		[GS_EV_PROC_INFO] = "proc_info",
		[GS_EV_BLOCKDEV] = "blockdev",
		[GS_EV_RETIRE] = "retire",
		[GS_EV_PYTHON] = "python",
		[GS_EV_PYSTACK] = "pystack",
		[GS_EV_PYEXC] = "pyexc",
	};

	return type < GS_EV_MAX ? n[type] : "?";
}

const char *syscall_name(unsigned int nr)
{
	/* The system calls the OS plane reports (x86-64 numbers), and what blocks. */
	static const struct {
		unsigned int nr;
		const char *name;
	} t[] = {
		{ 0, "read" },		 { 1, "write" },
		{ 7, "poll" },		 { 9, "mmap" },
		{ 11, "munmap" },	 { 16, "ioctl" },
		{ 17, "pread64" },	 { 18, "pwrite64" },
		{ 19, "readv" },	 { 20, "writev" },
		{ 35, "nanosleep" },	 { 74, "fsync" },
		{ 202, "futex" },	 { 230, "clock_nanosleep" },
		{ 232, "epoll_wait" },	 { 271, "ppoll" },
		{ 281, "epoll_pwait" },	 { 44, "sendto" },
		{ 45, "recvfrom" },	 { 46, "sendmsg" },
		{ 47, "recvmsg" },	 { 23, "select" },
		{ 61, "wait4" },	 { 257, "openat" },
		{ 3, "close" },		 { 43, "accept" },
		{ 42, "connect" },	 { 288, "accept4" },
		{ 24, "sched_yield" },	 { 10, "mprotect" },
		{ 12, "brk" },		 { 28, "madvise" },
		{ 319, "memfd_create" }, { 295, "preadv" },
		{ 296, "pwritev" },	 { 327, "preadv2" },
		{ 328, "pwritev2" },	 { 426, "io_uring_enter" },
	};
	static __thread char buf[24];

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].nr == nr)
			return t[i].name;
	snprintf(buf, sizeof(buf), "syscall %u", nr);
	return buf;
}

const char *offcpu_reason_name(unsigned int r)
{
	static const char *const n[] = { [GS_OFFCPU_PREEMPTED] = "preempted",
					 [GS_OFFCPU_SLEEP] = "sleep",
					 [GS_OFFCPU_DISK] = "disk",
					 [GS_OFFCPU_OTHER] = "other" };

	return r < sizeof(n) / sizeof(n[0]) && n[r] ? n[r] : "?";
}

const char *block_op_name(unsigned int op)
{
	static const char *const n[] = { [GS_BLOCK_READ] = "read",
					 [GS_BLOCK_WRITE] = "write",
					 [GS_BLOCK_FLUSH] = "flush",
					 [GS_BLOCK_DISCARD] = "discard",
					 [GS_BLOCK_OTHER] = "other" };

	return op < sizeof(n) / sizeof(n[0]) ? n[op] : "?";
}

const char *net_proto_name(int proto)
{
	return proto == 0 ? "TCP" : proto == 1 ? "UDP" : "other";
}
