/*
train_gpt.cu: GPT-2 and LLaMA-style training on NVIDIA GPUs in bf16 mixed
precision, with ZeRO stages 0-3 (and optimizer offload) driven by the same
zero.h as the CPU trainer. In the spirit of llm.c's train_gpt2.cu.

    make train_gpt ZERO=3          (OFFLOAD=1: the optimizer on the CPU)
    ./train_gpt --preset gpt2-124m --batch 16 --seq 1024
    mpirun -np 8 ./train_gpt --preset gpt2-124m ...

It mirrors train_gpt.c line for line above the training loop: the same model
(docs/model.md), the same flags, data order, initialization, checkpoint format
and JSONL log (config.h, model.h, dataloader.h, checkpoint.h, train_loop.h are
shared), and the same calls into zero.h in the same order, so every ZeRO stage
runs here exactly as it runs on the CPU.

Precision:
  - parameters, parameter gradients and activations are bf16 (floatX);
  - every kernel accumulates in fp32 (cuBLASLt with CUBLAS_COMPUTE_32F, fp32
    reductions in the hand-written kernels under cuda/); norm statistics,
    attention scores before the softmax, the per-position losses and the mean
    loss are fp32;
  - the fp32 master weights, Adam m and v live in zero.h; its AdamW writes the
    bf16 parameters with round-to-nearest-even, so a resumed run reproduces an
    unbroken one bit for bit (every kernel here is deterministic: no float
    atomics, fixed reduction orders; cuBLAS is deterministic for a fixed GPU
    model and library version).
Every kernel runs on one stream, comm->compute (created by comm_init); zero.h
orders its collectives against that stream.

Reading order: the activations, the compute of each step of a pass (the
embedding, one transformer layer, the head, forward and backward), the passes
(passes.h walks model.h's schedule with zero.h's fetch/release and
grads_open/grads_close around these steps), the training loop (train_loop.h),
then main. The kernels are in cuda/ (docs/kernels.md).
*/
#include <omp.h>
#include "common.h"
#include "config.h"
#include "model.h"
#include "dataloader.h"
#include "tokenizer.h"
#include "comm.h"
#include "zero.h"
#include "checkpoint.h"
#include "adamw.cuh"
#include "cuda/common.cuh"
#include "cuda/residual.cuh"
#include "cuda/gelu.cuh"
#include "cuda/swiglu.cuh"
#include "cuda/rope.cuh"
#include "cuda/layernorm.cuh"
#include "cuda/encoder.cuh"
#include "cuda/matmul.cuh"
#include "cuda/attention.cuh"
#include "cuda/classifier.cuh"

// ----------------------------------------------------------------------------
// small kernels of the trainer itself

// x *= s, in place (bf16, fp32 math): rescales dlogits when the backward's dloss differs
// from the one the forward's fused classifier assumed
__global__ void scale_bf16_kernel(floatX *x, size_t n, float s) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = f2bf(bf2f(x[i]) * s);
}

// ----------------------------------------------------------------------------
// the model

