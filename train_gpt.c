/*
train_gpt.c: GPT-2 and LLaMA-style training on the CPU in fp32, with ZeRO
stages 0-3 across MPI ranks. The correctness anchor of zeroc: it matches the
PyTorch reference (scripts/train_gpt.py) to float rounding, and every ZeRO stage
at every world size matches the single-process run.

    make train_gpt_cpu ZERO=3
    mpirun -np 4 ./train_gpt_cpu --preset small

Reading order:
  1. the kernels: forward and backward of every operation;
  2. the model: its activations, then the compute of each step of a pass (the
     embedding, one transformer layer, the head), forward and backward;
  3. the passes: train/passes.h walks model/model.h's schedule and calls zero.h's
     fetch/release and grads_open/grads_close around these steps;
  4. the training step: train_step in train/loop.h, between TRAINING SECTION BEGIN
     and END (forward, backward, then reduce, guard, update), and the loop around it;
  5. main, at the end of this file.
The exact model is specified in docs/model.md.
*/
#include <omp.h>
#include <cblas.h>
#include "util/common.h"
#include "config/flags.h"
#include "model/model.h"
#include "dataloader.h"
#include "tokenizer.h"
#include "comm/comm.h"
#include "comm/launch.h"
#include "zero.h"
#include "train/checkpoint.h"
#include "train/activations.h"
#include "util/cpu_threads.h"

// OpenBLAS's openmp build has this; it keeps BLAS on our thread count.
void openblas_set_num_threads(int num_threads);

// ----------------------------------------------------------------------------
// kernels: fp32, OpenMP. Every reduction of these kernels runs in a fixed order
// whatever the thread count; only the GEMMs' tiling depends on it (util/cpu_threads.h).
// So runs are bitwise repeatable at a given thread count, which resume relies on.
// The loops take their iterations in chunks (cpu_chunk), so a thread that another
// process slows down takes fewer of them.

// out[N,OC] = inp[N,C] @ w[OC,C]^T (+ bias)
static void matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N, int C, int OC) {
    cpu_gemm(CblasNoTrans, CblasTrans, N, OC, C, inp, C, w, C, 0.0f, out, OC);
    if (bias) {
        #pragma omp parallel for schedule(dynamic, cpu_chunk(N))
        for (int n = 0; n < N; n++) for (int o = 0; o < OC; o++) out[(size_t)n * OC + o] += bias[o];
    }
}

// dinp[N,C] = dout @ w, overwritten; dw[OC,C] += dout^T @ inp; dbias[OC] += sum_n dout. With
// grads_first (grads_first_write) dw and dbias are written as 0 + ..., the bits of an add to zeros.
static void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                            int N, int C, int OC, int grads_first) {
    if (dinp) cpu_gemm(CblasNoTrans, CblasNoTrans, N, C, OC, dout, OC, w, C, 0.0f, dinp, C);
    cpu_gemm(CblasTrans, CblasNoTrans, OC, C, N, dout, OC, inp, C, grads_first ? 0.0f : 1.0f, dw, C);
    if (dbias) {
        #pragma omp parallel for schedule(dynamic, cpu_chunk(OC))
        for (int o = 0; o < OC; o++) {
            float s = 0;
            for (int n = 0; n < N; n++) s += dout[(size_t)n * OC + o];
            dbias[o] = (grads_first ? 0.0f : dbias[o]) + s;
        }
    }
}

// x = wte[tok] (+ wpe[t])
static void encoder_forward(float *out, const int *tok, const float *wte, const float *wpe, int B, int T, int C) {
    #pragma omp parallel for schedule(dynamic, cpu_chunk(B * T))
    for (int bt = 0; bt < B * T; bt++) {
        const float *e = wte + (size_t)tok[bt] * C, *p = wpe ? wpe + (size_t)(bt % T) * C : NULL;
        float *o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) o[c] = e[c] + (p ? p[c] : 0.0f);
    }
}

// scatter-add into the embedding rows. Threads take blocks of 16 channels, a cache
// line, so the order of additions per element is fixed.
static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tok, int B, int T, int C) {
    #pragma omp parallel for schedule(dynamic, 1)
    for (int c0 = 0; c0 < C; c0 += 16) {
        int c1 = c0 + 16 < C ? c0 + 16 : C;
        for (int bt = 0; bt < B * T; bt++) {
            const float *d = dout + (size_t)bt * C;
            float *e = dwte + (size_t)tok[bt] * C, *p = dwpe ? dwpe + (size_t)(bt % T) * C : NULL;
            for (int c = c0; c < c1; c++) { e[c] += d[c]; if (p) p[c] += d[c]; }
        }
    }
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                              int N, int C, float eps) {
    #pragma omp parallel for schedule(dynamic, cpu_chunk(N))
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) { float d = x[c] - m; v += d * d; }
        v /= C;
        float s = 1.0f / sqrtf(v + eps);
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * w[c] + b[c];
        mean[n] = m; rstd[n] = s;
    }
}

