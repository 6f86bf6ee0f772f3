// cuda/encoder.cuh: token (+ position) embedding.
// Forward:  out[b,t,:] = wte[tok[b,t],:] + wpe[t,:]     (gpt2)
//           out[b,t,:] = wte[tok[b,t],:]                (llama: wpe == NULL)
// Backward: dwte[v,:] += sum over positions with token v of dout[b,t,:]
//           dwpe[t,:] += sum over b of dout[b,t,:]
//
// dwte determinism: the B*T (token, position) pairs are sorted by token with a stable
// radix sort (cub::DeviceRadixSort::SortPairs), so the positions of one token come out
// in increasing order; then one block per distinct token sums that token's rows in a fixed
// order (warp w takes the run's rows w, w+8, ...; the 8 warp partials are added in order)
// and adds the sum to dwte once. Same bits on every run, no atomics.
// dwpe: one thread per (t, 8 channels), summing b = 0..B-1 in order.
//
// Requirements: C % 8 == 0, pointers 16-byte aligned, tokens in [0, Vp).
#pragma once
#include <cub/device/device_radix_sort.cuh>
#include "cuda/common.cuh"

__global__ void encoder_forward_kernel(floatX *__restrict__ out, const int *__restrict__ tokens,
                                       const floatX *__restrict__ wte, const floatX *__restrict__ wpe,
                                       int B, int T, int C) {
    const int c_vec = C / 8;
    const size_t total = (size_t)B * T * c_vec;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / c_vec;
        int c = (int)(i % c_vec) * 8;
        int t = (int)(bt % T);
        int tok = tokens[bt];
        x128 e = load128(wte + (size_t)tok * C + c);
        x128 o;
        if (wpe) {
            x128 p = load128(wpe + (size_t)t * C + c);
#pragma unroll
            for (int k = 0; k < 8; k++) o[k] = f2bf(bf2f(e[k]) + bf2f(p[k]));
        } else {
            o = e;
        }
        store128(out + bt * C + c, o);
    }
}

// out[B,T,C] from tokens[B*T] (device). wpe may be NULL (llama).
static void encoder_forward(floatX *out, const int *tokens, const floatX *wte, const floatX *wpe,
                            int B, int T, int C, cudaStream_t stream) {
    if (B * T == 0) return;
    CUDA_REQUIRE(C % 8 == 0);
    CUDA_REQUIRE(is_aligned16(out) && is_aligned16(wte) && (wpe == NULL || is_aligned16(wpe)));
    const int block_size = 256;
    int grid = grid_for((size_t)B * T * (C / 8), block_size);
    if (grid > 65536) grid = 65536;
    encoder_forward_kernel<<<grid, block_size, 0, stream>>>(out, tokens, wte, wpe, B, T, C);
    cudaCheckLaunch();
}

// ----------------------------------------------------------------------------
// backward

// scratch for encoder_backward: sized once for up to max_N = B*T positions
typedef struct {
    int max_N;
    int *keys_sorted;     // [max_N] tokens, sorted
    int *pos_in;          // [max_N] 0..N-1
    int *pos_sorted;      // [max_N] positions, in token order (stable)
    void *cub_temp;
    size_t cub_temp_bytes;
} EncoderBackwardScratch;

// number of key bits the sort needs for token ids < Vp
static int encoder_sort_bits(int Vp) {
    int bits = 1;
    while (bits < 31 && (1 << bits) < Vp) bits++;
    return bits;
}

static void encoder_backward_scratch_alloc(EncoderBackwardScratch *s, int max_N, int Vp) {
    memset(s, 0, sizeof(*s));
    s->max_N = max_N;
    cudaCheck(cudaMalloc(&s->keys_sorted, (size_t)max_N * sizeof(int)));
    cudaCheck(cudaMalloc(&s->pos_in, (size_t)max_N * sizeof(int)));
    cudaCheck(cudaMalloc(&s->pos_sorted, (size_t)max_N * sizeof(int)));
    size_t bytes = 0;
    cudaCheck(cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const int *)s->keys_sorted, s->keys_sorted,
                                              (const int *)s->pos_in, s->pos_sorted, max_N, 0, encoder_sort_bits(Vp),
                                              (cudaStream_t)0));
    s->cub_temp_bytes = bytes > 0 ? bytes : 16;
    cudaCheck(cudaMalloc(&s->cub_temp, s->cub_temp_bytes));
}

static void encoder_backward_scratch_free(EncoderBackwardScratch *s) {
    if (s->keys_sorted) cudaCheck(cudaFree(s->keys_sorted));
    if (s->pos_in) cudaCheck(cudaFree(s->pos_in));
    if (s->pos_sorted) cudaCheck(cudaFree(s->pos_sorted));
    if (s->cub_temp) cudaCheck(cudaFree(s->cub_temp));
    memset(s, 0, sizeof(*s));
}

__global__ void encoder_iota_kernel(int *p, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = i;
}

#define ENC_BWD_WARPS 8