// What the forward pass keeps for the backward pass, per layer ([L][...]) and
// for the head, plus scratch. bf16 unless marked fp32.
typedef struct {
    floatX *encoded;                         // [BT, C]
    floatX *ln1; float *ln1_mean, *ln1_rstd; // [L][BT, C], fp32 [L][BT] (mean: gpt2 only)
    floatX *qkvr;                            // [L][BT * QKV] q|k|v permuted by attention_forward (after RoPE)
    floatX *att;                             // [L][B, H, T, T] softmax probabilities
    floatX *atty;                            // [L][BT, C] attention output before its projection
    floatX *res2;                            // [L][BT, C] residual after attention
    floatX *ln2; float *ln2_mean, *ln2_rstd; // [L][BT, C], fp32 [L][BT]
    floatX *fch;                             // [L][BT, FC] MLP pre-activation (gpt2: pre-GELU; llama: gate|up)
    floatX *fch_act;                         // [L][BT, F] after GELU / SwiGLU
    floatX *res3;                            // [L][BT, C] layer output
    floatX *lnf; float *lnf_mean, *lnf_rstd; // [BT, C], fp32 [BT]
    floatX *logits;                          // [BT, Vp]; dlogits after a training forward
    float *losses;                           // fp32 [BT]
    // scratch (one layer's worth)
    floatX *qkv;                             // [BT, QKV] forward: qkv before the permute; backward: dqkv
    floatX *dres, *dbuf;                     // [BT, C]
    floatX *dfch;                            // [BT, FC]
    floatX *dfch_act;                        // [BT, F]
    float *att_f32;                          // fp32 [B, H, T, T] scores / dP
    floatX *att_bf16;                        // [B, H, T, T] dS
    floatX *att_y;                           // [B, H, T, hd]
    floatX *att_dqkvr;                       // [BT * QKV]
    float *norm_scratch;                     // fp32 norm_backward_scratch_floats(C)
    float *dbias_scratch;                    // fp32 matmul_dbias_scratch_floats(max OC)
} Activations;

typedef struct GPT {
    ModelConfig cfg;
    ModelLayout layout;
    Zero zero;
    Comm *comm;
    int B, T;
    int QKV, FC, hd;
    cudaStream_t stream;                     // comm->compute
    Activations a;
    void *act_memory;                        // device, one allocation (zero_alloc: counted by zero.h)
    size_t act_bytes;
    EncoderBackwardScratch enc_scratch;
    int *inputs, *targets;                   // host [BT]
    int *d_inputs, *d_targets;               // device [BT]
    float *h_losses;                         // pinned host [BT]
    floatX *h_logits_bf16;                   // pinned host [Vp]
    float *h_logits;                         // host [Vp]
    float dloss_hint;                        // the dloss the training forward builds dlogits with (1/accum)
    float dlogits_scale;                     // d(loss)/d(position loss) the current dlogits carry; 0: none
    float loss;                              // mean loss of the last forward
} GPT;


// the sizes the kernels rely on (16-byte vectors of 8 bf16), one line each
static void gpt_check_sizes(const ModelConfig *c, int T) {
    int hd = c->d_model / c->n_head;
    if (c->d_model % 8) fatal("the GPU trainer needs --dim divisible by 8 (got %d)", c->d_model);
    if (hd % 8) fatal("the GPU trainer needs a head size (--dim / --heads) divisible by 8 (got %d / %d = %d)", c->d_model, c->n_head, hd);
    if (c->d_ff % 8) fatal("the GPU trainer needs --ffn divisible by 8 (got %d)", c->d_ff);
    if (c->padded_vocab % 8) fatal("the GPU trainer needs the padded vocabulary divisible by 8 (got %d)", c->padded_vocab);
    if (T < 1 || T > c->max_seq) fatal("--seq %d must be in [1, --max-seq %d]", T, c->max_seq);
}

