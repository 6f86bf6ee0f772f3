// cuda/global_norm.cuh: sum of squares of a floatX (bf16 or fp16) or fp32 buffer into an fp32 scalar on the
// device (the squared global L2 norm for gradient clipping; take sqrt after combining the
// pieces / ranks).
//
// Deterministic: the grid size depends only on the element count (and the pointer's
// alignment), each thread sums a fixed grid-stride set of elements in order, blocks reduce in
// a fixed tree into one partial each, and a single block sums the partials in a fixed tree.
// The buffer must be 16-byte aligned and a whole number of 16-byte vectors long (zero.h's
// segments always are; the launcher checks).
#pragma once
#include "cuda/common.cuh"

#define GNORM_BLOCK 512
#define GNORM_MAX_BLOCKS 1024

// floats of scratch the functions below need
static size_t global_norm_scratch_floats(void) { return GNORM_MAX_BLOCKS; }

template <typename T>
__device__ __forceinline__ float gnorm_to_float(T v);
template <> __device__ __forceinline__ float gnorm_to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float gnorm_to_float<floatX>(floatX v) { return bf2f(v); }

// 16-byte loads: the launcher requires an aligned start and a whole number of vectors
template <typename T>
__global__ void __launch_bounds__(GNORM_BLOCK)
global_norm_squared_kernel(float *partials, const T *__restrict__ data, size_t n_vec) {
    constexpr int E = Packed128<T>::size;
    float acc = 0.0f;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += stride) {
        Packed128<T> p = load128cs(data + i * E);
#pragma unroll
        for (int k = 0; k < E; k++) {
            float v = gnorm_to_float<T>(p[k]);
            acc += v * v;
        }
    }
    float block_sum = blockReduceSum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = block_sum;
}

// out[0] = (accumulate ? out[0] : 0) + sum of partials[0..G), fixed order
__global__ void __launch_bounds__(GNORM_MAX_BLOCKS)
global_norm_final_kernel(float *out, const float *__restrict__ partials, int G, int accumulate) {
    float v = 0.0f;
    for (int i = threadIdx.x; i < G; i += blockDim.x) v += partials[i];
    float total = blockReduceSum(v);
    if (threadIdx.x == 0) out[0] = accumulate ? out[0] + total : total;
}

// out[0] (device fp32) = (accumulate ? out[0] : 0) + sum values[i]^2, values floatX or fp32 [count],
// 16-byte aligned, count a multiple of 16 bytes' worth (zero.h's segments are: every tensor
// and every slice is a multiple of 8 elements and starts on one).
// scratch: global_norm_scratch_floats() floats. Calls on one stream may share scratch.
template <typename T>
static void global_norm_squared(float *out, const T *values, size_t count, float *scratch, int accumulate,
                                cudaStream_t stream) {
    constexpr int E = Packed128<T>::size;
    CUDA_REQUIRE(out != NULL && scratch != NULL && is_aligned16(values) && count % E == 0);
    size_t G = ceil_div(count / E, GNORM_BLOCK);
    if (G < 1) G = 1;
    if (G > GNORM_MAX_BLOCKS) G = GNORM_MAX_BLOCKS;
    global_norm_squared_kernel<T><<<(int)G, GNORM_BLOCK, 0, stream>>>(scratch, values, count / E);
    cudaCheckLaunch();
    global_norm_final_kernel<<<1, GNORM_MAX_BLOCKS, 0, stream>>>(out, scratch, (int)G, accumulate);
    cudaCheckLaunch();
}
