// cuda/rope.cuh: rotary position embedding (llama), applied to the q and k heads inside
// the qkv activation [B, T, (H + 2 KV) * hd] (heads 0..H-1 q, H..H+KV-1 k, then v).
// Interleaved pairs (Meta's layout): for pair i of a head vector e at position t,
//   freq = 1 / powf(theta, 2i / hd)   (fp32),   angle = t * freq   (fp32)
//   e'[2i]   = e[2i] cos - e[2i+1] sin
//   e'[2i+1] = e[2i] sin + e[2i+1] cos
// Backward is the rotation by -angle (the transpose), applied to dqkv.
// One thread per pair, 4-byte (floatX2) accesses; fp32 math. In place (out == inp) is fine
// and is the intended use: the pre-rotation q, k are not needed by any backward pass.
// The rows of a sequence are positions t0 .. t0+T-1: t0 = 0 in training, the new
// position in a decode step (sampling with a KV cache, rope_forward_at).
#pragma once
#include "cuda/common.cuh"

// sign = +1 forward, -1 backward. copy_v: also copy the v heads (when out != inp).
__global__ void rope_kernel(floatX *out, const floatX *inp, int B, int T, int t0, int n_heads_total, int n_rot_heads,
                            int hd, float theta, float sign, int copy_v) {
    const int half = hd / 2;
    const size_t pairs_per_token = (size_t)n_heads_total * half;
    const size_t total = (size_t)B * T * pairs_per_token;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / pairs_per_token;
        int r = (int)(i % pairs_per_token);
        int head = r / half;
        int p = r % half;
        int t = t0 + (int)(bt % T);
        size_t off = bt * (size_t)n_heads_total * hd + (size_t)head * hd + 2 * p;
        floatX2 v = *reinterpret_cast<const floatX2 *>(inp + off);
        if (head < n_rot_heads) {
            float freq = 1.0f / powf(theta, (float)(2 * p) / (float)hd);
            float angle = (float)t * freq;
            float sn, cs;
            sincosf(angle, &sn, &cs);
            sn *= sign;
            float x0 = bf2f(v.x), x1 = bf2f(v.y);
            floatX2 o;
            o.x = f2bf(x0 * cs - x1 * sn);
            o.y = f2bf(x0 * sn + x1 * cs);
            *reinterpret_cast<floatX2 *>(out + off) = o;
        } else if (copy_v) {
            *reinterpret_cast<floatX2 *>(out + off) = v;
        }
    }
}

static void rope_launch(floatX *out, const floatX *inp, int B, int T, int t0, int H, int KV, int hd, float theta,
                        float sign, cudaStream_t stream) {
    if (B * T == 0) return;
    CUDA_REQUIRE(hd % 2 == 0);
    CUDA_REQUIRE(((uintptr_t)out & 3) == 0 && ((uintptr_t)inp & 3) == 0);
    const int n_total = H + 2 * KV;
    const size_t total = (size_t)B * T * n_total * (hd / 2);
    const int block_size = 256;
    int grid = grid_for(total, block_size);
    if (grid > 65536) grid = 65536;
    rope_kernel<<<grid, block_size, 0, stream>>>(out, inp, B, T, t0, n_total, H + KV, hd, theta, sign, out != inp);
    cudaCheckLaunch();
}

// out = qkv with q and k heads rotated; out may equal inp (in place). Both [B, T, (H+2KV)*hd].
static void rope_forward(floatX *out, const floatX *inp, int B, int T, int H, int KV, int hd, float theta,
                         cudaStream_t stream) {
    rope_launch(out, inp, B, T, 0, H, KV, hd, theta, 1.0f, stream);
}

// the same for rows at positions t0 .. t0+T-1 (a decode step: T = 1, t0 = the new position)
static void rope_forward_at(floatX *out, const floatX *inp, int B, int T, int t0, int H, int KV, int hd, float theta,
                            cudaStream_t stream) {
    rope_launch(out, inp, B, T, t0, H, KV, hd, theta, 1.0f, stream);
}

// dinp = dout with the q and k heads' gradients rotated back by -angle (v heads unchanged);
// dinp may equal dout (in place).
static void rope_backward(floatX *dinp, const floatX *dout, int B, int T, int H, int KV, int hd, float theta,
                          cudaStream_t stream) {
    rope_launch(dinp, dout, B, T, 0, H, KV, hd, theta, -1.0f, stream);
}
