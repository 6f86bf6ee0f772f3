// cuda/layernorm.cuh: LayerNorm (gpt2) and RMSNorm (llama), forward and backward,
// plus forward variants fused with the residual add that precedes the norm.
//
// LayerNorm: y = (x - mean) * rstd * w + b,   rstd = 1 / sqrt(var + eps), biased variance
// RMSNorm:   y = x * rstd * w,                rstd = 1 / sqrt(mean(x^2) + eps)
// Statistics are computed in fp32 from the bf16 input and saved in fp32 (mean, rstd: [N]).
//
// Forward: one warp per row, 16-byte loads; the row is read from L1/L2 again for the
// variance and the output (two-pass variance, no cancellation).
// Backward: one warp per row computes dinp (+= into dinp: it is the residual-stream gradient);
// every warp accumulates its rows' dweight/dbias in its own shared-memory array, the block
// sums its warps in order into one fp32 partial row in `scratch`, and a second kernel sums
// the partials of all blocks in a fixed order and adds them to dweight/dbias (bf16, +=).
// No float atomics: the result is the same bits on every run.
//
// Requirements: C % 8 == 0; pointers 16-byte aligned.
#pragma once
#include "cuda/common.cuh"
#include "cuda/sizes.h"


// ----------------------------------------------------------------------------
// forward

// RMS: RMSNorm (mean unused, bias unused). FUSED: x = inp1 + inp2, rounded to bf16 and
// written to residual_out, then normalized.
template <bool RMS, bool FUSED>
__global__ void norm_forward_kernel(floatX *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd,
                                    floatX *residual_out, const floatX *inp1, const floatX *inp2,
                                    const floatX *__restrict__ weight, const floatX *__restrict__ bias,
                                    int N, int C, float eps) {
    const int warps_per_block = blockDim.x / WARP_SIZE;
    const int warp_id = threadIdx.x / WARP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * warps_per_block + warp_id;
    if (row >= N) return;  // whole warp leaves together
    const size_t off = (size_t)row * C;
    // FUSED reads the rounded sum back from residual_out (written by this same lane)
    const floatX *x_row = FUSED ? residual_out + off : inp1 + off;

    // pass 1: sum (and sum of squares for RMS)
    float sum = 0.0f;
    for (int c = lane * 8; c < C; c += WARP_SIZE * 8) {
        x128 x;
        if (FUSED) {
            x128 a = load128cs(inp1 + off + c);
            x128 b = load128cs(inp2 + off + c);
#pragma unroll
            for (int k = 0; k < 8; k++) x[k] = f2bf(bf2f(a[k]) + bf2f(b[k]));
            store128(residual_out + off + c, x);
        } else {
            x = load128(x_row + c);
        }
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float v = bf2f(x[k]);
            sum += RMS ? v * v : v;
        }
    }
    sum = warpReduceSum(sum);
    float m = 0.0f, s;
    if (RMS) {
        s = rsqrtf(sum / C + eps);
    } else {
        m = sum / C;
        // pass 2: variance about the mean
        float var = 0.0f;
        for (int c = lane * 8; c < C; c += WARP_SIZE * 8) {
            x128 x = load128(x_row + c);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float d = bf2f(x[k]) - m;
                var += d * d;
            }
        }
        var = warpReduceSum(var);
        s = rsqrtf(var / C + eps);
    }
    // pass 3: normalize, scale, shift
    for (int c = lane * 8; c < C; c += WARP_SIZE * 8) {
        x128 x = load128cs(x_row + c);
        x128 w = load128(weight + c);
        x128 b;
        if (!RMS) b = load128(bias + c);
        x128 o;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float n = (bf2f(x[k]) - m) * s;
            float y = n * bf2f(w[k]);
            if (!RMS) y += bf2f(b[k]);
            o[k] = f2bf(y);
        }
        store128(out + off + c, o);
    }
    if (lane == 0) {
        if (!RMS && mean) mean[row] = m;
        if (rstd) rstd[row] = s;
    }
}

