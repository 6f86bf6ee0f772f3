// cuda/global_norm.cuh: sum of squares of a bf16 or fp32 buffer into an fp32 scalar on the
// device (the squared global L2 norm for gradient clipping; take sqrt after combining the
// pieces / ranks).
//
// Deterministic: the grid size depends only on the element count (and the pointer's
// alignment), each thread sums a fixed grid-stride set of elements in order, blocks reduce in
// a fixed tree into one partial each, and a single block sums the partials in a fixed tree.
// Any offset and count work (ZeRO shards start anywhere): unaligned buffers take the scalar path.
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

// VEC: 16-byte loads (data aligned); the tail (count % elements-per-vector) by scalar loads
template <typename T, bool VEC>
__global__ void __launch_bounds__(GNORM_BLOCK)
global_norm_squared_kernel(float *partials, const T *__restrict__ data, size_t count) {
    float acc = 0.0f;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    if (VEC) {
        constexpr int E = Packed128<T>::size;
        const size_t n_vec = count / E;
        for (size_t i = tid; i < n_vec; i += stride) {
            Packed128<T> p = load128cs(data + i * E);
#pragma unroll
            for (int k = 0; k < E; k++) {
                float v = gnorm_to_float<T>(p[k]);
                acc += v * v;
            }
        }
        for (size_t i = n_vec * E + tid; i < count; i += stride) {
            float v = gnorm_to_float<T>(data[i]);
            acc += v * v;
        }
    } else {
        for (size_t i = tid; i < count; i += stride) {
            float v = gnorm_to_float<T>(data[i]);
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

template <typename T>
static void global_norm_squared_launch(float *out, const T *values, size_t count, float *scratch, int accumulate,
                                       cudaStream_t stream) {
    CUDA_REQUIRE(out != NULL && scratch != NULL);
    const bool vec = is_aligned16(values);
    constexpr int E = 16 / sizeof(T);
    size_t work = vec ? (count + E - 1) / E : count;
    size_t G = (work + GNORM_BLOCK - 1) / GNORM_BLOCK;
    if (G < 1) G = 1;
    if (G > GNORM_MAX_BLOCKS) G = GNORM_MAX_BLOCKS;
    if (vec) global_norm_squared_kernel<T, true><<<(int)G, GNORM_BLOCK, 0, stream>>>(scratch, values, count);
    else global_norm_squared_kernel<T, false><<<(int)G, GNORM_BLOCK, 0, stream>>>(scratch, values, count);
    cudaCheckLaunch();
    global_norm_final_kernel<<<1, GNORM_MAX_BLOCKS, 0, stream>>>(out, scratch, (int)G, accumulate);
    cudaCheckLaunch();
}

// out[0] (device fp32) = (accumulate ? out[0] : 0) + sum values[i]^2, values bf16 [count].
// scratch: global_norm_scratch_floats() floats. Calls on one stream may share scratch.
static void global_norm_squared(float *out, const floatX *values, size_t count, float *scratch, int accumulate,
                                cudaStream_t stream) {
    global_norm_squared_launch<floatX>(out, values, count, scratch, accumulate, stream);
}

// the same for an fp32 buffer
static void global_norm_squared_f32(float *out, const float *values, size_t count, float *scratch, int accumulate,
                                    cudaStream_t stream) {
    global_norm_squared_launch<float>(out, values, count, scratch, accumulate, stream);
}