static void gpt_build(GPT *m, const TrainConfig *tc, Comm *comm) {
    memset(m, 0, sizeof(*m));
    m->cfg = tc->model;
    m->comm = comm;
    m->stream = comm->compute;
    m->B = tc->B; m->T = tc->T;
    const ModelConfig *c = &m->cfg;
    gpt_check_sizes(c, m->T);
    model_layout_build(&m->layout, c);
    zero_init(&m->zero, &m->layout, tc, comm);
    matmul_setup();
    int B = m->B, T = m->T, L = c->n_layer, C = c->d_model, H = c->n_head, KV = c->n_kv_head, F = c->d_ff, Vp = c->padded_vocab;
    m->hd = C / H;
    m->QKV = (H + 2 * KV) * m->hd;
    m->FC = c->arch == ARCH_LLAMA ? 2 * F : F;
    size_t BT = (size_t)B * T, att = attention_att_elems(B, T, H);
    int max_oc = m->QKV > m->FC ? m->QKV : m->FC;
    if (C > max_oc) max_oc = C;
    // one allocation for all activations, views into it (256-byte aligned)
    const size_t X = sizeof(floatX), F4 = sizeof(float);
    struct { void **p; size_t bytes; } views[] = {
        {(void **)&m->a.encoded, BT * C * X},
        {(void **)&m->a.ln1, L * BT * C * X}, {(void **)&m->a.ln1_mean, L * BT * F4}, {(void **)&m->a.ln1_rstd, L * BT * F4},
        {(void **)&m->a.qkvr, L * BT * m->QKV * X}, {(void **)&m->a.att, L * att * X},
        {(void **)&m->a.atty, L * BT * C * X}, {(void **)&m->a.res2, L * BT * C * X},
        {(void **)&m->a.ln2, L * BT * C * X}, {(void **)&m->a.ln2_mean, L * BT * F4}, {(void **)&m->a.ln2_rstd, L * BT * F4},
        {(void **)&m->a.fch, L * BT * m->FC * X}, {(void **)&m->a.fch_act, L * BT * F * X}, {(void **)&m->a.res3, L * BT * C * X},
        {(void **)&m->a.lnf, BT * C * X}, {(void **)&m->a.lnf_mean, BT * F4}, {(void **)&m->a.lnf_rstd, BT * F4},
        {(void **)&m->a.logits, BT * Vp * X}, {(void **)&m->a.losses, BT * F4},
        {(void **)&m->a.qkv, BT * m->QKV * X}, {(void **)&m->a.dres, BT * C * X}, {(void **)&m->a.dbuf, BT * C * X},
        {(void **)&m->a.dfch, BT * m->FC * X}, {(void **)&m->a.dfch_act, BT * F * X},
        {(void **)&m->a.att_f32, att * F4}, {(void **)&m->a.att_bf16, att * X},
        {(void **)&m->a.att_y, attention_y_elems(B, T, H, m->hd) * X},
        {(void **)&m->a.att_dqkvr, attention_qkv_elems(B, T, H, KV, m->hd) * X},
        {(void **)&m->a.norm_scratch, norm_backward_scratch_floats(C) * F4},
        {(void **)&m->a.dbias_scratch, matmul_dbias_scratch_floats(max_oc) * F4},
    };
    int nv = sizeof(views) / sizeof(views[0]);
    size_t total = 0;
    for (int i = 0; i < nv; i++) total += round_up(views[i].bytes, 256);
    m->act_bytes = total;
    m->act_memory = zero_alloc(&m->zero, MEM_ACTIVATIONS, total, ZMEM_WORK);
    size_t off = 0;
    for (int i = 0; i < nv; i++) { *views[i].p = (char *)m->act_memory + off; off += round_up(views[i].bytes, 256); }

    encoder_backward_scratch_alloc(&m->enc_scratch, (int)BT, Vp);
    m->inputs = (int *)xcalloc(sizeof(int) * BT, "inputs");
    m->targets = (int *)xcalloc(sizeof(int) * BT, "targets");
    cudaCheck(cudaMalloc(&m->d_inputs, sizeof(int) * BT));
    cudaCheck(cudaMalloc(&m->d_targets, sizeof(int) * BT));
    cudaCheck(cudaMemset(m->d_inputs, 0, sizeof(int) * BT));
    cudaCheck(cudaMemset(m->d_targets, 0, sizeof(int) * BT));
    cudaCheck(cudaMallocHost(&m->h_losses, sizeof(float) * BT));
    cudaCheck(cudaMallocHost(&m->h_logits_bf16, sizeof(floatX) * Vp));
    m->h_logits = (float *)xmalloc(sizeof(float) * Vp, "logits (host)");
    m->dloss_hint = 1.0f / (tc->accum > 0 ? tc->accum : 1);
    cudaCheck(cudaDeviceSynchronize());
}

