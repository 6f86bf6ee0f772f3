// cuda/global_norm.cuh: sum of squares of a floatX (bf16 or fp16) or fp32 buffer into an fp32 scalar on the
// device (the squared global L2 norm for gradient clipping; take sqrt after combining the
// pieces / ranks).
//
// Deterministic: the grid size depends only on the element count (and the pointer's
// alignment), each thread sums a fixed grid-stride set of elements in order, blocks reduce in
// a fixed tree into one partial each, and a single block sums the partials in a fixed tree.
// The buffer must be 16-byte aligned and a whole number of 16-byte vectors long (zero.h's
// segments always are; the launcher checks). global_norm_squared_runs (below) sums a table of
// such buffers, a whole gradient partition, in one launch (the lean optimizer step).
#pragma once
#include <type_traits>
#include "cuda/common.cuh"

#define GNORM_BLOCK 512
#define GNORM_MAX_BLOCKS 1024

// floats of scratch the functions below need
static size_t global_norm_scratch_floats(void) { return GNORM_MAX_BLOCKS; }

template <typename T>
__device__ __forceinline__ float gnorm_to_float(T v);
template <> __device__ __forceinline__ float gnorm_to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float gnorm_to_float<floatX>(floatX v) { return bf2f(v); }

// acc + the squares of the i-th 16-byte vector of data, in element order
template <typename T>
__device__ __forceinline__ float gnorm_add_vector(float acc, const T *data, size_t i) {
    constexpr int E = Packed128<T>::size;
    Packed128<T> p = load128cs(data + i * E);
#pragma unroll
    for (int k = 0; k < E; k++) {
        float v = gnorm_to_float<T>(p[k]);
        acc += v * v;
    }
    return acc;
}

// 16-byte loads: the launcher requires an aligned start and a whole number of vectors
template <typename T>
__global__ void __launch_bounds__(GNORM_BLOCK)
global_norm_squared_kernel(float *partials, const T *__restrict__ data, size_t n_vec) {
    float acc = 0.0f;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += stride) acc = gnorm_add_vector<T>(acc, data, i);
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

// ----------------------------------------------------------------------------
// The lean optimizer step's norm (zero/device.cuh): the sum of squares of a whole gradient partition
// given as runs (each a 16-byte aligned array of a whole number of vectors; zero.h: a unit's slice
// each, padding included, which adds zeros), in ONE launch. The runs are walked as one flat
// sequence of vectors, grid-stride (as adamw.cuh's adamw_runs_kernel), each thread summing its
// vectors in order; each block reduces its threads in a fixed tree into partials[block]; the last
// block to finish (an integer counter: no float atomics) sums the partials in a fixed tree, in
// block order, and resets the counter for the next launch. Deterministic: the result depends only
// on the runs and the grid, never on which block finishes last.

// a run for global_norm_squared_runs: Run has the fields n (elements) and grad (const T *)
template <typename Run>
using GnormRunElem = std::remove_cv_t<std::remove_pointer_t<decltype(Run::grad)>>;

template <typename Run>
__global__ void __launch_bounds__(GNORM_BLOCK)
global_norm_squared_runs_kernel(float *out, float *partials, unsigned int *blocks_done, const Run *__restrict__ runs,
                                int n_runs) {
    typedef GnormRunElem<Run> T;
    constexpr int E = Packed128<T>::size;
    const size_t stride = (size_t)gridDim.x * blockDim.x, idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    size_t first = 0;   // the run's first vector in the flat order
    for (int r = 0; r < n_runs; r++) {
        const T *data = runs[r].grad;
        const size_t nv = runs[r].n / E;
        for (size_t j = grid_stride_first(idx, first, stride); j < nv; j += stride) acc = gnorm_add_vector<T>(acc, data, j);
        first += nv;
    }
    float block_sum = blockReduceSum(acc);
    __shared__ int is_last;
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = block_sum;
        __threadfence();   // the partial is visible to every block before the counter says so
        is_last = atomicAdd(blocks_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    float v = 0.0f;
    for (int i = threadIdx.x; i < (int)gridDim.x; i += blockDim.x) v += __ldcg(partials + i);   // (L2: other blocks' writes)
    float total = blockReduceSum(v);
    if (threadIdx.x == 0) {
        out[0] = total;
        *blocks_done = 0;   // (the next launch on this stream starts after this one ends)
    }
}

// the grid of global_norm_squared_runs for `count` elements of type T: one wave of the GPU at most
// (the threads loop), and never more blocks than the scratch holds
template <typename T>
static int global_norm_runs_grid(size_t count) {
    size_t blocks = ceil_div(count / Packed128<T>::size, GNORM_BLOCK);
    size_t wave = (size_t)cuda_num_sms() * (cuda_device_info()->max_threads_per_sm / GNORM_BLOCK);
    if (blocks > wave) blocks = wave;
    if (blocks > GNORM_MAX_BLOCKS) blocks = GNORM_MAX_BLOCKS;
    return (int)(blocks < 1 ? 1 : blocks);
}

// out[0] (device fp32) = the sum of squares over the runs (device memory, n_runs entries), in one
// launch of `grid` blocks (global_norm_runs_grid). scratch: global_norm_scratch_floats() floats;
// blocks_done: one unsigned int, zero before the first call (each call leaves it zero). Calls that
// share scratch and blocks_done must be on one stream.
template <typename Run>
static void global_norm_squared_runs(float *out, const Run *runs, int n_runs, int grid, float *scratch,
                                     unsigned int *blocks_done, cudaStream_t stream) {
    CUDA_REQUIRE(out != NULL && scratch != NULL && blocks_done != NULL && grid >= 1 && grid <= GNORM_MAX_BLOCKS);
    global_norm_squared_runs_kernel<Run><<<grid, GNORM_BLOCK, 0, stream>>>(out, scratch, blocks_done, runs, n_runs);
    cudaCheckLaunch();
}
