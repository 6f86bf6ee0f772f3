// dev/cuda/emu/cuda_runtime.h: the CUDA runtime as the kernel headers see it, on the CPU, for
// dev/cuda/kernels_emulate.cpp (g++ -D__CUDACC__ -D__CUDA_ARCH__=900 -Idev/cuda/emu): the
// keywords, the device functions the kernels call (shuffles, __syncthreads, atomics, the
// cache-hinted loads, the IEEE intrinsics), and the part of the runtime API the launchers use,
// over dev/cuda/emulate.h's machine. Device memory is host memory; a launch runs at once, to
// its end, on the calling thread; streams, events and synchronizations have nothing to wait for.
//
// Two constructs C++ cannot parse, the launch `kernel<<<grid, block, smem, stream>>>(args)` and
// `__shared__` declarations, are rewritten in the headers' text by dev/cuda/emulate_source.py into
// emu_launch_kernel and emu_static_shared / emu_dynamic_shared below (build/emu/: the same lines).
// Static shared memory is one arena of the emulator, filled with 0xFF bytes (NaN) at each block's
// start, so that a read before the block wrote it gives NaN.
#pragma once
#include "dev/cuda/emulate.h"
#include <map>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __syncthreads() emu_syncthreads()

typedef EmuDim3 dim3;
typedef struct EmuStream *cudaStream_t;
typedef struct EmuEvent *cudaEvent_t;

// ----------------------------------------------------------------------------
// device functions

template <class T> static inline T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) { return emu_shfl(v, EMU_SHFL_XOR, mask, width); }
template <class T> static inline T __shfl_down_sync(unsigned, T v, unsigned d, int width = 32) { return emu_shfl(v, EMU_SHFL_DOWN, (int)d, width); }
template <class T> static inline T __shfl_up_sync(unsigned, T v, unsigned d, int width = 32) { return emu_shfl(v, EMU_SHFL_UP, (int)d, width); }
template <class T> static inline T __shfl_sync(unsigned, T v, int src, int width = 32) { return emu_shfl(v, EMU_SHFL_IDX, src, width); }

// one thread runs at a time: a read-modify-write is atomic as it stands
template <class T> static inline T atomicAdd(T *p, T v) { T old = *p; *p = old + v; return old; }
template <class T> static inline T atomicMax(T *p, T v) { T old = *p; *p = old > v ? old : v; return old; }
template <class T> static inline T atomicMin(T *p, T v) { T old = *p; *p = old < v ? old : v; return old; }
template <class T> static inline T atomicExch(T *p, T v) { T old = *p; *p = v; return old; }
static inline void __threadfence(void) {}

template <class T> static inline T __ldcs(const T *p) { return *p; }
template <class T> static inline T __ldcg(const T *p) { return *p; }
template <class T> static inline T __ldg(const T *p) { return *p; }
template <class T> static inline void __stcs(T *p, T v) { *p = v; }
template <class T> static inline void __stcg(T *p, T v) { *p = v; }

// the round-to-nearest intrinsics are x86's IEEE single-precision operations (SSE, no contraction);
// rsqrtf, expf and logf are the host's, a few ulp from the GPU's approximations
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float rsqrtf(float a) { return 1.0f / sqrtf(a); }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }

// ----------------------------------------------------------------------------
// what emulate_source.py writes

