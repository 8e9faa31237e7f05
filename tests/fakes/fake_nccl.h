/* SPDX-License-Identifier: MIT */
/* NCCL API subset (nccl.h 2.2x) used by the NCCL test double and its workloads. */
#ifndef FAKE_NCCL_H
#define FAKE_NCCL_H

#include <stddef.h>
#include "fake_cuda.h"

typedef struct ncclComm *ncclComm_t;
typedef int ncclResult_t;
#define ncclSuccess	       0
#define ncclUnhandledCudaError 1
#define ncclInternalError      3
#define ncclInvalidArgument    4
#define ncclInvalidUsage       5

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
	char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
	ncclInt8 = 0,
	ncclUint8 = 1,
	ncclInt32 = 2,
	ncclUint32 = 3,
	ncclInt64 = 4,
	ncclUint64 = 5,
	ncclFloat16 = 6,
	ncclFloat32 = 7,
	ncclFloat64 = 8,
	ncclBfloat16 = 9,
	ncclNumTypes = 10
} ncclDataType_t;

typedef enum {
	ncclSum = 0,
	ncclProd = 1,
	ncclMax = 2,
	ncclMin = 3,
	ncclAvg = 4
} ncclRedOp_t;

typedef struct {
	size_t size;
	unsigned int magic, version;
	int blocking;
} ncclConfig_t;

ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
				    ncclConfig_t *config);
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
			   ncclComm_t comm, CUstream stream);
ncclResult_t ncclBroadcast(const void *s, void *r, size_t count, ncclDataType_t t, int root,
			   ncclComm_t comm, CUstream stream);
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
		       CUstream stream);
ncclResult_t ncclReduce(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
			int root, ncclComm_t comm, CUstream stream);
ncclResult_t ncclAllGather(const void *s, void *r, size_t sendcount, ncclDataType_t t,
			   ncclComm_t comm, CUstream stream);
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t recvcount, ncclDataType_t t,
			       ncclRedOp_t op, ncclComm_t comm, CUstream stream);
ncclResult_t ncclSend(const void *s, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
		      CUstream stream);
ncclResult_t ncclRecv(void *r, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
		      CUstream stream);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
const char *ncclGetErrorString(ncclResult_t r);

#endif