static void gpt_free(GPT *m) {
    cudaCheck(cudaStreamSynchronize(m->stream));
    encoder_backward_scratch_free(&m->enc_scratch);
    cudaCheck(cudaFree(m->d_inputs)); cudaCheck(cudaFree(m->d_targets));
    cudaCheck(cudaFreeHost(m->h_losses)); cudaCheck(cudaFreeHost(m->h_logits_bf16));
    free(m->h_logits); free(m->inputs); free(m->targets);
    zb_free(&m->zero.be, m->act_memory, ZMEM_WORK);   // counted by zero.h, owned here
    zero_free(&m->zero);
    model_layout_free(&m->layout);
}

// layer l's slices of the saved activations
typedef struct {
    floatX *ln1, *qkvr, *att, *atty, *res2, *ln2, *fch, *fch_act, *res3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
} LayerActs;

static LayerActs layer_acts(GPT *m, int l) {
    Activations *a = &m->a;
    size_t N = (size_t)m->B * m->T, BTC = N * m->cfg.d_model;
    LayerActs s;
    s.ln1 = a->ln1 + l * BTC; s.ln1_mean = a->ln1_mean + l * N; s.ln1_rstd = a->ln1_rstd + l * N;
    s.qkvr = a->qkvr + l * N * m->QKV; s.att = a->att + l * attention_att_elems(m->B, m->T, m->cfg.n_head);
    s.atty = a->atty + l * BTC; s.res2 = a->res2 + l * BTC;
    s.ln2 = a->ln2 + l * BTC; s.ln2_mean = a->ln2_mean + l * N; s.ln2_rstd = a->ln2_rstd + l * N;
    s.fch = a->fch + l * N * m->FC; s.fch_act = a->fch_act + l * N * m->cfg.d_ff; s.res3 = a->res3 + l * BTC;
    return s;
}

// the input of layer l (l == n_layer: of the head)
static const floatX *layer_input(GPT *m, int l) {
    return l == 0 ? m->a.encoded : m->a.res3 + (size_t)(l - 1) * m->B * m->T * m->cfg.d_model;
}

// one transformer layer, forward. w: the layer's parameters
static void layer_forward(GPT *m, int l, LayerView w) {
    const floatX *x = layer_input(m, l);
    const ModelConfig *c = &m->cfg;
    Activations *a = &m->a;
    cudaStream_t s = m->stream;
    int B = m->B, T = m->T, C = c->d_model, H = c->n_head, KV = c->n_kv_head, F = c->d_ff, N = B * T;
    size_t BTC = (size_t)N * C;
    LayerActs la = layer_acts(m, l);
    floatX *ln1 = la.ln1, *qkvr = la.qkvr, *att = la.att, *atty = la.atty, *res2 = la.res2, *ln2 = la.ln2, *fch = la.fch;
    floatX *fch_act = la.fch_act, *res3 = la.res3;
    float *ln1_mean = la.ln1_mean, *ln1_rstd = la.ln1_rstd, *ln2_mean = la.ln2_mean, *ln2_rstd = la.ln2_rstd;
    int llama = c->arch == ARCH_LLAMA;

    if (llama) rmsnorm_forward(ln1, ln1_rstd, x, w.t[T_LN1_W], N, C, c->norm_eps, s);
    else layernorm_forward(ln1, ln1_mean, ln1_rstd, x, w.t[T_LN1_W], w.t[T_LN1_B], N, C, c->norm_eps, s);
    matmul_forward(a->qkv, ln1, w.t[T_QKV_W], w.t[T_QKV_B], N, C, m->QKV, NULL, s);
    if (llama) rope_forward(a->qkv, a->qkv, B, T, H, KV, m->hd, c->rope_theta, s);
    attention_forward(atty, qkvr, att, a->qkv, a->att_f32, a->att_y, B, T, H, KV, m->hd, s);
    matmul_forward(a->dbuf, atty, w.t[T_ATTPROJ_W], w.t[T_ATTPROJ_B], N, C, C, NULL, s);
    // res2 = x + attention branch, then the second norm, in one pass
    if (llama) fused_residual_rmsnorm_forward(res2, ln2, ln2_rstd, x, a->dbuf, w.t[T_LN2_W], N, C, c->norm_eps, s);
    else fused_residual_layernorm_forward(res2, ln2, ln2_mean, ln2_rstd, x, a->dbuf, w.t[T_LN2_W], w.t[T_LN2_B],
                                          N, C, c->norm_eps, s);
    if (llama) {
        matmul_forward(fch, ln2, w.t[T_FC_W], NULL, N, C, m->FC, NULL, s);
        swiglu_forward(fch_act, fch, (size_t)N, F, s);
    } else {
        // GELU fused into the matmul's epilogue: fch = pre-GELU (kept for backward), fch_act = GELU(fch)
        matmul_forward(fch_act, ln2, w.t[T_FC_W], w.t[T_FC_B], N, C, F, fch, s);
    }
    matmul_forward(a->dbuf, fch_act, w.t[T_FCPROJ_W], w.t[T_FCPROJ_B], N, F, C, NULL, s);
    residual_forward(res3, res2, a->dbuf, BTC, s);
}