// static __shared__ storage of one declaration (function, line) in the arena; the arena never moves
struct EmuSharedArena {
    std::vector<char> bytes = std::vector<char>(1 << 20);
    size_t used = 0;
    std::map<std::pair<const void *, int>, size_t> at;
};
static EmuSharedArena g_emu_shared;
template <class T> static T *emu_static_shared(const char *func, int line) {
    auto key = std::make_pair((const void *)func, line);
    auto it = g_emu_shared.at.find(key);
    if (it == g_emu_shared.at.end()) {
        size_t off = (g_emu_shared.used + 15) / 16 * 16;
        if (off + sizeof(T) > g_emu_shared.bytes.size()) { fprintf(stderr, "emulator: static shared arena full\n"); exit(2); }
        g_emu_shared.used = off + sizeof(T);
        memset(&g_emu_shared.bytes[off], 0xFF, sizeof(T));
        it = g_emu_shared.at.emplace(key, off).first;
    }
    return (T *)&g_emu_shared.bytes[it->second];
}
static inline void *emu_dynamic_shared(void) { return g_emu.smem; }
static void emu_poison_static_shared(void) { memset(g_emu_shared.bytes.data(), 0xFF, g_emu_shared.used); }

enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInvalidConfiguration = 9,
                 cudaErrorNoDevice = 100 };
typedef enum cudaError cudaError_t;
static cudaError_t g_emu_last_error = cudaSuccess;
static size_t g_emu_smem_optin = 48 << 10;   // the dynamic shared memory a launch may use (cudaFuncSetAttribute raises it)

// kernel<<<grid, block, smem, stream>>>(args): checked as the driver would, then run
template <class F> static void emu_launch_kernel(EmuDim3 grid, EmuDim3 block, size_t smem, cudaStream_t, F f) {
    const size_t threads = (size_t)block.x * block.y * block.z;
    if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 ||
        smem > g_emu_smem_optin) {
        g_emu_last_error = cudaErrorInvalidConfiguration;
        return;
    }
    emu_launch(grid, block, smem, f);
}

// ----------------------------------------------------------------------------
// the runtime API

struct cudaDeviceProp {
    char name[256];
    int multiProcessorCount, maxThreadsPerMultiProcessor, major, minor;
    size_t sharedMemPerBlockOptin, totalGlobalMem;
};
// the emulated device: an H100's shape; g_emu_sms may be lowered so that grids that a count of
// multiprocessors caps loop in their grid-stride loops
static int g_emu_sms = 132;
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyDefault };

static inline cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
static inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "CPU emulation (dev/cuda/emulate.h)");
    p->multiProcessorCount = g_emu_sms;
    p->maxThreadsPerMultiProcessor = 2048;
    p->major = 9;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->totalGlobalMem = (size_t)80 << 30;
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int) {
    *v = a == cudaDevAttrMultiProcessorCount ? g_emu_sms : 0;
    return cudaSuccess;
}
template <class K> static inline cudaError_t cudaFuncSetAttribute(K, cudaFuncAttribute a, int v) {
    if (a == cudaFuncAttributeMaxDynamicSharedMemorySize) g_emu_smem_optin = (size_t)v > g_emu_smem_optin ? (size_t)v : g_emu_smem_optin;
    return cudaSuccess;
}
template <class K> static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, K, int threads, size_t) {
    *n = threads > 0 ? 2048 / threads : 1;
    return cudaSuccess;
}
static inline cudaError_t cudaGetLastError(void) { cudaError_t e = g_emu_last_error; g_emu_last_error = cudaSuccess; return e; }
static inline cudaError_t cudaPeekAtLastError(void) { return g_emu_last_error; }
static inline const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated CUDA error"; }
static inline const char *cudaGetErrorName(cudaError_t e) {
    return e == cudaSuccess ? "cudaSuccess" : e == cudaErrorInvalidConfiguration ? "cudaErrorInvalidConfiguration" : "cudaError";
}

template <class T> static inline cudaError_t cudaMalloc(T **p, size_t bytes) {
    *p = (T *)aligned_alloc(256, (bytes + 255) / 256 * 256);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) { memmove(d, s, n); return cudaSuccess; }
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t = 0) { memmove(d, s, n); return cudaSuccess; }
static inline cudaError_t cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
static inline cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t = 0) { memset(d, v, n); return cudaSuccess; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

static struct EmuRuntimeHooks {
    EmuRuntimeHooks() { g_emu.block_hook = emu_poison_static_shared; }
} g_emu_runtime_hooks;
