// SPDX-License-Identifier: MIT
/*
 * libnccl.so.2 test double. Each communicator is local (no peers are contacted), but the
 * library meets the driver the way NCCL does: driver entry points come from
 * cuGetProcAddress_v2, buffers are made with the VMM calls (cuMemCreate,
 * cuMemAddressReserve, cuMemMap), and every collective or point-to-point call launches a
 * device kernel named like NCCL's (ncclDevKernel_AllReduce_Sum_f32_RING_LL ...), deferred to
 * ncclGroupEnd inside a group. Public functions have pncclX aliases at the same address,
 * as in the real library.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_nccl.h"

#define EXPORT __attribute__((visibility("default")))
#define NCCL_API(ret, name, ...)                                       \
	EXPORT ret p##name(__VA_ARGS__) __attribute__((alias(#name))); \
	EXPORT ret name(__VA_ARGS__)

#define BUF_BYTES (4ULL << 20)

struct ncclComm {
	int rank, nranks, dev;
	CUdeviceptr va;
	CUmemGenericAllocationHandle h;
};

static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*LibraryLoadData)(CUlibrary *, const void *, void *, void **, unsigned, void *,
				    void **, unsigned);
	CUresult (*LibraryGetKernel)(CUkernel *, CUlibrary, const char *);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
				 unsigned, unsigned, CUstream, void **, void **);
	CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			      unsigned long long);
	CUresult (*MemRelease)(CUmemGenericAllocationHandle);
	CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
				      unsigned long long);
	CUresult (*MemAddressFree)(CUdeviceptr, size_t);
	CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
			   unsigned long long);
	CUresult (*MemUnmap)(CUdeviceptr, size_t);
} drv;

static const char kernels_ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry ncclDevKernel_AllReduce_Sum_f32_RING_LL()\n{ ret; }\n"
	".visible .entry ncclDevKernel_AllGather_RING_LL()\n{ ret; }\n"
	".visible .entry ncclDevKernel_ReduceScatter_Sum_f32_RING_LL()\n{ ret; }\n"
	".visible .entry ncclDevKernel_Broadcast_RING_LL()\n{ ret; }\n"
	".visible .entry ncclDevKernel_Reduce_Sum_f32_RING_LL()\n{ ret; }\n"
	".visible .entry ncclDevKernel_SendRecv()\n{ ret; }\n";

enum {
	K_ALLREDUCE,
	K_ALLGATHER,
	K_REDUCESCATTER,
	K_BROADCAST,
	K_REDUCE,
	K_SENDRECV,
	K_NUM
};
static const char *kernel_names[K_NUM] = {
	"ncclDevKernel_AllReduce_Sum_f32_RING_LL",     "ncclDevKernel_AllGather_RING_LL",
	"ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", "ncclDevKernel_Broadcast_RING_LL",
	"ncclDevKernel_Reduce_Sum_f32_RING_LL",	       "ncclDevKernel_SendRecv",
};
static CUkernel kernels[K_NUM];

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_failed;
static __thread int group_depth;
static __thread struct pending {
	int kernel;
	CUstream stream;
} pending[64];
static __thread int npending;

static void load_driver(void)
{
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, int *);
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	CUlibrary lib;
	CUcontext ctx;

	init_failed = 1;
	if (!h || !(gpa = (CUresult(*)(const char *, void **, int, cuuint64_t, int *))dlsym(
			    h, "cuGetProcAddress_v2")))
		return;
#define FETCH(f, n)                                  \
	if (gpa(n, (void **)&drv.f, 13000, 0, NULL)) \
	return
	FETCH(Init, "cuInit");
	FETCH(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	FETCH(CtxSetCurrent, "cuCtxSetCurrent");
	FETCH(LibraryLoadData, "cuLibraryLoadData");
	FETCH(LibraryGetKernel, "cuLibraryGetKernel");
	FETCH(LaunchKernel, "cuLaunchKernel");
	FETCH(MemCreate, "cuMemCreate");
	FETCH(MemRelease, "cuMemRelease");
	FETCH(MemAddressReserve, "cuMemAddressReserve");
	FETCH(MemAddressFree, "cuMemAddressFree");
	FETCH(MemMap, "cuMemMap");
	FETCH(MemUnmap, "cuMemUnmap");
#undef FETCH
	if (drv.Init(0) || drv.DevicePrimaryCtxRetain(&ctx, 0) || drv.CtxSetCurrent(ctx) ||
	    drv.LibraryLoadData(&lib, kernels_ptx, NULL, NULL, 0, NULL, NULL, 0))
		return;
	for (int i = 0; i < K_NUM; i++)
		if (drv.LibraryGetKernel(&kernels[i], lib, kernel_names[i]))
			return;
	init_failed = 0;
}

static int ready(void)
{
	pthread_once(&once, load_driver);
	return init_failed;
}

static ncclResult_t comm_init(ncclComm_t *out, int nranks, int rank, int dev)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, dev } };
	struct ncclComm *c;

	if (!out || nranks < 1 || rank < 0 || rank >= nranks)
		return ncclInvalidArgument;
	if (ready())
		return ncclUnhandledCudaError;
	c = calloc(1, sizeof(*c));
	c->rank = rank;
	c->nranks = nranks;
	c->dev = dev;
	if (drv.MemCreate(&c->h, BUF_BYTES, &prop, 0) ||
	    drv.MemAddressReserve(&c->va, BUF_BYTES, 0, 0, 0) ||
	    drv.MemMap(c->va, BUF_BYTES, 0, c->h, 0)) {
		free(c);
		return ncclUnhandledCudaError;
	}
	*out = c;
	return ncclSuccess;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	if (!id)
		return ncclInvalidArgument;
	memset(id, 0, sizeof(*id));
	snprintf(id->internal, sizeof(id->internal), "fake-nccl-%d", getpid());
	return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	if (strncmp(id.internal, "fake-nccl-", 10))
		return ncclInvalidArgument;
	return comm_init(comm, nranks, rank, 0);
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t *comm, int nranks, ncclUniqueId id,
	 int rank, ncclConfig_t *config)
{
	(void)config;
	if (strncmp(id.internal, "fake-nccl-", 10))
		return ncclInvalidArgument;
	return comm_init(comm, nranks, rank, 0);
}

/* As NCCL's, inside a group of its own (through the public ncclGroupStart and End: calls
 * of probed entry points from one). */
NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t *comms, int ndev, const int *devlist)
{
	ncclResult_t r = ncclSuccess;

	if (!comms || ndev < 1)
		return ncclInvalidArgument;
	ncclGroupStart();
	for (int i = 0; i < ndev && r == ncclSuccess; i++)
		r = comm_init(&comms[i], ndev, i, devlist ? devlist[i] : i);
	if (ncclGroupEnd() != ncclSuccess && r == ncclSuccess)
		r = ncclInternalError;
	return r;
}

static ncclResult_t comm_free(ncclComm_t c)
{
	if (!c)
		return ncclInvalidArgument;
	drv.MemUnmap(c->va, BUF_BYTES);
	drv.MemAddressFree(c->va, BUF_BYTES);
	drv.MemRelease(c->h);
	free(c);
	return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm)
{
	return comm_free(comm);
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm)
{
	return comm_free(comm);
}

static ncclResult_t launch(int k)
{
	return drv.LaunchKernel((CUfunction)kernels[k], 4, 1, 1, 512, 1, 1, 0, NULL, NULL, NULL)
		       ? ncclUnhandledCudaError
		       : ncclSuccess;
}

static ncclResult_t enqueue(int k, ncclComm_t comm, size_t count, ncclDataType_t t, CUstream stream)
{
	if (!comm || (int)t < 0 || t >= ncclNumTypes || (count && ready()))
		return ncclInvalidArgument;
	if (group_depth) {
		if (npending == 64)
			return ncclInvalidUsage;
		pending[npending++] = (struct pending){ k, stream };
		return ncclSuccess;
	}
	return launch(k);
}

