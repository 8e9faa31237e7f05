/* SPDX-License-Identifier: MIT */
/*
 * The subset of the CUDA driver API (cuda.h, CUDA 13) that the test doubles implement and
 * the test workloads call, with the real type layouts and signatures. Written from the
 * public API documentation; the toolkit is not needed to build the tests.
 */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUlib_st *CUlibrary;
typedef struct CUkern_st *CUkernel;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUarray_st *CUarray;
typedef uint64_t cuuint64_t;
typedef uint32_t cuuint32_t;
typedef enum {
	CU_FUNCTION_LOADING_STATE_UNLOADED = 0,
	CU_FUNCTION_LOADING_STATE_LOADED = 1,
} CUfunctionLoadingState;

#define CUDA_SUCCESS			      0
#define CUDA_ERROR_INVALID_VALUE	      1
#define CUDA_ERROR_OUT_OF_MEMORY	      2
#define CUDA_ERROR_NOT_INITIALIZED	      3
#define CUDA_ERROR_INVALID_DEVICE	      101
#define CUDA_ERROR_INVALID_IMAGE	      200
#define CUDA_ERROR_INVALID_CONTEXT	      201
#define CUDA_ERROR_FILE_NOT_FOUND	      301
#define CUDA_ERROR_INVALID_HANDLE	      400
#define CUDA_ERROR_NOT_FOUND		      500
#define CUDA_ERROR_INVALID_PTX		      218
#define CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES    701
#define CU_LAUNCH_PARAM_BUFFER_POINTER	      ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE	      ((void *)0x02)
#define CUDA_ERROR_NOT_READY		      600
#define CUDA_ERROR_NOT_SUPPORTED	      801
#define CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED 900
#define CUDA_ERROR_STREAM_CAPTURE_INVALIDATED 901

#define CU_STREAM_LEGACY     ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

typedef enum {
	CU_MEMORYTYPE_HOST = 1,
	CU_MEMORYTYPE_DEVICE = 2,
	CU_MEMORYTYPE_ARRAY = 3,
	CU_MEMORYTYPE_UNIFIED = 4
} CUmemorytype;

typedef struct CUDA_MEMCPY2D_st {
	size_t srcXInBytes;
	size_t srcY;
	CUmemorytype srcMemoryType;
	const void *srcHost;
	CUdeviceptr srcDevice;
	CUarray srcArray;
	size_t srcPitch;
	size_t dstXInBytes;
	size_t dstY;
	CUmemorytype dstMemoryType;
	void *dstHost;
	CUdeviceptr dstDevice;
	CUarray dstArray;
	size_t dstPitch;
	size_t WidthInBytes;
	size_t Height;
} CUDA_MEMCPY2D;

typedef struct CUDA_MEMCPY3D_st {
	size_t srcXInBytes;
	size_t srcY;
	size_t srcZ;
	size_t srcLOD;
	CUmemorytype srcMemoryType;
	const void *srcHost;
	CUdeviceptr srcDevice;
	CUarray srcArray;
	void *reserved0;
	size_t srcPitch;
	size_t srcHeight;
	size_t dstXInBytes;
	size_t dstY;
	size_t dstZ;
	size_t dstLOD;
	CUmemorytype dstMemoryType;
	void *dstHost;
	CUdeviceptr dstDevice;
	CUarray dstArray;
	void *reserved1;
	size_t dstPitch;
	size_t dstHeight;
	size_t WidthInBytes;
	size_t Height;
	size_t Depth;
} CUDA_MEMCPY3D;

typedef enum {
	CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
	CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
} CUlaunchAttributeID;

typedef union CUlaunchAttributeValue_union {
	char pad[64];
	int cooperative;
	struct {
		unsigned int x, y, z;
	} clusterDim;
} CUlaunchAttributeValue;

typedef struct CUlaunchAttribute_st {
	CUlaunchAttributeID id;
	char pad[8 - sizeof(CUlaunchAttributeID)];
	CUlaunchAttributeValue value;
} CUlaunchAttribute;