// dinp += ...; dw, db += .... With dinp_first, dinp = 0 + ...: the head's first write, so no memset
// is needed before it. With grads_first dw and db are written, as in matmul_backward.
static void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                               const float *mean, const float *rstd, int N, int C, int dinp_first, int grads_first) {
    #pragma omp parallel for schedule(dynamic, cpu_chunk(N))
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        float m = mean[n], s = rstd[n], dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s, dnorm = w[c] * d[c];
            dnorm_mean += dnorm; dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C; dnorm_norm_mean /= C;
        float *di = dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s, dnorm = w[c] * d[c];
            di[c] = (dinp_first ? 0.0f : di[c]) + (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
    #pragma omp parallel for schedule(dynamic, cpu_chunk(C))
    for (int c = 0; c < C; c++) {
        float sw = 0, sb = 0;
        for (int n = 0; n < N; n++) {
            float dd = dout[(size_t)n * C + c];
            sw += (inp[(size_t)n * C + c] - mean[n]) * rstd[n] * dd;
            sb += dd;
        }
        dw[c] = (grads_first ? 0.0f : dw[c]) + sw;
        if (db) db[c] = (grads_first ? 0.0f : db[c]) + sb;
    }
}

static void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps) {
    #pragma omp parallel for schedule(dynamic, cpu_chunk(N))
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float ss = 0;
        for (int c = 0; c < C; c++) ss += x[c] * x[c];
        float s = 1.0f / sqrtf(ss / C + eps);
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = x[c] * s * w[c];
        rstd[n] = s;
    }
}

// y = x * s * w, s = (mean(x^2) + eps)^-1/2:  dx = s * (w*dy) - x * s^3 * mean(x * w * dy)
static void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, const float *rstd,
                             int N, int C, int dinp_first, int grads_first) {
    #pragma omp parallel for schedule(dynamic, cpu_chunk(N))
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        float s = rstd[n], dot = 0;
        for (int c = 0; c < C; c++) dot += x[c] * w[c] * d[c];
        dot /= C;
        float *di = dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) di[c] = (dinp_first ? 0.0f : di[c]) + (s * w[c] * d[c] - x[c] * s * s * s * dot);
    }
    #pragma omp parallel for schedule(dynamic, cpu_chunk(C))
    for (int c = 0; c < C; c++) {
        float sw = 0;
        for (int n = 0; n < N; n++) sw += inp[(size_t)n * C + c] * rstd[n] * dout[(size_t)n * C + c];
        dw[c] = (grads_first ? 0.0f : dw[c]) + sw;
    }
}

// RoPE on the q and k heads of qkv [N=B*T, (H+2KV)*hd], interleaved pairs.
// sign = +1 rotates forward; -1 rotates back (the backward of a rotation).
static void rope_apply(float *qkv, const float *cos_t, const float *sin_t, int B, int T, int H, int KV, int hd, float sign) {
    int row = (H + 2 * KV) * hd, half = hd / 2;
    #pragma omp parallel for schedule(dynamic, cpu_chunk(B * T))
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        float *x = qkv + (size_t)bt * row;
        for (int h = 0; h < H + KV; h++) {      // q heads then k heads
            float *e = x + h * hd;
            for (int i = 0; i < half; i++) {
                float c = cos_t[t * half + i], s = sign * sin_t[t * half + i];
                float a = e[2 * i], b = e[2 * i + 1];
                e[2 * i] = a * c - b * s;
                e[2 * i + 1] = a * s + b * c;
            }
        }
    }
}

// glibc's libmvec has AVX2 and AVX-512 versions of expf. Declaring them lets the
// compiler vectorize the `omp simd` loops below that call it: softmaxes, GELU, SwiGLU.
#pragma omp declare simd notinbranch
extern float expf(float);

// One query's attention over n keys and values whose rows lie `stride` floats
// apart, into a[0..n), the softmax probabilities, and o[hd], the output. Both the
// forward and the KV cache's decode step call it, so they compute the same bits.
static inline void attend(float *o, float *a, const float *q, const float *k, const float *v, size_t stride,
                          int n, int hd, float scale) {
    float mx = -INFINITY;
    for (int t2 = 0; t2 < n; t2++) {
        const float *kt = k + t2 * stride;
        float s = 0;
        for (int i = 0; i < hd; i++) s += q[i] * kt[i];
        s *= scale;
        a[t2] = s;
        if (s > mx) mx = s;
    }
    #pragma omp simd
    for (int t2 = 0; t2 < n; t2++) a[t2] = expf(a[t2] - mx);
    float sum = 0;
    for (int t2 = 0; t2 < n; t2++) sum += a[t2];
    float inv = 1.0f / sum;
    for (int t2 = 0; t2 < n; t2++) a[t2] *= inv;
    for (int i = 0; i < hd; i++) o[i] = 0;
    for (int t2 = 0; t2 < n; t2++) {
        const float *vt = v + t2 * stride;
        for (int i = 0; i < hd; i++) o[i] += a[t2] * vt[i];
    }
}