template <bool RMS, bool FUSED>
static void norm_forward_launch(floatX *out, float *mean, float *rstd, floatX *residual_out,
                                const floatX *inp1, const floatX *inp2, const floatX *weight, const floatX *bias,
                                int N, int C, float eps, cudaStream_t stream) {
    if (N <= 0) return;
    CUDA_REQUIRE(C % 8 == 0);
    CUDA_REQUIRE(is_aligned16(out) && is_aligned16(inp1) && is_aligned16(weight));
    CUDA_REQUIRE(RMS || (bias != NULL && is_aligned16(bias)));
    CUDA_REQUIRE(!FUSED || (is_aligned16(inp2) && is_aligned16(residual_out)));
    const int block_size = 256;
    const int warps = block_size / WARP_SIZE;
    norm_forward_kernel<RMS, FUSED><<<(int)ceil_div(N, warps), block_size, 0, stream>>>(
        out, mean, rstd, residual_out, inp1, inp2, weight, bias, N, C, eps);
    cudaCheckLaunch();
}

// out[N,C] = LayerNorm(inp) * weight + bias; mean[N], rstd[N] saved (either may be NULL).
static void layernorm_forward(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *weight,
                              const floatX *bias, int N, int C, float eps, cudaStream_t stream) {
    norm_forward_launch<false, false>(out, mean, rstd, NULL, inp, NULL, weight, bias, N, C, eps, stream);
}

// residual[N,C] = inp1 + inp2 (may alias inp1 or inp2), then out = LayerNorm(residual).
static void fused_residual_layernorm_forward(floatX *residual, floatX *out, float *mean, float *rstd,
                                             const floatX *inp1, const floatX *inp2, const floatX *weight,
                                             const floatX *bias, int N, int C, float eps, cudaStream_t stream) {
    norm_forward_launch<false, true>(out, mean, rstd, residual, inp1, inp2, weight, bias, N, C, eps, stream);
}

// out[N,C] = RMSNorm(inp) * weight; rstd[N] saved (may be NULL).
static void rmsnorm_forward(floatX *out, float *rstd, const floatX *inp, const floatX *weight,
                            int N, int C, float eps, cudaStream_t stream) {
    norm_forward_launch<true, false>(out, NULL, rstd, NULL, inp, NULL, weight, NULL, N, C, eps, stream);
}

// residual[N,C] = inp1 + inp2 (may alias inp1 or inp2), then out = RMSNorm(residual).
static void fused_residual_rmsnorm_forward(floatX *residual, floatX *out, float *rstd,
                                           const floatX *inp1, const floatX *inp2, const floatX *weight,
                                           int N, int C, float eps, cudaStream_t stream) {
    norm_forward_launch<true, true>(out, NULL, rstd, residual, inp1, inp2, weight, NULL, N, C, eps, stream);
}

// ----------------------------------------------------------------------------
// backward