// one transformer layer, backward. a->dres holds d(layer output) and leaves as
// d(layer input); g: where this layer's parameter gradients accumulate (+=)
static void layer_backward(GPT *m, int l, LayerView w, LayerView g) {
    const floatX *x = layer_input(m, l);
    const ModelConfig *c = &m->cfg;
    Activations *a = &m->a;
    cudaStream_t s = m->stream;
    int B = m->B, T = m->T, C = c->d_model, H = c->n_head, KV = c->n_kv_head, F = c->d_ff, N = B * T;
    size_t BTC = (size_t)N * C;
    LayerActs la = layer_acts(m, l);
    floatX *ln1 = la.ln1, *qkvr = la.qkvr, *att = la.att, *atty = la.atty, *res2 = la.res2, *ln2 = la.ln2, *fch = la.fch;
    floatX *fch_act = la.fch_act;
    float *ln1_mean = la.ln1_mean, *ln1_rstd = la.ln1_rstd, *ln2_mean = la.ln2_mean, *ln2_rstd = la.ln2_rstd;
    int llama = c->arch == ARCH_LLAMA;

    // MLP
    if (llama) {
        matmul_backward(a->dfch_act, g.t[T_FCPROJ_W], NULL, a->dbias_scratch, a->dres, fch_act, w.t[T_FCPROJ_W],
                        N, F, C, NULL, s);
        swiglu_backward(a->dfch, fch, a->dfch_act, (size_t)N, F, s);
    } else {
        // d(fch) directly: the GELU backward is fused into the matmul (DGELU epilogue on pre-GELU fch)
        matmul_backward(a->dfch, g.t[T_FCPROJ_W], g.t[T_FCPROJ_B], a->dbias_scratch, a->dres, fch_act, w.t[T_FCPROJ_W],
                        N, F, C, fch, s);
    }
    matmul_backward(a->dbuf, g.t[T_FC_W], g.t[T_FC_B], a->dbias_scratch, a->dfch, ln2, w.t[T_FC_W], N, C, m->FC, NULL, s);
    if (llama) rmsnorm_backward(a->dres, g.t[T_LN2_W], a->norm_scratch, a->dbuf, res2, w.t[T_LN2_W], ln2_rstd, N, C, s);
    else layernorm_backward(a->dres, g.t[T_LN2_W], g.t[T_LN2_B], a->norm_scratch, a->dbuf, res2, w.t[T_LN2_W],
                            ln2_mean, ln2_rstd, N, C, s);
    // attention
    matmul_backward(a->dbuf, g.t[T_ATTPROJ_W], g.t[T_ATTPROJ_B], a->dbias_scratch, a->dres, atty, w.t[T_ATTPROJ_W],
                    N, C, C, NULL, s);
    attention_backward(a->qkv, a->dbuf, qkvr, att, a->att_f32, a->att_bf16, a->att_y, a->att_dqkvr,
                       B, T, H, KV, m->hd, s);
    if (llama) rope_backward(a->qkv, a->qkv, B, T, H, KV, m->hd, c->rope_theta, s);
    matmul_backward(a->dbuf, g.t[T_QKV_W], g.t[T_QKV_B], a->dbias_scratch, a->qkv, ln1, w.t[T_QKV_W], N, C, m->QKV, NULL, s);
    if (llama) rmsnorm_backward(a->dres, g.t[T_LN1_W], a->norm_scratch, a->dbuf, x, w.t[T_LN1_W], ln1_rstd, N, C, s);
    else layernorm_backward(a->dres, g.t[T_LN1_W], g.t[T_LN1_B], a->norm_scratch, a->dbuf, x, w.t[T_LN1_W],
                            ln1_mean, ln1_rstd, N, C, s);
}