// Causal attention with grouped-query heads. qkv [B,T,(H+2KV)*hd]; query head h
// reads kv head h / (H/KV). att [B,H,T,T] keeps the probabilities; out [B,T,H*hd].
static void attention_forward(float *out, float *att, const float *qkv, int B, int T, int H, int KV, int hd) {
    int row = (H + 2 * KV) * hd, C = H * hd, group = H / KV;
    float scale = 1.0f / sqrtf((float)hd);
    #pragma omp parallel for collapse(3) schedule(dynamic, cpu_chunk((long)B * T * H))
    for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
    for (int h = 0; h < H; h++) {
        const float *x = qkv + (size_t)b * T * row;   // this sequence's rows
        int g = h / group;
        float *a = att + (((size_t)b * H + h) * T + t) * T;
        attend(out + ((size_t)b * T + t) * C + h * hd, a, x + (size_t)t * row + h * hd, x + (H + g) * hd,
               x + (H + KV + g) * hd, row, t + 1, hd, scale);
        for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0;
    }
}

// dqkv is overwritten. Threads take (batch, kv head) pairs: the query heads of
// a group add into the same dk, dv, so they run in order on one thread.
static void attention_backward(float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                               int B, int T, int H, int KV, int hd) {
    int row = (H + 2 * KV) * hd, C = H * hd, group = H / KV;
    float scale = 1.0f / sqrtf((float)hd);
    memset(dqkv, 0, sizeof(float) * (size_t)B * T * row);
    #pragma omp parallel for collapse(2) schedule(dynamic, cpu_chunk((long)B * KV))
    for (int b = 0; b < B; b++)
    for (int g = 0; g < KV; g++)
    for (int h = g * group; h < (g + 1) * group; h++)
    for (int t = 0; t < T; t++) {
        const float *a = att + (((size_t)b * H + h) * T + t) * T;
        float *da = datt + (((size_t)b * H + h) * T + t) * T;
        const float *d = dout + ((size_t)b * T + t) * C + h * hd;
        const float *q = qkv + ((size_t)b * T + t) * row + h * hd;
        float *dq = dqkv + ((size_t)b * T + t) * row + h * hd;
        // through out = att @ v
        float dot = 0;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *v = qkv + ((size_t)b * T + t2) * row + (H + KV + g) * hd;
            float *dv = dqkv + ((size_t)b * T + t2) * row + (H + KV + g) * hd;
            float s = 0;
            for (int i = 0; i < hd; i++) { s += d[i] * v[i]; dv[i] += a[t2] * d[i]; }
            da[t2] = s;
            dot += a[t2] * s;
        }
        // through the softmax, then scores = q k^T * scale
        for (int t2 = 0; t2 <= t; t2++) {
            float ds = a[t2] * (da[t2] - dot) * scale;
            const float *k = qkv + ((size_t)b * T + t2) * row + (H + g) * hd;
            float *dk = dqkv + ((size_t)b * T + t2) * row + (H + g) * hd;
            for (int i = 0; i < hd; i++) { dq[i] += ds * k[i]; dk[i] += ds * q[i]; }
        }
    }
}

#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)
// GELU's tanh form, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), computed through
// the identity 0.5 (1 + tanh(u)) = 1 / (1 + e^{-2u}) = s. Then out = x s, and since
// 1 - tanh^2 = 4 s (1 - s), the derivative is s + 2 x s (1 - s) du/dx. That costs one vector expf
// per element: glibc's tanhf has no vector version, and a scalar tanhf per element was most of
// GELU's time. It also avoids 1 + tanh(u), which cancels for negative x: on [-8, 8], where
// |GELU| > 1e-4, it is within 1.4e-6 of the double-precision value, against 5.8e-4 with tanhf.
// For large |u|, e^{-2u} is 0 or inf and s exactly 1 or 0.
static inline float gelu_sigmoid(float x) {
    float u = GELU_SCALE * (x + 0.044715f * x * x * x);
    return 1.0f / (1.0f + expf(-2.0f * u));
}
static void gelu_forward(float *out, const float *inp, size_t n) {
    #pragma omp parallel for simd schedule(dynamic, cpu_chunk(n))
    for (size_t i = 0; i < n; i++) out[i] = inp[i] * gelu_sigmoid(inp[i]);
}
static void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    #pragma omp parallel for simd schedule(dynamic, cpu_chunk(n))
    for (size_t i = 0; i < n; i++) {
        float x = inp[i], s = gelu_sigmoid(x);
        float grad = s + 2.0f * x * s * (1.0f - s) * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = grad * dout[i];
    }
}

