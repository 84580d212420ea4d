//===- CudaDriver.cpp - The CUDA driver API loaded with dlopen ------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// cuda.h maps several names to versioned symbols (cuMemcpyHtoDAsync ->
// cuMemcpyHtoDAsync_v2); resolving the macro-expanded name keeps the symbol and
// the declared signature in step.
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"

#include <dlfcn.h>
#include <mutex>
#include <string>

namespace attnrt {

#define ATTN_STR2(x) #x
#define ATTN_STR(x) ATTN_STR2(x)

namespace {
struct Loaded {
  CudaDriver table{};
  Status status;
  bool ok = false;
};
} // namespace

static Loaded load() {
  Loaded l;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    l.status = Status(StatusCode::CudaUnavailable,
                      std::string("cannot load libcuda.so.1: ") + (e ? e : "?"));
    return l;
  }
  bool missing = false;
  std::string which;
#define ATTN_RESOLVE(field, fn)                                                \
  l.table.field = reinterpret_cast<decltype(l.table.field)>(                   \
      dlsym(lib, ATTN_STR(fn)));                                               \
  if (!l.table.field) {                                                        \
    missing = true;                                                            \
    which = ATTN_STR(fn);                                                      \
  }
  ATTN_RESOLVE(init, cuInit)
  ATTN_RESOLVE(getErrorString, cuGetErrorString)
  ATTN_RESOLVE(deviceGetCount, cuDeviceGetCount)
  ATTN_RESOLVE(deviceGet, cuDeviceGet)
  ATTN_RESOLVE(deviceGetAttribute, cuDeviceGetAttribute)
  ATTN_RESOLVE(deviceGetName, cuDeviceGetName)
  ATTN_RESOLVE(primaryCtxRetain, cuDevicePrimaryCtxRetain)
  ATTN_RESOLVE(ctxGetCurrent, cuCtxGetCurrent)
  ATTN_RESOLVE(ctxSetCurrent, cuCtxSetCurrent)
  ATTN_RESOLVE(ctxGetDevice, cuCtxGetDevice)
  ATTN_RESOLVE(moduleLoadData, cuModuleLoadData)
  ATTN_RESOLVE(memcpyDtoHAsync, cuMemcpyDtoHAsync)
  ATTN_RESOLVE(streamSynchronize, cuStreamSynchronize)
  ATTN_RESOLVE(memAlloc, cuMemAlloc)
  ATTN_RESOLVE(memAllocManaged, cuMemAllocManaged)
  ATTN_RESOLVE(memFree, cuMemFree)
  ATTN_RESOLVE(memHostAlloc, cuMemHostAlloc)
  ATTN_RESOLVE(memHostGetDevicePointer, cuMemHostGetDevicePointer)
  ATTN_RESOLVE(pointerGetAttribute, cuPointerGetAttribute)
  ATTN_RESOLVE(moduleUnload, cuModuleUnload)
  ATTN_RESOLVE(moduleGetFunction, cuModuleGetFunction)
  ATTN_RESOLVE(funcSetAttribute, cuFuncSetAttribute)
  ATTN_RESOLVE(launchKernel, cuLaunchKernel)
  ATTN_RESOLVE(memcpyHtoDAsync, cuMemcpyHtoDAsync)
  ATTN_RESOLVE(memcpyDtoDAsync, cuMemcpyDtoDAsync)
  ATTN_RESOLVE(eventCreate, cuEventCreate)
  ATTN_RESOLVE(eventRecord, cuEventRecord)
  ATTN_RESOLVE(eventSynchronize, cuEventSynchronize)
  ATTN_RESOLVE(eventDestroy, cuEventDestroy)
  ATTN_RESOLVE(streamGetCtx, cuStreamGetCtx)
  ATTN_RESOLVE(ctxPushCurrent, cuCtxPushCurrent)
  ATTN_RESOLVE(ctxPopCurrent, cuCtxPopCurrent)
  ATTN_RESOLVE(streamGetCaptureInfo, cuStreamGetCaptureInfo)
  ATTN_RESOLVE(graphGetRootNodes, cuGraphGetRootNodes)
  ATTN_RESOLVE(graphAddKernelNode, cuGraphAddKernelNode)
  ATTN_RESOLVE(graphAddMemcpyNode, cuGraphAddMemcpyNode)
  ATTN_RESOLVE(graphAddDependencies, cuGraphAddDependencies)
  ATTN_RESOLVE(graphAddEventRecordNode, cuGraphAddEventRecordNode)
  ATTN_RESOLVE(streamUpdateCaptureDependencies, cuStreamUpdateCaptureDependencies)
#undef ATTN_RESOLVE
  l.table.launchKernelEx = reinterpret_cast<decltype(l.table.launchKernelEx)>(
      dlsym(lib, ATTN_STR(cuLaunchKernelEx)));
  l.table.funcGetParamInfo =
      reinterpret_cast<decltype(l.table.funcGetParamInfo)>(
          dlsym(lib, "cuFuncGetParamInfo"));
  l.table.tensorMapEncodeTiled =
      reinterpret_cast<decltype(l.table.tensorMapEncodeTiled)>(
          dlsym(lib, "cuTensorMapEncodeTiled"));
  if (missing) {
    l.status = Status(StatusCode::CudaUnavailable,
                      "libcuda.so.1 lacks " + which + " (driver too old)");
    return l;
  }
  CUresult r = l.table.init(0);
  if (r != CUDA_SUCCESS) {
    const char *msg = nullptr;
    l.table.getErrorString(r, &msg);
    l.status = Status(StatusCode::CudaUnavailable,
                      std::string("cuInit failed: ") + (msg ? msg : "?"));
    return l;
  }
  int count = 0;
  if (l.table.deviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    l.status = Status(StatusCode::CudaUnavailable, "no CUDA device");
    return l;
  }
  l.ok = true;
  return l;
}

const CudaDriver *cudaDriver(Status *status) {
  static const Loaded loaded = load();
  if (!loaded.ok) {
    if (status)
      *status = loaded.status;
    return nullptr;
  }
  return &loaded.table;
}

const CudaDriver *cudaDriverInContext(Status *status) {
  const CudaDriver *d = cudaDriver(status);
  if (!d)
    return nullptr;
  if (Status c = ensureContext(*d); !c.ok()) {
    if (status)
      *status = c;
    return nullptr;
  }
  return d;
}

Status cudaFailure(const CudaDriver &d, const char *call, CUresult r) {
  const char *msg = nullptr;
  d.getErrorString(r, &msg);
  return Status(StatusCode::CudaError, std::string(call) + " failed: " +
                                           (msg ? msg : "unknown error") +
                                           " (code " + std::to_string(int(r)) +
                                           ")");
}

Status ensureContext(const CudaDriver &d) {
  CUcontext ctx = nullptr;
  if (CUresult r = d.ctxGetCurrent(&ctx); r != CUDA_SUCCESS)
    return cudaFailure(d, "cuCtxGetCurrent", r);
  if (ctx)
    return Status::success();
  CUdevice dev;
  if (CUresult r = d.deviceGet(&dev, 0); r != CUDA_SUCCESS)
    return cudaFailure(d, "cuDeviceGet", r);
  if (CUresult r = d.primaryCtxRetain(&ctx, dev); r != CUDA_SUCCESS)
    return cudaFailure(d, "cuDevicePrimaryCtxRetain", r);
  if (CUresult r = d.ctxSetCurrent(ctx); r != CUDA_SUCCESS)
    return cudaFailure(d, "cuCtxSetCurrent", r);
  return Status::success();
}

} // namespace attnrt
