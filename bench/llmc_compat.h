// bench/llmc_compat.h: what llm.c (f1e2ace, scripts/llmc_fetch.sh) needs to build with CUDA 13,
// passed to nvcc with -include by bench/llmc_build.sh, so that llm.c's source stays as pinned.
// CUDA 13 replaced cudaMemAdvise's int device with a cudaMemLocation; llm.c calls the old form
// once (llmc/cuda_utils.cuh, cudaMallocConditionallyManaged, device cudaCpuDeviceId = -1: the
// host). This overload takes the old form and calls the new one.
#pragma once
#include <cuda_runtime.h>
#if CUDART_VERSION >= 13000
static inline cudaError_t cudaMemAdvise(const void *ptr, size_t bytes, cudaMemoryAdvise advice, int device) {
    cudaMemLocation loc;
    loc.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    loc.id = device == cudaCpuDeviceId ? 0 : device;
    return cudaMemAdvise(ptr, bytes, advice, loc);
}
#endif
