// cuda/common.cuh: what every zeroc CUDA kernel header shares.
//   - cudaCheck / cublasCheck: one-line "file:line: message" errors and exit(1)
//   - floatX (util/common.h): the storage type of activations, parameters and grads, __nv_bfloat16,
//     or __half in the fp16 build (make train_gpt FP16=1: -DFLOATX_FP16=1); bf2f / f2bf convert
//     floatX to and from fp32 whichever it is, floatX2 is its pair type, CUDA_R_FLOATX its cuBLAS type
//   - Packed128<T>: 16-byte vectorized loads and stores (8 floatX or 4 fp32)
//   - warp and block reductions (sum, max), fp32
//   - device properties cached once (SM count, shared memory limits)
//
// Conventions of all kernels under cuda/:
//   - storage is floatX (bf16 or fp16), arithmetic inside a kernel is fp32, losses are fp32;
//   - every host launcher takes a cudaStream_t and checks the launch;
//   - parameter gradients are ACCUMULATED (+=): the caller zeroes them once per step;
//   - activation gradients are overwritten unless the function's comment says "+=";
//   - reductions across rows (dweight, dbias, dwte, global norm) are deterministic:
//     fixed assignment of rows to threads and fixed summation order, no float atomics.
// Vectorized paths need 16-byte aligned pointers (cudaMalloc'd base plus offsets that are
// multiples of 8 floatX elements) and row widths that are multiples of 8; the launchers check
// what they rely on and fail with a one-line error otherwise.
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#include "util/common.h"   // floatX (bf16, or fp16 with FLOATX_FP16), the host conversions, fatal

#define WARP_SIZE 32

// ----------------------------------------------------------------------------
// error checking

static inline void cuda_check_impl(cudaError_t err, const char *file, int line) {
    if (err != cudaSuccess) fatal("CUDA: %s:%d: %s (%s)", file, line, cudaGetErrorString(err), cudaGetErrorName(err));
}
#define cudaCheck(err) cuda_check_impl((err), __FILE__, __LINE__)
// after a kernel launch: catches bad launch configurations (not asynchronous faults)
#define cudaCheckLaunch() cuda_check_impl(cudaGetLastError(), __FILE__, __LINE__)

static inline const char *cublas_status_string(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        default: return "CUBLAS_STATUS_UNKNOWN";
    }
}
static inline void cublas_check_impl(cublasStatus_t status, const char *file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) fatal("cuBLAS: %s:%d: %s (%d)", file, line, cublas_status_string(status), (int)status);
}
#define cublasCheck(status) cublas_check_impl((status), __FILE__, __LINE__)

// a failed precondition of a launcher: one line naming the function and the problem
static inline void cuda_require_impl(int ok, const char *func, const char *what) {
    if (!ok) fatal("%s: requires %s", func, what);
}
#define CUDA_REQUIRE(cond) cuda_require_impl((cond) ? 1 : 0, __func__, #cond)

static inline int is_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

// ----------------------------------------------------------------------------
// device properties, read once

typedef struct {
    int init;
    int device;
    int num_sms;
    int max_smem_optin;      // bytes a block may use after cudaFuncSetAttribute
    int max_threads_per_sm;
} CudaDeviceInfo;

static CudaDeviceInfo g_cuda_device_info = {0, 0, 0, 0, 0};

static inline const CudaDeviceInfo *cuda_device_info(void) {
    if (!g_cuda_device_info.init) {
        int dev = 0;
        cudaCheck(cudaGetDevice(&dev));
        cudaDeviceProp p;
        cudaCheck(cudaGetDeviceProperties(&p, dev));
        g_cuda_device_info.device = dev;
        g_cuda_device_info.num_sms = p.multiProcessorCount;
        g_cuda_device_info.max_smem_optin = (int)p.sharedMemPerBlockOptin;
        g_cuda_device_info.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
        g_cuda_device_info.init = 1;
    }
    return &g_cuda_device_info;
}
static inline int cuda_num_sms(void) { return cuda_device_info()->num_sms; }

// ----------------------------------------------------------------------------
// Packed128: 16 bytes of ElementType, loaded and stored as one int4

template <class ElementType>
struct alignas(16) Packed128 {
    static constexpr int size = (int)(sizeof(int4) / sizeof(ElementType));
    ElementType payload[size];