// the embedding: x = wte[tokens] (+ wpe). The pass starts here: the host's
// inputs go to the device first (pageable: the call returns once they are
// staged, so the caller may overwrite m->inputs right away).
static void embed_forward(GPT *m, EmbedView w) {
    int N = m->B * m->T;
    cudaCheck(cudaMemcpyAsync(m->d_inputs, m->inputs, sizeof(int) * N, cudaMemcpyHostToDevice, m->stream));
    encoder_forward(m->a.encoded, m->d_inputs, w.wte, w.wpe, m->B, m->T, m->cfg.d_model, m->stream);
}

// the head: final norm, logits through lm_head (gpt2: the tied wte), and with
// targets the mean loss (fp32, on the host). Training: the fused classifier
// leaves dlogits (for a dloss of 1/accum) in place of the logits; without, the
// logits stay (gpt_logits_host).
static float head_forward(GPT *m, HeadView w, const int *targets, int training) {
    const ModelConfig *c = &m->cfg;
    cudaStream_t s = m->stream;
    int N = m->B * m->T, C = c->d_model, V = c->vocab_size, Vp = c->padded_vocab;
    const floatX *x = layer_input(m, c->n_layer);
    if (c->arch == ARCH_LLAMA) rmsnorm_forward(m->a.lnf, m->a.lnf_rstd, x, w.lnf_w, N, C, c->norm_eps, s);
    else layernorm_forward(m->a.lnf, m->a.lnf_mean, m->a.lnf_rstd, x, w.lnf_w, w.lnf_b, N, C, c->norm_eps, s);
    matmul_forward(m->a.logits, m->a.lnf, w.lm_head, NULL, N, C, Vp, NULL, s);
    m->dlogits_scale = 0;
    float loss = 0;
    if (targets) {
        // per-position losses; training: dlogits = (softmax - onehot) * dloss / N over the logits
        cudaCheck(cudaMemcpyAsync(m->d_targets, targets, sizeof(int) * N, cudaMemcpyHostToDevice, s));
        float dscale = m->dloss_hint / N;
        fused_classifier(m->a.logits, m->a.losses, m->d_targets, dscale, N, V, Vp, training, s);
        if (training) m->dlogits_scale = dscale;
        cudaCheck(cudaMemcpyAsync(m->h_losses, m->a.losses, sizeof(float) * N, cudaMemcpyDeviceToHost, s));
        cudaCheck(cudaStreamSynchronize(s));
        double sum = 0;
        for (int i = 0; i < N; i++) sum += m->h_losses[i];
        loss = (float)(sum / N);
    }
    cudaCheckLaunch();
    m->loss = loss;
    return loss;
}