// inp [N, 2F]: gate in columns 0..F-1, up in F..2F-1; out [N, F] = silu(gate) * up
static void swiglu_forward(float *out, const float *inp, int N, int F) {
    #pragma omp parallel for schedule(dynamic, cpu_chunk(N))
    for (int n = 0; n < N; n++) {
        const float *g = inp + (size_t)n * 2 * F, *u = g + F;
        float *o = out + (size_t)n * F;
        #pragma omp simd
        for (int i = 0; i < F; i++) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
}
static void swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int F) {
    #pragma omp parallel for schedule(dynamic, cpu_chunk(N))
    for (int n = 0; n < N; n++) {
        const float *g = inp + (size_t)n * 2 * F, *u = g + F, *d = dout + (size_t)n * F;
        float *dg = dinp + (size_t)n * 2 * F, *du = dg + F;
        #pragma omp simd
        for (int i = 0; i < F; i++) {
            float sig = 1.0f / (1.0f + expf(-g[i])), silu = g[i] * sig;
            du[i] = d[i] * silu;
            dg[i] = d[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
        }
    }
}

static void residual_forward(float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for schedule(dynamic, cpu_chunk(n))
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// Cross-entropy over the first V of Vp logits: losses[n] per position. With
// keep_probs, in training, the logits are replaced by the softmax in the same pass,
// which is all the backward needs; padded columns become 0.
static void crossentropy_forward(float *losses, float *logits, const int *targets, int N, int V, int Vp, int keep_probs) {
    #pragma omp parallel for schedule(dynamic, cpu_chunk(N))
    for (int n = 0; n < N; n++) {
        float *l = logits + (size_t)n * Vp;
        float mx = -INFINITY, sum = 0;
        #pragma omp simd reduction(max:mx)
        for (int i = 0; i < V; i++) mx = l[i] > mx ? l[i] : mx;
        float target_logit = l[targets[n]];
        if (keep_probs) {
            #pragma omp simd reduction(+:sum)
            for (int i = 0; i < V; i++) { float e = expf(l[i] - mx); l[i] = e; sum += e; }
            float inv = 1.0f / sum;
            #pragma omp simd
            for (int i = 0; i < V; i++) l[i] *= inv;
            for (int i = V; i < Vp; i++) l[i] = 0;
        } else {
            #pragma omp simd reduction(+:sum)
            for (int i = 0; i < V; i++) sum += expf(l[i] - mx);
        }
        losses[n] = logf(sum) + mx - target_logit;
    }
}

// In place: the softmax probabilities become dlogits = (p - onehot) * dloss.
static void crossentropy_softmax_backward(float *probs, const int *targets, float dloss, int N, int V, int Vp) {
    #pragma omp parallel for schedule(dynamic, cpu_chunk(N))
    for (int n = 0; n < N; n++) {
        float *l = probs + (size_t)n * Vp;
        #pragma omp simd
        for (int i = 0; i < V; i++) l[i] *= dloss;
        l[targets[n]] -= dloss;
    }
}

// ----------------------------------------------------------------------------
// the model

// What the forward pass keeps for the backward pass, per layer ([L][...], or [1][...]
// with recompute) and for the head, then the scratch, in train/activations.h's order.
typedef struct {
    float *encoded;                          // [BT, C]
    float *ln1, *ln1_mean, *ln1_rstd;        // [L][BT, C], [L][BT] (mean: gpt2 only)
    float *qkv;                              // [L][BT, QKV] (q and k after RoPE for llama)
    float *att;                              // [L][B, H, T, T] probabilities
    float *atty;                             // [L][BT, C] attention output before its projection
    float *res2;                             // [L][BT, C] residual after attention
    float *ln2, *ln2_mean, *ln2_rstd;        // [L][BT, C], [L][BT]
    float *fch;                              // [L][BT, FC] MLP pre-activation (llama: gate and up, FC = 2F)
    float *fch_act;                          // [L][BT, F] after GELU / SwiGLU
    float *res3;                             // [L][BT, C] layer output, kept for every layer: the next one's input
    float *lnf, *lnf_mean, *lnf_rstd;        // [BT, C], [BT]
    float *logits;                           // [BT, Vp]; training: the softmax, then dlogits in backward
    float *losses;                           // [BT]
    // scratch: one layer's backward, and llama's RoPE tables [maxT, hd/2]
    float *dres, *dbuf, *dqkv, *datt, *dfch, *dfch_act;
    float *rope_cos, *rope_sin;
} Activations;

// Decoding, for sampling (train/sample.h): a step runs the model on one new position
// of each of B sequences, so its activations are B rows. The keys and values of the
// earlier positions wait in the KV cache (gpt_decode_alloc).
typedef struct {
    int B, max_len;                          // sequences decoded together, positions the cache holds
    float *k, *v;                            // [L][B][max_len][KV*hd]: keys (after RoPE for llama) and values
    float *x;                                // [B, C] the residual stream of the new positions
    float *ln, *mean, *rstd;                 // [B, C], [B]: each norm's output and statistics in turn
    float *qkv, *att, *atty, *buf;           // [B, QKV], [B, H, max_len], [B, C], [B, C]
    float *fch, *fch_act, *logits;           // [B, FC], [B, F], [B, Vp]
    void *memory;                            // the one allocation the views point into
} Decode;

typedef struct GPT {
    ModelConfig cfg;
    ModelLayout layout;
    Zero zero;
    Comm *comm;
    int B, T;
    int QKV, FC, hd;
    Activations a;
    void *act_memory, *scratch_memory;       // one allocation each, from zero_alloc, so zero.h counts them
    int recompute;                           // activation checkpointing (--recompute)
    double peak_flops;                       // --peak-tflops, for the step line's MFU; 0: GFLOP/s instead
    Decode dec;                              // sampling with a KV cache (gpt_decode_alloc)
    int *inputs, *targets;
    double step_loss_sum;                    // the training forwards' mean losses since the last gpt_step_loss
    int step_losses;                         // and their number
} GPT;

static void gpt_build(GPT *m, const TrainConfig *tc, Comm *comm) {
    memset(m, 0, sizeof(*m));
    m->cfg = tc->model;
    m->comm = comm;
    m->B = tc->B; m->T = tc->T;
    const ModelConfig *c = &m->cfg;
    m->recompute = tc->recompute;
    m->peak_flops = tc->peak_tflops * 1e12;
    model_layout_build(&m->layout, c);
    model_set_recompute(&m->layout, m->recompute);
    zero_init(&m->zero, &m->layout, tc, comm);
    int B = m->B, T = m->T, C = c->d_model, H = c->n_head, F = c->d_ff;
    m->hd = C / H;
    m->QKV = (H + 2 * c->n_kv_head) * m->hd;
    m->FC = c->arch == ARCH_LLAMA ? 2 * F : F;
    // one allocation for the saved activations and one for the scratch, views into them
    Activations *a = &m->a;
    size_t saved[N_ACT_SAVED], scratch[N_CPU_SCRATCH];
    saved_activation_sizes(saved, c, B, T, m->recompute, 0, 0, sizeof(float));
    cpu_scratch_sizes(scratch, c, B, T);
    void **saved_views[N_ACT_SAVED] = SAVED_ACTIVATION_VIEWS(a, qkv);
    void **scratch_views[N_CPU_SCRATCH] = {
        (void **)&a->dres, (void **)&a->dbuf, (void **)&a->dqkv, (void **)&a->datt, (void **)&a->dfch,
        (void **)&a->dfch_act, (void **)&a->rope_cos, (void **)&a->rope_sin};
    m->act_memory = act_alloc(&m->zero, MEM_ACTIVATIONS, saved_views, saved, N_ACT_SAVED, CPU_ACT_ALIGN);
    m->scratch_memory = act_alloc(&m->zero, MEM_SCRATCH, scratch_views, scratch, N_CPU_SCRATCH, CPU_ACT_ALIGN);
    // RoPE tables: freq_i = 1 / theta^(2i/hd) and angle = t * freq_i, in fp32 (docs/model.md)
    int half = m->hd / 2;
    for (int t = 0; c->arch == ARCH_LLAMA && t < c->max_seq; t++)
        for (int i = 0; i < half; i++) {
            float freq = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)m->hd);
            float ang = (float)t * freq;
            a->rope_cos[t * half + i] = cosf(ang);
            a->rope_sin[t * half + i] = sinf(ang);
        }
    size_t BT = (size_t)B * T;
    m->inputs = (int *)xmalloc(sizeof(int) * BT, "inputs");
    m->targets = (int *)xmalloc(sizeof(int) * BT, "targets");
}

