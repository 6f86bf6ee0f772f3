// cuda/classifier.cuh: fused softmax cross-entropy over the logits, forward and backward
// in one kernel, dlogits written in place over the logits; and the mean of the per-position
// losses into a device accumulator (loss_mean_accumulate, at the end).
//
// Per row n of logits [N, Vp] (bf16), only columns 0..V-1 take part:
//   M = max, S = sum exp(l - M)                    (online, one read of the row)
//   losses[n] = log S + M - l[target]              (fp32)
//   dlogits[n, i] = (exp(l_i - M) / S - [i == target]) * dloss   for i < V
//   dlogits[n, i] = 0                                            for V <= i < Vp
// dloss is d(total loss)/d(loss of one position): 1 / (positions in the step's mean).
// One block per row; the second pass re-reads the row (from L2) while writing it.
//
// Requirements: Vp % 8 == 0, logits 16-byte aligned, targets in [0, V) (a target outside
// gives a NaN loss).
#pragma once
#include "cuda/common.cuh"

#define CLASSIFIER_BLOCK 1024

__global__ void __launch_bounds__(CLASSIFIER_BLOCK)
fused_classifier_kernel(floatX *logits, float *losses, const int *__restrict__ targets, float dloss,
                        int N, int V, int Vp, int write_dlogits) {
    const int row = blockIdx.x;
    if (row >= N) return;  // block-uniform
    floatX *x = logits + (size_t)row * Vp;
    const int target = targets[row];
    float x_target = 0.0f;
    if (threadIdx.x == 0) x_target = (target >= 0 && target < V) ? bf2f(x[target]) : NAN;

    // pass 1: per-thread online max and sum over this thread's chunks
    float m = -INFINITY, s = 0.0f;
    for (int i = threadIdx.x * 8; i < V; i += blockDim.x * 8) {
        x128 v = load128(x + i);
        float vals[8];
        float cm = -INFINITY;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            vals[k] = (i + k < V) ? bf2f(v[k]) : -INFINITY;
            cm = fmaxf(cm, vals[k]);
        }
        float nm = fmaxf(m, cm);  // finite: chunk i < V has at least one valid element
        float cs = 0.0f;
#pragma unroll
        for (int k = 0; k < 8; k++) cs += (i + k < V) ? expf(vals[k] - nm) : 0.0f;
        s = s * expf(m - nm) + cs;  // m = -inf the first time: s = 0 * 0
        m = nm;
    }
    const float M = blockReduceMax(m);
    const float sc = (m == -INFINITY) ? 0.0f : s * expf(m - M);
    const float S = blockReduceSum(sc);  // both reductions synchronize: all reads of pass 1 are done
    if (threadIdx.x == 0 && losses) losses[row] = logf(S) + M - x_target;
    if (!write_dlogits) return;

    // pass 2: gradients in place
    const float inv_S = 1.0f / S;
    for (int i = threadIdx.x * 8; i < Vp; i += blockDim.x * 8) {
        x128 o;
        if (i < V) {
            x128 v = load128cs(x + i);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                int idx = i + k;
                float g = 0.0f;
                if (idx < V) {
                    float p = expf(bf2f(v[k]) - M) * inv_S;
                    g = (p - (idx == target ? 1.0f : 0.0f)) * dloss;
                }
                o[k] = f2bf(g);
            }
        } else {
            o = x128::zeros();
        }
        store128(x + i, o);
    }
}

// logits [N, Vp] bf16 (overwritten with dlogits when write_dlogits), targets [N] (device),
// losses [N] fp32 per-position loss (may be NULL), dloss: gradient scale (e.g. 1 / (B*T*accum*world)).
static void fused_classifier(floatX *logits, float *losses, const int *targets, float dloss,
                             int N, int V, int Vp, int write_dlogits, cudaStream_t stream) {
    if (N <= 0) return;
    CUDA_REQUIRE(Vp % 8 == 0 && V <= Vp && V > 0);
    CUDA_REQUIRE(is_aligned16(logits));
    fused_classifier_kernel<<<N, CLASSIFIER_BLOCK, 0, stream>>>(logits, losses, targets, dloss, N, V, Vp, write_dlogits);
    cudaCheckLaunch();
}

// ----------------------------------------------------------------------------
// the mean loss, kept on the device (train_gpt.cu reads a step's sum once, not every micro-step)
//
//   acc = (first ? 0 : acc) + (float)(sum_n losses[n] / N)        (double acc, fp32 losses)
//
// One block: thread t sums positions t, t + LOSS_MEAN_BLOCK, ... in double, then a fixed tree
// in shared memory halves the partial sums; no atomics, so the same losses give the same bits
// on every run. The mean is rounded to float before it is added, as the host rounded each
// micro-batch's mean before: the double sum differs from a sequential host sum only in its
// order of roundings (relative error ~1e-16 at these sizes), far below that float rounding, so
// the two agree bitwise unless the exact mean lies within ~1e-16 of a float rounding boundary.
#define LOSS_MEAN_BLOCK 512

__global__ void __launch_bounds__(LOSS_MEAN_BLOCK)
loss_mean_accumulate_kernel(double *acc, const float *__restrict__ losses, int N, int first) {
    __shared__ double part[LOSS_MEAN_BLOCK];
    double s = 0.0;
    for (int i = threadIdx.x; i < N; i += LOSS_MEAN_BLOCK) s += (double)losses[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int half = LOSS_MEAN_BLOCK / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) *acc = (first ? 0.0 : *acc) + (double)(float)(part[0] / N);
}

// acc (device, one double) = (first ? 0 : acc) + the mean of losses[N] rounded to float
static void loss_mean_accumulate(double *acc, const float *losses, int N, int first, cudaStream_t stream) {
    CUDA_REQUIRE(N > 0);
    loss_mean_accumulate_kernel<<<1, LOSS_MEAN_BLOCK, 0, stream>>>(acc, losses, N, first);
    cudaCheckLaunch();
}
