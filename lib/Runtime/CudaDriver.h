//===- CudaDriver.h - The CUDA driver API loaded with dlopen ----*- C++ -*-===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// The runtime links no CUDA library: it opens libcuda.so.1 at run time and
// resolves the few driver entry points it uses. Declarations come from the
// toolkit's cuda.h, so signatures are checked by the compiler. Private to
// lib/Runtime; compiled only when ATTN_HAVE_CUDA_H is defined.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_RUNTIME_CUDADRIVER_H
#define ATTN_LIB_RUNTIME_CUDADRIVER_H

#include "attn/Runtime/Status.h"

#include <cuda.h>

namespace attnrt {

/// Function table of the driver entry points the runtime needs.
struct CudaDriver {
  decltype(&::cuInit) init;
  decltype(&::cuGetErrorString) getErrorString;
  decltype(&::cuDeviceGetCount) deviceGetCount;
  decltype(&::cuDeviceGet) deviceGet;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute;
  decltype(&::cuDeviceGetName) deviceGetName;
  decltype(&::cuDevicePrimaryCtxRetain) primaryCtxRetain;
  decltype(&::cuCtxGetCurrent) ctxGetCurrent;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent;
  decltype(&::cuCtxGetDevice) ctxGetDevice;
  decltype(&::cuModuleLoadData) moduleLoadData;
  decltype(&::cuModuleUnload) moduleUnload;
  decltype(&::cuModuleGetFunction) moduleGetFunction;
  decltype(&::cuFuncSetAttribute) funcSetAttribute;
  decltype(&::cuLaunchKernel) launchKernel;
  decltype(&::cuMemcpyHtoDAsync) memcpyHtoDAsync;
  decltype(&::cuMemcpyDtoDAsync) memcpyDtoDAsync; // graph mode's page table into its fixed buffer
  // Host-lowered programs (HostCalls.cpp): index arrays back to the host,
  // the per-image workspace, managed buffers.
  decltype(&::cuMemcpyDtoHAsync) memcpyDtoHAsync;
  decltype(&::cuStreamSynchronize) streamSynchronize;
  decltype(&::cuMemAlloc) memAlloc;
  decltype(&::cuMemAllocManaged) memAllocManaged;
  decltype(&::cuMemFree) memFree;
  // The host-mapped index_error word of paged attention kernels.
  decltype(&::cuMemHostAlloc) memHostAlloc;
  decltype(&::cuMemHostGetDevicePointer) memHostGetDevicePointer;
  // Host calls refuse buffers the GPU cannot address (a host malloc).
  decltype(&::cuPointerGetAttribute) pointerGetAttribute;
  // UploadFence (the pinned staging a plan's copies read).
  decltype(&::cuEventCreate) eventCreate;
  decltype(&::cuEventRecord) eventRecord;
  decltype(&::cuEventSynchronize) eventSynchronize;
  decltype(&::cuEventDestroy) eventDestroy;
  decltype(&::cuStreamGetCtx) streamGetCtx;
  decltype(&::cuCtxPushCurrent) ctxPushCurrent;
  decltype(&::cuCtxPopCurrent) ctxPopCurrent;
  // The runtime's one capture query (status, id, graph: the check before a
  // plan's uploads, graph mode's capture id) and copy_by_table's copy put at
  // the head of the graph being captured (its table staged by a memcpy
  // node), the fence's event node after it.
  decltype(&::cuStreamGetCaptureInfo) streamGetCaptureInfo;
  decltype(&::cuGraphGetRootNodes) graphGetRootNodes;
  decltype(&::cuGraphAddKernelNode) graphAddKernelNode;
  decltype(&::cuGraphAddMemcpyNode) graphAddMemcpyNode;
  decltype(&::cuGraphAddDependencies) graphAddDependencies;
  decltype(&::cuGraphAddEventRecordNode) graphAddEventRecordNode;
  decltype(&::cuStreamUpdateCaptureDependencies) streamUpdateCaptureDependencies;
  /// Optional (CUDA 12+ drivers): null when the driver lacks it; the
  /// launcher then launches plainly (no programmatic dependent launch).
  decltype(&::cuLaunchKernelEx) launchKernelEx;
  /// Optional (CUDA 12.4+ drivers; declared here so that older headers
  /// build): null when absent; Module::load then checks no parameter sizes.
  CUresult (*funcGetParamInfo)(CUfunction, size_t, size_t *, size_t *);
  /// Optional (CUDA 12+ drivers): null when absent; kernels that load K/V
  /// by TMA then refuse to launch.
  decltype(&::cuTensorMapEncodeTiled) tensorMapEncodeTiled;
};

/// Loads libcuda.so.1 and cuInit()s once; returns the table or nullptr with
/// the reason in `status`.
const CudaDriver *cudaDriver(Status *status);

/// Makes sure a context is current (device 0's primary context if none).
Status ensureContext(const CudaDriver &d);

/// cudaDriver() with a context current (ensureContext): what every entry
/// that touches device memory, streams or events starts with. nullptr with
/// the reason in `status` when either fails.
const CudaDriver *cudaDriverInContext(Status *status);

/// "cuFoo failed: CUDA_ERROR_X (message)" as a CudaError status.
Status cudaFailure(const CudaDriver &d, const char *call, CUresult r);

} // namespace attnrt

#endif // ATTN_LIB_RUNTIME_CUDADRIVER_H
