// SPDX-License-Identifier: MIT
/*
 * NCCL workload against the NCCL test double: communicator set-up, every collective,
 * grouped point-to-point, one invalid call; entry points that call others (ncclBcast,
 * ncclCommInitAll), each call counted once. Byte counts follow nccl-tests' "size": the
 * bytes of the buffer the operation produces (all-gather and reduce-scatter: count * type
 * size * ranks).
 */
#include <stdio.h>
#include <stdlib.h>

#include "fake_nccl.h"
#include "truth.h"

static void op(const char *name, long long count, int tsize, int nranks)
{
	truth_add(1, "nccl:%s:count", name);
	truth_add(count * tsize * nranks, "nccl:%s:bytes", name);
}

static void kernel(const char *name, int n)
{
	truth_add(n, "launch:%s", name);
	truth_add(n, "launch_api:cuLaunchKernel");
	truth_add(n, "launches");
}

int main(void)
{
	ncclUniqueId id;
	ncclComm_t comm, pair[2];
	int devs[2] = { 0, 0 };

	truth_add(1, "processes");
	CHECK(ncclGetUniqueId(&id), ncclSuccess);
	CHECK(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
	truth_add(1, "nccl:comm_init:count");
	for (int i = 0; i < 10; i++) {
		CHECK(ncclAllReduce(NULL, NULL, 1 << 20, ncclFloat32, ncclSum, comm, NULL), 0);
		op("all_reduce", 1 << 20, 4, 1);
	}
	kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 10);
	for (int i = 0; i < 5; i++) {
		CHECK(ncclAllGather(NULL, NULL, 1024, ncclInt32, comm, NULL), 0);
		op("all_gather", 1024, 4, 1);
	}
	kernel("ncclDevKernel_AllGather_RING_LL", 5);
	for (int i = 0; i < 3; i++) {
		CHECK(ncclReduceScatter(NULL, NULL, 4096, ncclBfloat16, ncclSum, comm, NULL), 0);
		op("reduce_scatter", 4096, 2, 1);
	}
	kernel("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", 3);
	for (int i = 0; i < 2; i++) {
		CHECK(ncclBroadcast(NULL, NULL, 1000, ncclFloat64, 0, comm, NULL), 0);
		op("broadcast", 1000, 8, 1);
		CHECK(ncclReduce(NULL, NULL, 333, ncclInt8, ncclMax, 0, comm, NULL), 0);
		op("reduce", 333, 1, 1);
	}
	/* In place: ncclBcast goes through ncclBroadcast (a call), one operation each. */
	for (int i = 0; i < 2; i++) {
		CHECK(ncclBcast(NULL, 500, ncclFloat32, 0, comm, NULL), 0);
		op("broadcast", 500, 4, 1);
	}
	kernel("ncclDevKernel_Broadcast_RING_LL", 4);
	kernel("ncclDevKernel_Reduce_Sum_f32_RING_LL", 2);
	for (int i = 0; i < 3; i++) {
		CHECK(ncclGroupStart(), 0);
		CHECK(ncclSend(NULL, 256, ncclFloat16, 0, comm, NULL), 0);
		CHECK(ncclRecv(NULL, 256, ncclFloat16, 0, comm, NULL), 0);
		CHECK(ncclGroupEnd(), 0);
		op("send", 256, 2, 1);
		op("recv", 256, 2, 1);
		truth_add(1, "nccl:group_start:count");
		truth_add(1, "nccl:group_end:count");
	}
	kernel("ncclDevKernel_SendRecv", 3);
	CHECK(ncclBroadcast(NULL, NULL, 10, ncclFloat32, 5, comm, NULL), ncclInvalidArgument);
	truth_add(1, "nccl:broadcast:count");
	truth_add(1, "error:ncclBroadcast:4");
	/* (Its own group start and end inside: not the program's.) */
	CHECK(ncclCommInitAll(pair, 2, devs), ncclSuccess);
	truth_add(2, "nccl:comm_init:count");
	CHECK(ncclCommDestroy(pair[0]), 0);
	CHECK(ncclCommDestroy(pair[1]), 0);
	CHECK(ncclCommDestroy(comm), 0);
	truth_add(3, "nccl:comm_destroy:count");
	/* Each communicator mapped one 4 MiB VMM buffer, released on destroy. */
	truth_add(3, "alloc:cuMemCreate");
	truth_add(0, "outstanding:device");
	truth_write();
	return 0;
}