static void gpt_free(GPT *m) {
    zb_free(&m->zero.be, m->act_memory, ZMEM_WORK);   // zero.h counts them; the trainer owns them
    zb_free(&m->zero.be, m->scratch_memory, ZMEM_WORK);
    zero_free(&m->zero);
    model_layout_free(&m->layout);
    free(m->inputs); free(m->targets);
}

// layer l's slices of the saved activations
typedef struct { float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *res2, *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_act, *res3; } LayerActs;

// layer l's slices of the saved activations. With recompute every layer uses the
// one set, for the layer being computed, except for its output.
static LayerActs layer_acts(GPT *m, int l) {
    Activations *a = &m->a;
    size_t N = (size_t)m->B * m->T, BTC = N * m->cfg.d_model, i = m->recompute ? 0 : (size_t)l;
    LayerActs s = {
        a->ln1 + i * BTC, a->ln1_mean + i * N, a->ln1_rstd + i * N,
        a->qkv + i * N * m->QKV, a->att + i * m->B * m->cfg.n_head * m->T * m->T,
        a->atty + i * BTC, a->res2 + i * BTC,
        a->ln2 + i * BTC, a->ln2_mean + i * N, a->ln2_rstd + i * N,
        a->fch + i * N * m->FC, a->fch_act + i * N * m->cfg.d_ff, a->res3 + (size_t)l * BTC};
    return s;
}

// the input of layer l; l == n_layer: of the head
static const float *layer_input(GPT *m, int l) {
    return l == 0 ? m->a.encoded : m->a.res3 + (size_t)(l - 1) * m->B * m->T * m->cfg.d_model;
}

// A decode step's attention, pos >= 0. For llama the new positions' q and k are
// rotated to `pos`. Their k and v join layer l's KV cache, and each query head
// attends to positions 0..pos of its kv head with the forward's attend().
static void attention_decode(GPT *m, int l, float *atty, float *att, float *qkv, int pos) {
    const ModelConfig *c = &m->cfg;
    Decode *d = &m->dec;
    int B = d->B, H = c->n_head, KV = c->n_kv_head, hd = m->hd, kvrow = KV * hd, half = hd / 2;
    if (c->arch == ARCH_LLAMA)
        rope_apply(qkv, m->a.rope_cos + (size_t)pos * half, m->a.rope_sin + (size_t)pos * half, B, 1, H, KV, hd, 1.0f);
    size_t seq = (size_t)d->max_len * kvrow;                 // one sequence's cache in one layer
    float *k = d->k + (size_t)l * B * seq, *v = d->v + (size_t)l * B * seq;
    for (int b = 0; b < B; b++) {
        memcpy(k + b * seq + (size_t)pos * kvrow, qkv + (size_t)b * m->QKV + H * hd, sizeof(float) * kvrow);
        memcpy(v + b * seq + (size_t)pos * kvrow, qkv + (size_t)b * m->QKV + (H + KV) * hd, sizeof(float) * kvrow);
    }
    float scale = 1.0f / sqrtf((float)hd);
    #pragma omp parallel for collapse(2) schedule(dynamic, cpu_chunk((long)B * H))
    for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
        int g = h / (H / KV);
        attend(atty + (size_t)b * H * hd + h * hd, att + ((size_t)b * H + h) * d->max_len, qkv + (size_t)b * m->QKV + h * hd,
               k + b * seq + g * hd, v + b * seq + g * hd, kvrow, pos + 1, hd, scale);
    }
}