// dynamic shared memory: [warps][NACC][C] fp32, NACC = 1 (RMS: dweight) or 2 (LN: dweight, dbias)
template <bool RMS>
__global__ void norm_backward_kernel(floatX *dinp, float *__restrict__ scratch,
                                     const floatX *__restrict__ dout, const floatX *__restrict__ inp,
                                     const floatX *__restrict__ weight, const float *__restrict__ mean,
                                     const float *__restrict__ rstd, int N, int C) {
    constexpr int NACC = RMS ? 1 : 2;
    extern __shared__ float4 norm_bwd_smem4[];
    float *smem = reinterpret_cast<float *>(norm_bwd_smem4);
    const int warps_per_block = blockDim.x / WARP_SIZE;
    const int warp_id = threadIdx.x / WARP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE;
    for (int i = threadIdx.x; i < warps_per_block * NACC * C; i += blockDim.x) smem[i] = 0.0f;
    __syncthreads();
    float *s_dw = smem + (size_t)warp_id * NACC * C;
    float *s_db = s_dw + C;  // LN only

    for (int row = blockIdx.x * warps_per_block + warp_id; row < N; row += gridDim.x * warps_per_block) {
        const size_t off = (size_t)row * C;
        const float m = RMS ? 0.0f : mean[row];
        const float s = rstd[row];
        // pass 1: row sums for dinp, and this warp's dweight/dbias partials
        float sum_dn = 0.0f, sum_dn_xhat = 0.0f;
        for (int c = lane * 8; c < C; c += WARP_SIZE * 8) {
            x128 x = load128(inp + off + c);
            x128 d = load128(dout + off + c);
            x128 w = load128(weight + c);
            float4 *dw4 = reinterpret_cast<float4 *>(s_dw + c);
            float4 dw_a = dw4[0], dw_b = dw4[1];
            float dwv[8] = {dw_a.x, dw_a.y, dw_a.z, dw_a.w, dw_b.x, dw_b.y, dw_b.z, dw_b.w};
            float dbv[8];
            if (!RMS) {
                float4 *db4 = reinterpret_cast<float4 *>(s_db + c);
                float4 db_a = db4[0], db_b = db4[1];
                dbv[0] = db_a.x; dbv[1] = db_a.y; dbv[2] = db_a.z; dbv[3] = db_a.w;
                dbv[4] = db_b.x; dbv[5] = db_b.y; dbv[6] = db_b.z; dbv[7] = db_b.w;
            }
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float xhat = (bf2f(x[k]) - m) * s;
                float dv = bf2f(d[k]);
                float dn = dv * bf2f(w[k]);
                sum_dn += dn;
                sum_dn_xhat += dn * xhat;
                dwv[k] += dv * xhat;
                if (!RMS) dbv[k] += dv;
            }
            dw4[0] = make_float4(dwv[0], dwv[1], dwv[2], dwv[3]);
            dw4[1] = make_float4(dwv[4], dwv[5], dwv[6], dwv[7]);
            if (!RMS) {
                float4 *db4 = reinterpret_cast<float4 *>(s_db + c);
                db4[0] = make_float4(dbv[0], dbv[1], dbv[2], dbv[3]);
                db4[1] = make_float4(dbv[4], dbv[5], dbv[6], dbv[7]);
            }
        }
        const float mean_dn = RMS ? 0.0f : warpReduceSum(sum_dn) / C;
        const float mean_dn_xhat = warpReduceSum(sum_dn_xhat) / C;
        // pass 2: dinp += rstd * (dn - mean(dn) - xhat * mean(dn * xhat))   (RMS: no mean(dn) term)
        for (int c = lane * 8; c < C; c += WARP_SIZE * 8) {
            x128 x = load128cs(inp + off + c);
            x128 d = load128cs(dout + off + c);
            x128 w = load128(weight + c);
            x128 old = load128(dinp + off + c);
            x128 o;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float xhat = (bf2f(x[k]) - m) * s;
                float dn = bf2f(d[k]) * bf2f(w[k]);
                float g = s * (dn - mean_dn - xhat * mean_dn_xhat);
                o[k] = f2bf(bf2f(old[k]) + g);
            }
            store128(dinp + off + c, o);
        }
    }
    __syncthreads();
    // this block's partial: sum of its warps' arrays, warps in order
    float *part = scratch + (size_t)blockIdx.x * NACC * C;
    for (int i = threadIdx.x; i < NACC * C; i += blockDim.x) {
        float acc = 0.0f;
        for (int w = 0; w < warps_per_block; w++) acc += smem[(size_t)w * NACC * C + i];
        part[i] = acc;
    }
}