NCCL_API(ncclResult_t, ncclAllReduce, const void *s, void *r, size_t count, ncclDataType_t t,
	 ncclRedOp_t op, ncclComm_t comm, CUstream stream)
{
	(void)s, (void)r, (void)op;
	return enqueue(K_ALLREDUCE, comm, count, t, stream);
}

NCCL_API(ncclResult_t, ncclBroadcast, const void *s, void *r, size_t count, ncclDataType_t t,
	 int root, ncclComm_t comm, CUstream stream)
{
	(void)s, (void)r;
	if (comm && (root < 0 || root >= comm->nranks))
		return ncclInvalidArgument;
	return enqueue(K_BROADCAST, comm, count, t, stream);
}

/* In place, through ncclBroadcast as NCCL's does: a call, not a jump (NCCL's keeps an NVTX
 * range open around it), so that both probed entry points see the one operation. */
NCCL_API(ncclResult_t, ncclBcast, void *buff, size_t count, ncclDataType_t t, int root,
	 ncclComm_t comm, CUstream stream)
{
	volatile ncclResult_t r = ncclBroadcast(buff, buff, count, t, root, comm, stream);

	return r;
}

NCCL_API(ncclResult_t, ncclReduce, const void *s, void *r, size_t count, ncclDataType_t t,
	 ncclRedOp_t op, int root, ncclComm_t comm, CUstream stream)
{
	(void)s, (void)r, (void)op;
	if (comm && (root < 0 || root >= comm->nranks))
		return ncclInvalidArgument;
	return enqueue(K_REDUCE, comm, count, t, stream);
}

NCCL_API(ncclResult_t, ncclAllGather, const void *s, void *r, size_t sendcount, ncclDataType_t t,
	 ncclComm_t comm, CUstream stream)
{
	(void)s, (void)r;
	return enqueue(K_ALLGATHER, comm, sendcount, t, stream);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void *s, void *r, size_t recvcount,
	 ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm, CUstream stream)
{
	(void)s, (void)r, (void)op;
	return enqueue(K_REDUCESCATTER, comm, recvcount, t, stream);
}

NCCL_API(ncclResult_t, ncclSend, const void *s, size_t count, ncclDataType_t t, int peer,
	 ncclComm_t comm, CUstream stream)
{
	(void)s;
	if (comm && (peer < 0 || peer >= comm->nranks))
		return ncclInvalidArgument;
	return enqueue(K_SENDRECV, comm, count, t, stream);
}

NCCL_API(ncclResult_t, ncclRecv, void *r, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
	 CUstream stream)
{
	(void)r;
	if (comm && (peer < 0 || peer >= comm->nranks))
		return ncclInvalidArgument;
	return enqueue(K_SENDRECV, comm, count, t, stream);
}

NCCL_API(ncclResult_t, ncclGroupStart, void)
{
	group_depth++;
	return ncclSuccess;
}

/* Point-to-point pairs inside a group fuse into one kernel, as in NCCL. */
NCCL_API(ncclResult_t, ncclGroupEnd, void)
{
	ncclResult_t r = ncclSuccess;
	int sendrecv = 0;

	if (group_depth == 0)
		return ncclInvalidUsage;
	if (--group_depth)
		return ncclSuccess;
	for (int i = 0; i < npending && r == ncclSuccess; i++) {
		if (pending[i].kernel == K_SENDRECV && sendrecv++)
			continue;
		r = launch(pending[i].kernel);
	}
	npending = 0;
	return r;
}

EXPORT const char *ncclGetErrorString(ncclResult_t r)
{
	return r == ncclSuccess ? "no error" : "NCCL test double error";
}