    Packed128() = default;
    __device__ explicit Packed128(int4 bits) { memcpy(&payload, &bits, sizeof(bits)); }
    __device__ static Packed128 constant(ElementType value) {
        Packed128 r;
#pragma unroll
        for (int k = 0; k < size; k++) r.payload[k] = value;
        return r;
    }
    __device__ static Packed128 zeros() { return constant((ElementType)0.0f); }
    __device__ ElementType &operator[](int index) { return payload[index]; }
    __device__ const ElementType &operator[](int index) const { return payload[index]; }
    __device__ int4 get_bits() const {
        int4 bits;
        memcpy(&bits, &payload, sizeof(bits));
        return bits;
    }
};
typedef Packed128<float> f128;
typedef Packed128<floatX> x128;

// plain load (cached in L1/L2)
template <class T> __device__ __forceinline__ Packed128<T> load128(const T *address) {
    return Packed128<T>{*reinterpret_cast<const int4 *>(address)};
}
// streaming load: data read once, do not keep in cache
template <class T> __device__ __forceinline__ Packed128<T> load128cs(const T *address) {
    return Packed128<T>{__ldcs(reinterpret_cast<const int4 *>(address))};
}
template <class T> __device__ __forceinline__ void store128(T *target, Packed128<T> value) {
    *reinterpret_cast<int4 *>(target) = value.get_bits();
}
// streaming store
template <class T> __device__ __forceinline__ void store128cs(T *target, Packed128<T> value) {
    __stcs(reinterpret_cast<int4 *>(target), value.get_bits());
}
// store that bypasses L1 (kept in L2): for data another kernel reads soon
template <class T> __device__ __forceinline__ void store128cg(T *target, Packed128<T> value) {
    __stcg(reinterpret_cast<int4 *>(target), value.get_bits());
}

// ----------------------------------------------------------------------------
// reductions (fp32). Warp reductions leave the result in every lane.

__device__ __forceinline__ float warpReduceSum(float val) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) val += __shfl_xor_sync(0xffffffffu, val, offset);
    return val;
}
__device__ __forceinline__ float warpReduceMax(float val) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) val = fmaxf(val, __shfl_xor_sync(0xffffffffu, val, offset));
    return val;
}

typedef float (*warp_reduction_t)(float);

// Block-wide reduction; every thread of the block must call it (blockDim.x a multiple of 32,
// at most 1024). Returns the result in every thread. Safe to call several times in a row:
// it synchronizes before reusing its shared scratch. The order of the sum is fixed
// (lane tree within warps, then warps in order), so results are deterministic.
template <warp_reduction_t warp_reduction>
__device__ __forceinline__ float blockReduce(float val, float out_of_bounds = 0.0f) {
    __shared__ float shared_val[WARP_SIZE];
    const int lane_id = threadIdx.x % WARP_SIZE;
    const int warp_id = threadIdx.x / WARP_SIZE;
    const int num_warps = blockDim.x / WARP_SIZE;
    float warp_val = warp_reduction(val);
    __syncthreads();  // a previous call's readers are done with shared_val
    if (lane_id == 0) shared_val[warp_id] = warp_val;
    __syncthreads();
    warp_val = (lane_id < num_warps) ? shared_val[lane_id] : out_of_bounds;
    return warp_reduction(warp_val);
}
__device__ __forceinline__ float blockReduceSum(float val) { return blockReduce<warpReduceSum>(val, 0.0f); }
__device__ __forceinline__ float blockReduceMax(float val) { return blockReduce<warpReduceMax>(val, -INFINITY); }

// ----------------------------------------------------------------------------
// small helpers

// floatX <-> fp32, round to nearest even (the names are from the bf16-only days: in the fp16
// build they convert __half)
#if FLOATX_FP16
typedef __half2 floatX2;
#define CUDA_R_FLOATX CUDA_R_16F
__device__ __forceinline__ float bf2f(floatX x) { return __half2float(x); }
__device__ __forceinline__ floatX f2bf(float x) { return __float2half_rn(x); }
#else
typedef __nv_bfloat162 floatX2;
#define CUDA_R_FLOATX CUDA_R_16BF
__device__ __forceinline__ float bf2f(floatX x) { return __bfloat162float(x); }
__device__ __forceinline__ floatX f2bf(float x) { return __float2bfloat16_rn(x); }
#endif

// grid size for a grid-stride loop over n_items work items of block_size threads
static inline int grid_for(size_t n_items, int block_size) {
    size_t g = ceil_div(n_items, block_size);
    if (g < 1) g = 1;
    if (g > 2147483647ull) g = 2147483647ull;
    return (int)g;
}

// A grid-stride walk over several arrays laid one after another as one flat sequence (thread idx
// takes items idx, idx + stride, ...): where the thread enters the array whose first item is item
// `first` of the sequence, as an index into that array (at or past its end: no item there).
__device__ __forceinline__ size_t grid_stride_first(size_t idx, size_t first, size_t stride) {
    return idx >= first ? idx - first : (stride - (first - idx) % stride) % stride;
}