// One transformer layer on the rows of x: the forward's B*T rows (pos < 0), or a
// decode step's B rows, one new position `pos` per sequence, whose attention reads
// the earlier positions from the KV cache. s says where the activations go, buf is
// [rows, C] of scratch, w the layer's parameters.
static void layer_rows(GPT *m, int l, LayerView w, const float *x, LayerActs s, float *buf, int B, int T, int pos) {
    const ModelConfig *c = &m->cfg;
    int C = c->d_model, H = c->n_head, KV = c->n_kv_head, F = c->d_ff, N = B * T;
    size_t BTC = (size_t)N * C;
    float *ln1 = s.ln1, *ln1_mean = s.ln1_mean, *ln1_rstd = s.ln1_rstd, *qkv = s.qkv, *att = s.att, *atty = s.atty, *res2 = s.res2;
    float *ln2 = s.ln2, *ln2_mean = s.ln2_mean, *ln2_rstd = s.ln2_rstd, *fch = s.fch, *fch_act = s.fch_act, *res3 = s.res3;
    int llama = c->arch == ARCH_LLAMA;

    if (llama) rmsnorm_forward(ln1, ln1_rstd, x, w.t[T_LN1_W], N, C, c->norm_eps);
    else layernorm_forward(ln1, ln1_mean, ln1_rstd, x, w.t[T_LN1_W], w.t[T_LN1_B], N, C, c->norm_eps);
    matmul_forward(qkv, ln1, w.t[T_QKV_W], w.t[T_QKV_B], N, C, m->QKV);
    if (pos < 0) {
        if (llama) rope_apply(qkv, m->a.rope_cos, m->a.rope_sin, B, T, H, KV, m->hd, 1.0f);
        attention_forward(atty, att, qkv, B, T, H, KV, m->hd);
    } else {
        attention_decode(m, l, atty, att, qkv, pos);
    }
    matmul_forward(buf, atty, w.t[T_ATTPROJ_W], w.t[T_ATTPROJ_B], N, C, C);
    residual_forward(res2, x, buf, BTC);
    if (llama) rmsnorm_forward(ln2, ln2_rstd, res2, w.t[T_LN2_W], N, C, c->norm_eps);
    else layernorm_forward(ln2, ln2_mean, ln2_rstd, res2, w.t[T_LN2_W], w.t[T_LN2_B], N, C, c->norm_eps);
    matmul_forward(fch, ln2, w.t[T_FC_W], w.t[T_FC_B], N, C, m->FC);
    if (llama) swiglu_forward(fch_act, fch, N, F);
    else gelu_forward(fch_act, fch, (size_t)N * F);
    matmul_forward(buf, fch_act, w.t[T_FCPROJ_W], w.t[T_FCPROJ_B], N, F, C);
    residual_forward(res3, res2, buf, BTC);
}

// one transformer layer, forward
static void layer_forward(GPT *m, int l, LayerView w) {
    layer_rows(m, l, w, layer_input(m, l), layer_acts(m, l), m->a.dbuf, m->B, m->T, -1);
}

// one transformer layer, backward. a->dres comes in as d(layer output) and leaves as
// d(layer input); g is where this layer's parameter gradients accumulate.
// Stages 0-1 at the step's first micro-step: zero.h zeroed the gradients, so the backward
// writes unit u's instead of adding, and saves the read. The embedding's adds rows.
static int grads_first_write(const GPT *m, int u) {
    return ZERO_STAGE <= 1 && m->zero.micro == 0 && u != model_unit_embed(&m->layout);
}