// The head's backward, from the dlogits the training forward left (its fused
// classifier already used the targets). dloss: see gpt_backward.
static void head_backward(GPT *m, HeadView w, HeadView g, const int *targets, float dloss) {
    const ModelConfig *c = &m->cfg;
    Activations *a = &m->a;
    cudaStream_t s = m->stream;
    int N = m->B * m->T, C = c->d_model, Vp = c->padded_vocab;
    if (m->dlogits_scale == 0) fatal("gpt_backward: no training forward with targets before it");
    float want = dloss / N;
    if (want != m->dlogits_scale) {   // not the 1/accum the forward assumed: rescale (one extra rounding)
        size_t n = (size_t)N * Vp;
        int grid = grid_for(n, 256);
        if (grid > 65536) grid = 65536;
        scale_bf16_kernel<<<grid, 256, 0, s>>>(a->logits, n, want / m->dlogits_scale);
        cudaCheckLaunch();
    }
    m->dlogits_scale = 0;
    matmul_backward(a->dbuf, g.lm_head, NULL, NULL, a->logits, a->lnf, w.lm_head, N, C, Vp, NULL, s);
    cudaCheck(cudaMemsetAsync(a->dres, 0, sizeof(floatX) * (size_t)N * C, s));
    const floatX *x = layer_input(m, c->n_layer);
    if (c->arch == ARCH_LLAMA) rmsnorm_backward(a->dres, g.lnf_w, a->norm_scratch, a->dbuf, x, w.lnf_w, a->lnf_rstd, N, C, s);
    else layernorm_backward(a->dres, g.lnf_w, g.lnf_b, a->norm_scratch, a->dbuf, x, w.lnf_w, a->lnf_mean, a->lnf_rstd, N, C, s);
}

// the embedding's backward needs only the token ids, not the parameters
static void embed_backward(GPT *m, EmbedView g) {
    encoder_backward(g.wte, g.wpe, m->a.dres, m->d_inputs, m->B, m->T, m->cfg.d_model, m->cfg.padded_vocab,
                     &m->enc_scratch, m->stream);
    cudaCheckLaunch();
}

#include "passes.h"

// ----------------------------------------------------------------------------
// what train_loop.h needs besides the passes, and main

// logits of position t of the first sequence, on the host (for sampling); valid
// after a forward without training
static const float *gpt_logits_host(GPT *m, int t) {
    int Vp = m->cfg.padded_vocab;
    cudaCheck(cudaMemcpyAsync(m->h_logits_bf16, m->a.logits + (size_t)t * Vp, sizeof(floatX) * Vp,
                              cudaMemcpyDeviceToHost, m->stream));
    cudaCheck(cudaStreamSynchronize(m->stream));
    const uint16_t *b = (const uint16_t *)m->h_logits_bf16;
    for (int i = 0; i < Vp; i++) m->h_logits[i] = bf16_to_float(b[i]);
    return m->h_logits;
}

#include "train_loop.h"

// The device (comm_init selected it) and the host threads (CPU-Adam with --offload,
// OpenMP): the cores of this node shared among its ranks
static void gpu_setup(const TrainConfig *tc, const Comm *comm, char *desc, size_t n) {
    int threads = tc->threads > 0 ? tc->threads : omp_get_num_procs() / comm->local_world;
    if (threads < 1) threads = 1;
    omp_set_num_threads(threads);
    cudaDeviceProp p;
    cudaCheck(cudaGetDeviceProperties(&p, comm->device));
    snprintf(desc, n, "%.200s (sm_%d%d)", p.name, p.major, p.minor);
}

#ifndef TESTING
int main(int argc, char **argv) {
    Comm comm;
    TrainConfig tc;
    if (!train_startup(&comm, &tc, &argc, &argv)) return 0;   // MPI, the flags (--estimate-memory ends here)
    char device[256];
    gpu_setup(&tc, &comm, device, sizeof(device));
    GPT m;
    gpt_build(&m, &tc, &comm);
    int status = train(&m, &tc, "train_gpt", device);   // 0, or EXIT_PREEMPTED (stopped by a signal)
    gpt_free(&m);
    comm_finalize(&comm);
    return status;
}
#endif