typedef struct CUlaunchConfig_st {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	CUlaunchAttribute *attrs;
	unsigned int numAttrs;
} CUlaunchConfig;

/* Kernel node parameters: _v1 is CUDA 11's, _v2 (CUDA 12's) and _v3 (in CUgraphNodeParams)
 * add the CUkernel and the context. */
typedef struct CUDA_KERNEL_NODE_PARAMS_st {
	CUfunction func;
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	void **kernelParams;
	void **extra;
	CUkernel kern;
	CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;
typedef struct CUDA_CONDITIONAL_NODE_PARAMS_st {
	unsigned long long handle;
	int type; /* if, while, switch */
	unsigned int size;
	CUgraph *phGraph_out; /* the bodies, made by the driver */
	CUcontext ctx;
} CUDA_CONDITIONAL_NODE_PARAMS;
typedef struct CUDA_MEMSET_NODE_PARAMS_st {
	CUdeviceptr dst;
	size_t pitch;
	unsigned int value, elementSize;
	size_t width, height;
} CUDA_MEMSET_NODE_PARAMS;
typedef struct CUgraphNodeParams_st {
	int type; /* CU_GRAPH_NODE_TYPE_KERNEL: 0, _GRAPH: 4 (a child), _CONDITIONAL: 13 */
	int reserved0[3];
	union {
		long long reserved1[29];
		CUDA_KERNEL_NODE_PARAMS kernel;
		struct {
			CUgraph graph;
		} graph;
		CUDA_CONDITIONAL_NODE_PARAMS conditional;
	};
	long long reserved2;
} CUgraphNodeParams;

typedef enum {
	CU_MEM_LOCATION_TYPE_DEVICE = 1
} CUmemLocationType;
typedef enum {
	CU_MEM_ALLOCATION_TYPE_PINNED = 1
} CUmemAllocationType;

typedef struct CUmemLocation_st {
	CUmemLocationType type;
	int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
	CUmemAllocationType type;
	int requestedHandleTypes;
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

typedef struct CUmemPoolProps_st {
	CUmemAllocationType allocType;
	int handleTypes;
	CUmemLocation location;
	void *win32SecurityAttributes;
	size_t maxSize;
	unsigned short usage;
	unsigned char reserved[54];
} CUmemPoolProps;

typedef struct CUctxCreateParams_st CUctxCreateParams;

#define CU_GET_PROC_ADDRESS_DEFAULT		      0
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2
typedef int CUdriverProcAddressQueryResult;

#define CU_STREAM_CAPTURE_MODE_GLOBAL 0
#define CU_MEMHOSTALLOC_PORTABLE      1

/* Driver entry points (as exported by libcuda.so.1; the versioned names are the real ones). */
CUresult cuInit(unsigned int flags);
CUresult cuDriverGetVersion(int *v);
CUresult cuDeviceGetCount(int *n);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxPushCurrent_v2(CUcontext ctx);
CUresult cuCtxPopCurrent_v2(CUcontext *ctx);
CUresult cuCtxGetDevice(CUdevice *dev);
CUresult cuCtxSynchronize(void);
CUresult cuLibraryLoadData(CUlibrary *lib, const void *code, void *jitOptions,
			   void **jitOptionsValues, unsigned int numJitOptions,
			   void *libraryOptions, void **libraryOptionValues,
			   unsigned int numLibraryOptions);
CUresult cuLibraryGetKernel(CUkernel *out, CUlibrary lib, const char *name);
CUresult cuKernelGetFunction(CUfunction *out, CUkernel kernel);
CUresult cuLibraryUnload(CUlibrary lib);
CUresult cuModuleLoadData(CUmodule *mod, const void *image);
CUresult cuModuleGetFunction(CUfunction *out, CUmodule mod, const char *name);
CUresult cuModuleUnload(CUmodule mod);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
			void **extra);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			     unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
			     void **extra);
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
				   unsigned by, unsigned bz, unsigned smem, CUstream s,
				   void **params);
CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra);
CUresult cuGraphLaunch(CUgraphExec g, CUstream s);
CUresult cuGraphUpload(CUgraphExec g, CUstream s);
CUresult cuStreamBeginCapture_v2(CUstream s, int mode);
CUresult cuStreamEndCapture(CUstream s, CUgraph *out);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph g, unsigned long long flags);
typedef struct CUgraphNode_st *CUgraphNode;
CUresult cuGraphNodeSetEnabled(CUgraphExec e, CUgraphNode node, unsigned int on);
CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
				     const void *edges, size_t nd, int mode);
CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n);
CUresult cuGraphCreate(CUgraph *out, unsigned int flags);
CUresult cuGraphAddKernelNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
			      const CUDA_KERNEL_NODE_PARAMS *p);
CUresult cuGraphAddKernelNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
				 const CUDA_KERNEL_NODE_PARAMS *p);
CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p);
CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec e, CUgraphNode node,
					   const CUDA_KERNEL_NODE_PARAMS *p);
CUresult cuGraphAddNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, const void *edges,
			   size_t n, CUgraphNodeParams *p);
CUresult cuGraphNodeSetParams(CUgraphNode node, CUgraphNodeParams *p);
CUresult cuGraphAddChildGraphNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
				  CUgraph child);
CUresult cuGraphClone(CUgraph *out, CUgraph original);
CUresult cuGraphExecUpdate_v2(CUgraphExec e, CUgraph g, void *result_info);
CUresult cuGraphDestroy(CUgraph g);
CUresult cuGraphExecDestroy(CUgraphExec e);
CUresult cuGraphExecNodeSetParams(CUgraphExec e, CUgraphNode node, CUgraphNodeParams *p);
CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec e, CUgraphNode node,
					const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx);
CUresult cuGraphNodeGetType(CUgraphNode node, int *type);
CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec e, CUgraphNode node, CUgraph child);
CUresult cuModuleLoad(CUmodule *mod, const char *path);
CUresult cuLibraryLoadFromFile(CUlibrary *lib, const char *path, void *jitOptions,
			       void **jitOptionsValues, unsigned int numJitOptions,
			       void *libraryOptions, void **libraryOptionValues,
			       unsigned int numLibraryOptions);
typedef enum {
	CU_STREAM_CAPTURE_STATUS_NONE = 0,
	CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
	CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
} CUstreamCaptureStatus;
CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status);
CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status);
CUresult cuMemAlloc_v2(CUdeviceptr *out, size_t size);
CUresult cuMemAllocPitch_v2(CUdeviceptr *out, size_t *pitch, size_t w, size_t h, unsigned elem);
CUresult cuMemAllocManaged(CUdeviceptr *out, size_t size, unsigned int flags);
CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuMemHostAlloc(void **out, size_t size, unsigned int flags);
CUresult cuMemAllocHost_v2(void **out, size_t size);
CUresult cuMemFreeHost(void *p);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev);
CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props);
CUresult cuMemPoolDestroy(CUmemoryPool pool);
CUresult cuMemAllocAsync(CUdeviceptr *out, size_t size, CUstream s);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *out, size_t size, CUmemoryPool pool, CUstream s);
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s);
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total);
CUresult cuMemCreate(CUmemGenericAllocationHandle *out, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle h);
CUresult cuMemAddressReserve(CUdeviceptr *out, size_t size, size_t align, CUdeviceptr addr,
			     unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr va, size_t size);
CUresult cuMemMap(CUdeviceptr va, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		  unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr va, size_t size);
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s);
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n);
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *c);
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *c);
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n);
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s);
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n, CUstream s);
CUresult cuMemsetD2D8_v2(CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h);
CUresult cuStreamCreate(CUstream *out, unsigned int flags);
CUresult cuStreamSynchronize(CUstream s);
CUresult cuStreamSynchronize_ptsz(CUstream s);
CUresult cuStreamQuery(CUstream s);
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags);
CUresult cuEventCreate(CUevent *out, unsigned int flags);
CUresult cuEventRecord(CUevent e, CUstream s);
CUresult cuEventSynchronize(CUevent e);
CUresult cuEventQuery(CUevent e);
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);

#endif