// dweight[c] += sum_g scratch[g][0][c]; dbias[c] += sum_g scratch[g][1][c]; fixed order.
// block (32, 8): x = channel, y = a strided share of the partial rows.
__global__ void norm_param_reduce_kernel(floatX *dweight, floatX *dbias, const float *__restrict__ scratch,
                                         int G, int C, int nacc) {
    __shared__ float s[2][8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = blockIdx.x * 32 + tx;
    for (int j = 0; j < nacc; j++) {
        float acc = 0.0f;
        if (c < C)
            for (int g = ty; g < G; g += 8) acc += scratch[(size_t)g * nacc * C + (size_t)j * C + c];
        s[j][ty][tx] = acc;
    }
    __syncthreads();
    if (ty == 0 && c < C) {
        for (int j = 0; j < nacc; j++) {
            float total = 0.0f;
            for (int y = 0; y < 8; y++) total += s[j][y][tx];
            floatX *dst = j == 0 ? dweight : dbias;
            dst[c] = f2bf(bf2f(dst[c]) + total);
        }
    }
}

// floats of `scratch` the backward functions need for width C: norm_backward_scratch_floats (cuda/sizes.h)

template <bool RMS>
static void norm_backward_launch(floatX *dinp, floatX *dweight, floatX *dbias, float *scratch,
                                 const floatX *dout, const floatX *inp, const floatX *weight,
                                 const float *mean, const float *rstd, int N, int C, cudaStream_t stream) {
    if (N <= 0) return;
    const int nacc = RMS ? 1 : 2;
    CUDA_REQUIRE(C % 8 == 0);
    CUDA_REQUIRE(is_aligned16(dinp) && is_aligned16(dout) && is_aligned16(inp) && is_aligned16(weight));
    CUDA_REQUIRE(scratch != NULL && dweight != NULL && rstd != NULL);
    CUDA_REQUIRE(RMS || (dbias != NULL && mean != NULL));
    const CudaDeviceInfo *dev = cuda_device_info();
    int warps = 8;
    while (warps > 1 && (size_t)warps * nacc * C * sizeof(float) > 64 * 1024) warps /= 2;
    size_t smem = (size_t)warps * nacc * C * sizeof(float);
    if (smem > (size_t)dev->max_smem_optin) {
        fprintf(stderr, "error: norm backward: C=%d needs %zu bytes of shared memory, device allows %d\n",
                C, smem, dev->max_smem_optin);
        exit(1);
    }
    const int block_size = warps * WARP_SIZE;
    if (smem > 48 * 1024)
        cudaCheck(cudaFuncSetAttribute(norm_backward_kernel<RMS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0;
    cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, norm_backward_kernel<RMS>, block_size, smem));
    if (per_sm < 1) per_sm = 1;
    int G = (int)ceil_div(N, warps);
    if (G > dev->num_sms * per_sm) G = dev->num_sms * per_sm;
    if (G > NORM_BWD_MAX_BLOCKS) G = NORM_BWD_MAX_BLOCKS;
    norm_backward_kernel<RMS><<<G, block_size, smem, stream>>>(dinp, scratch, dout, inp, weight, mean, rstd, N, C);
    cudaCheckLaunch();
    dim3 rblock(32, 8);
    norm_param_reduce_kernel<<<(int)ceil_div(C, 32), rblock, 0, stream>>>(dweight, dbias, scratch, G, C, nacc);
    cudaCheckLaunch();
}

// LayerNorm backward.
//   dinp[N,C]  += dx          (the residual-stream gradient: accumulated, not overwritten)
//   dweight[C] += sum_n dout * xhat,  dbias[C] += sum_n dout   (deterministic)
// inp is the forward input, mean/rstd the saved statistics, scratch at least
// norm_backward_scratch_floats(C) floats. dinp must not alias dout or inp.
static void layernorm_backward(floatX *dinp, floatX *dweight, floatX *dbias, float *scratch,
                               const floatX *dout, const floatX *inp, const floatX *weight,
                               const float *mean, const float *rstd, int N, int C, cudaStream_t stream) {
    norm_backward_launch<false>(dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, N, C, stream);
}

// RMSNorm backward: dinp += dx; dweight += sum_n dout * x * rstd (deterministic).
static void rmsnorm_backward(floatX *dinp, floatX *dweight, float *scratch,
                             const floatX *dout, const floatX *inp, const floatX *weight,
                             const float *rstd, int N, int C, cudaStream_t stream) {
    norm_backward_launch<true>(dinp, dweight, NULL, scratch, dout, inp, weight, NULL, rstd, N, C, stream);
}