static void layer_backward(GPT *m, int l, LayerView w, LayerView g) {
    const float *x = layer_input(m, l);
    const ModelConfig *c = &m->cfg;
    Activations *a = &m->a;
    int B = m->B, T = m->T, C = c->d_model, H = c->n_head, KV = c->n_kv_head, F = c->d_ff, N = B * T;
    LayerActs s = layer_acts(m, l);
    float *ln1 = s.ln1, *ln1_mean = s.ln1_mean, *ln1_rstd = s.ln1_rstd, *qkv = s.qkv, *att = s.att, *atty = s.atty, *res2 = s.res2;
    float *ln2 = s.ln2, *ln2_mean = s.ln2_mean, *ln2_rstd = s.ln2_rstd, *fch = s.fch, *fch_act = s.fch_act;
    int llama = c->arch == ARCH_LLAMA;
    int gf = grads_first_write(m, model_unit_layer(&m->layout, l));   // write this layer's gradients, not add

    // MLP
    matmul_backward(a->dfch_act, g.t[T_FCPROJ_W], g.t[T_FCPROJ_B], a->dres, fch_act, w.t[T_FCPROJ_W], N, F, C, gf);
    if (llama) swiglu_backward(a->dfch, fch, a->dfch_act, N, F);
    else gelu_backward(a->dfch, fch, a->dfch_act, (size_t)N * F);
    matmul_backward(a->dbuf, g.t[T_FC_W], g.t[T_FC_B], a->dfch, ln2, w.t[T_FC_W], N, C, m->FC, gf);
    if (llama) rmsnorm_backward(a->dres, g.t[T_LN2_W], a->dbuf, res2, w.t[T_LN2_W], ln2_rstd, N, C, 0, gf);
    else layernorm_backward(a->dres, g.t[T_LN2_W], g.t[T_LN2_B], a->dbuf, res2, w.t[T_LN2_W], ln2_mean, ln2_rstd, N, C, 0, gf);
    // attention
    matmul_backward(a->dbuf, g.t[T_ATTPROJ_W], g.t[T_ATTPROJ_B], a->dres, atty, w.t[T_ATTPROJ_W], N, C, C, gf);
    attention_backward(a->dqkv, a->datt, a->dbuf, qkv, att, B, T, H, KV, m->hd);
    if (llama) rope_apply(a->dqkv, a->rope_cos, a->rope_sin, B, T, H, KV, m->hd, -1.0f);
    matmul_backward(a->dbuf, g.t[T_QKV_W], g.t[T_QKV_B], a->dqkv, ln1, w.t[T_QKV_W], N, C, m->QKV, gf);
    if (llama) rmsnorm_backward(a->dres, g.t[T_LN1_W], a->dbuf, x, w.t[T_LN1_W], ln1_rstd, N, C, 0, gf);
    else layernorm_backward(a->dres, g.t[T_LN1_W], g.t[T_LN1_B], a->dbuf, x, w.t[T_LN1_W], ln1_mean, ln1_rstd, N, C, 0, gf);
}

// the embedding: x = wte[tokens], plus wpe for gpt2
static void embed_forward(GPT *m, EmbedView w) {
    encoder_forward(m->a.encoded, m->inputs, w.wte, w.wpe, m->B, m->T, m->cfg.d_model);
}

// the final norm and the logits of N rows x, through lm_head, which is gpt2's tied wte
static void head_rows(GPT *m, HeadView w, const float *x, float *ln, float *mean, float *rstd, float *logits, int N) {
    const ModelConfig *c = &m->cfg;
    int C = c->d_model;
    if (c->arch == ARCH_LLAMA) rmsnorm_forward(ln, rstd, x, w.lnf_w, N, C, c->norm_eps);
    else layernorm_forward(ln, mean, rstd, x, w.lnf_w, w.lnf_b, N, C, c->norm_eps);
    matmul_forward(logits, ln, w.lm_head, NULL, N, C, c->padded_vocab);
}

// the head: final norm, logits and, with targets, the mean loss. In training the
// softmax stays for the backward and the loss joins the step's (gpt_step_loss).
static float head_forward(GPT *m, HeadView w, const int *targets, int training) {
    const ModelConfig *c = &m->cfg;
    int N = m->B * m->T, V = c->vocab_size, Vp = c->padded_vocab;
    head_rows(m, w, layer_input(m, c->n_layer), m->a.lnf, m->a.lnf_mean, m->a.lnf_rstd, m->a.logits, N);
    float loss = 0;
    if (targets) {
        crossentropy_forward(m->a.losses, m->a.logits, targets, N, V, Vp, training);
        double s = 0;
        for (int i = 0; i < N; i++) s += m->a.losses[i];
        loss = (float)(s / N);
        if (training) { m->step_loss_sum += loss; m->step_losses++; }
    }
    return training ? 0.0f : loss;
}

static void head_backward(GPT *m, HeadView w, HeadView g, const int *targets, float dloss) {
    const ModelConfig *c = &m->cfg;
    Activations *a = &m->a;
    int N = m->B * m->T, C = c->d_model, V = c->vocab_size, Vp = c->padded_vocab;
    crossentropy_softmax_backward(a->logits, targets, dloss / N, N, V, Vp);
    const ModelLayout *L = &m->layout;   // gpt2's lm_head is wte, so this is the embedding's gradient
    matmul_backward(a->dbuf, g.lm_head, NULL, a->logits, a->lnf, w.lm_head, N, C, Vp, grads_first_write(m, L->lm_head.unit));
    const float *x = layer_input(m, c->n_layer);   // d(last layer's output) starts here, written, not added
    int gf = grads_first_write(m, L->lnf_w.unit);
    if (c->arch == ARCH_LLAMA) rmsnorm_backward(a->dres, g.lnf_w, a->dbuf, x, w.lnf_w, a->lnf_rstd, N, C, 1, gf);
    else layernorm_backward(a->dres, g.lnf_w, g.lnf_b, a->dbuf, x, w.lnf_w, a->lnf_mean, a->lnf_rstd, N, C, 1, gf);
}

// the embedding's backward needs only the token ids, not the parameters
static void embed_backward(GPT *m, EmbedView g) {
    encoder_backward(g.wte, g.wpe, m->a.dres, m->inputs, m->B, m->T, m->cfg.d_model);
}

// ----------------------------------------------------------------------------
// decoding with a KV cache (train/sample.h): the steps of gpt_decode (train/passes.h) on the
// B rows of m->dec, with the forward's kernels. Only attention differs.