// One block per sorted position; only blocks that start a run of equal tokens work.
// The block loops over 256-channel slices of C (lane: 8 channels), warp w sums the run's
// rows w, w+8, w+16, ... in order, the warps' partials go through shared memory and are
// added in warp order, and the total is added to dwte[token] once.
__global__ void __launch_bounds__(ENC_BWD_WARPS * WARP_SIZE)
encoder_backward_wte_kernel(floatX *dwte, const floatX *__restrict__ dout, const int *__restrict__ keys_sorted,
                            const int *__restrict__ pos_sorted, int N, int C) {
    __shared__ float4 partial[ENC_BWD_WARPS][WARP_SIZE][2];
    const int start = blockIdx.x;
    const int tok = keys_sorted[start];
    if (start > 0 && keys_sorted[start - 1] == tok) return;  // not the first of its run (block-uniform)
    // end of the run: first index after start whose key differs (keys ascend)
    int lo = start + 1, hi = N;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (keys_sorted[mid] == tok) lo = mid + 1; else hi = mid;
    }
    const int end = lo;
    const int warp_id = threadIdx.x / WARP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE;
    for (int c0 = 0; c0 < C; c0 += WARP_SIZE * 8) {
        const int c = c0 + lane * 8;
        float acc[8];
#pragma unroll
        for (int k = 0; k < 8; k++) acc[k] = 0.0f;
        if (c < C) {
            for (int j = start + warp_id; j < end; j += ENC_BWD_WARPS) {
                x128 d = load128(dout + (size_t)pos_sorted[j] * C + c);
#pragma unroll
                for (int k = 0; k < 8; k++) acc[k] += bf2f(d[k]);
            }
        }
        partial[warp_id][lane][0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        partial[warp_id][lane][1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
        __syncthreads();
        if (warp_id == 0 && c < C) {
            float tot[8];
#pragma unroll
            for (int k = 0; k < 8; k++) tot[k] = 0.0f;
            for (int w = 0; w < ENC_BWD_WARPS; w++) {
                float4 a = partial[w][lane][0], b = partial[w][lane][1];
                tot[0] += a.x; tot[1] += a.y; tot[2] += a.z; tot[3] += a.w;
                tot[4] += b.x; tot[5] += b.y; tot[6] += b.z; tot[7] += b.w;
            }
            floatX *dst = dwte + (size_t)tok * C + c;
            x128 old = load128(dst);
            x128 o;
#pragma unroll
            for (int k = 0; k < 8; k++) o[k] = f2bf(bf2f(old[k]) + tot[k]);
            store128(dst, o);
        }
        __syncthreads();  // partial[] is reused by the next slice
    }
}

// dwpe[t, c..c+8] += sum_b dout[b, t, c..c+8]
__global__ void encoder_backward_wpe_kernel(floatX *dwpe, const floatX *__restrict__ dout, int B, int T, int C) {
    const int c_vec = C / 8;
    const int total = T * c_vec;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        int t = i / c_vec;
        int c = (i % c_vec) * 8;
        float acc[8];
#pragma unroll
        for (int k = 0; k < 8; k++) acc[k] = 0.0f;
        for (int b = 0; b < B; b++) {
            x128 d = load128cs(dout + ((size_t)b * T + t) * C + c);
#pragma unroll
            for (int k = 0; k < 8; k++) acc[k] += bf2f(d[k]);
        }
        floatX *dst = dwpe + (size_t)t * C + c;
        x128 old = load128(dst);
        x128 o;
#pragma unroll
        for (int k = 0; k < 8; k++) o[k] = f2bf(bf2f(old[k]) + acc[k]);
        store128(dst, o);
    }
}

// dwte[Vp,C] += scatter of dout[B,T,C] by token; dwpe[maxT,C] += sum over b (skipped when
// dwpe == NULL, llama). tokens: device [B*T]. Vp: rows of wte (tokens must be < Vp).
// s: from encoder_backward_scratch_alloc with max_N >= B*T (and the same or larger Vp).
static void encoder_backward(floatX *dwte, floatX *dwpe, const floatX *dout, const int *tokens,
                             int B, int T, int C, int Vp, EncoderBackwardScratch *s, cudaStream_t stream) {
    const int N = B * T;
    if (N == 0) return;
    CUDA_REQUIRE(C % 8 == 0);
    CUDA_REQUIRE(is_aligned16(dwte) && is_aligned16(dout) && (dwpe == NULL || is_aligned16(dwpe)));
    CUDA_REQUIRE(s != NULL && s->max_N >= N);
    if (dwpe) {
        const int block_size = 256;
        int grid = grid_for((size_t)T * (C / 8), block_size);
        encoder_backward_wpe_kernel<<<grid, block_size, 0, stream>>>(dwpe, dout, B, T, C);
        cudaCheckLaunch();
    }
    encoder_iota_kernel<<<grid_for(N, 256), 256, 0, stream>>>(s->pos_in, N);
    cudaCheckLaunch();
    size_t bytes = s->cub_temp_bytes;
    cudaCheck(cub::DeviceRadixSort::SortPairs(s->cub_temp, bytes, tokens, s->keys_sorted, (const int *)s->pos_in,
                                              s->pos_sorted, N, 0, encoder_sort_bits(Vp), stream));
    encoder_backward_wte_kernel<<<N, ENC_BWD_WARPS * WARP_SIZE, 0, stream>>>(dwte, dout, s->keys_sorted,
                                                                            s->pos_sorted, N, C);
    cudaCheckLaunch();
}