// The KV cache and a step's activations for B sequences of up to max_len positions.
static void gpt_decode_alloc(GPT *m, int B, int max_len) {
    const ModelConfig *c = &m->cfg;
    Decode *d = &m->dec;
    d->B = B; d->max_len = max_len;
    size_t C = c->d_model, F4 = sizeof(float), cache = (size_t)c->n_layer * B * max_len * c->n_kv_head * m->hd;
    void **views[] = {(void **)&d->k, (void **)&d->v, (void **)&d->x, (void **)&d->ln, (void **)&d->mean, (void **)&d->rstd,
                      (void **)&d->qkv, (void **)&d->att, (void **)&d->atty, (void **)&d->buf, (void **)&d->fch,
                      (void **)&d->fch_act, (void **)&d->logits};
    size_t bytes[] = {cache * F4, cache * F4, B * C * F4, B * C * F4, B * F4, B * F4, (size_t)B * m->QKV * F4,
                      (size_t)B * c->n_head * max_len * F4, B * C * F4, B * C * F4, (size_t)B * m->FC * F4,
                      (size_t)B * c->d_ff * F4, (size_t)B * c->padded_vocab * F4};
    d->memory = act_alloc(&m->zero, MEM_KV_CACHE, views, bytes, sizeof(bytes) / sizeof(bytes[0]), CPU_ACT_ALIGN);
}

static void gpt_decode_free(GPT *m) {
    zb_free(&m->zero.be, m->dec.memory, ZMEM_WORK);
    memset(&m->dec, 0, sizeof(m->dec));
}

// x = wte[tokens], plus wpe[pos] for gpt2
static void embed_decode(GPT *m, EmbedView w, const int *tokens, int pos) {
    int C = m->cfg.d_model;
    encoder_forward(m->dec.x, tokens, w.wte, w.wpe ? w.wpe + (size_t)pos * C : NULL, m->dec.B, 1, C);
}

// one layer on the new positions: the residual stream in place, one buffer per kind
static void layer_decode(GPT *m, int l, LayerView w, int pos) {
    Decode *d = &m->dec;
    LayerActs s = {d->ln, d->mean, d->rstd, d->qkv, d->att, d->atty, d->x, d->ln, d->mean, d->rstd, d->fch, d->fch_act, d->x};
    layer_rows(m, l, w, d->x, s, d->buf, d->B, 1, pos);
}

static void head_decode(GPT *m, HeadView w) {
    Decode *d = &m->dec;
    head_rows(m, w, d->x, d->ln, d->mean, d->rstd, d->logits, d->B);
}

#include "train/passes.h"

// ----------------------------------------------------------------------------
// what train/loop.h needs besides the passes, and main

// for sampling: the logits of position t of sequence b after a forward without training, on the host
static const float *gpt_logits_host(GPT *m, int b, int t) { return m->a.logits + ((size_t)b * m->T + t) * m->cfg.padded_vocab; }
// the logits [dec.B, Vp] of the last decode step, on the host
static const float *gpt_decode_logits_host(GPT *m) { return m->dec.logits; }

// nothing to prepare: the CPU's head_backward applies dloss to the softmax the forward kept
static void gpt_set_dloss(GPT *m, float dloss) {}

// the mean loss of the training forwards since the last call: a step's micro-steps
static float gpt_step_loss(GPT *m) {
    if (m->step_losses == 0) fatal("gpt_step_loss: no training forward since the last call");
    float loss = (float)(m->step_loss_sum / m->step_losses);
    m->step_loss_sum = 0;
    m->step_losses = 0;
    return loss;
}

#include "train/loop.h"

// OpenMP and BLAS threads: --threads, else OMP_NUM_THREADS, else this node's cores shared among its ranks (comm/launch.h)
static void cpu_threads_setup(const TrainConfig *tc, const Comm *comm, char *desc, size_t n) {
    char why[96];
    int threads = launch_threads(tc->threads, comm->local_world, why, sizeof(why));
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    char policy[80];
    cpu_wait_policy_describe(policy, sizeof(policy));
    snprintf(desc, n, "%d thread%s (%s), %s", threads, threads > 1 ? "s" : "", why, policy);
}

#ifndef TESTING
// main: start-up, the model, then train/loop.h's train(). Each optimizer step is
// train_step there, its TRAINING SECTION: forward and backward per micro-step, then
// reduce, guard, update.
int main(int argc, char **argv) {
    cpu_wait_policy(argv);   // waiting OpenMP threads sleep (util/cpu_threads.h); may start the program again
    Comm comm;
    TrainConfig tc;
    if (!train_startup(&comm, &tc, &argc, &argv)) return 0;   // MPI and the flags; --estimate-memory ends here
    char threads[256];
    cpu_threads_setup(&tc, &comm, threads, sizeof(threads));
    GPT m;
    gpt_build(&m, &tc, &comm);
    int status = tc.sample ? sample_run(&m, &tc, "train_gpt_cpu", threads)   // --sample 1: generate text, no training
                           : train(&m, &tc, "train_gpt_cpu", threads);      // 0, or EXIT_PREEMPTED after a signal
    gpt_free(&m);
    comm_finalize(&comm);
    return status;
}
#endif
