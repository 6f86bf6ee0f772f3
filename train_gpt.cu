/*
train_gpt.cu: GPT-2 and LLaMA-style training on NVIDIA GPUs in bf16 or fp16 mixed
precision, with ZeRO stages 0-3 and optimizer offload, driven by the same zero.h as
the CPU trainer. In the spirit of llm.c's train_gpt2.cu.

    make train_gpt ZERO=3          (OFFLOAD=1: the optimizer on the CPU; FP16=1: fp16)
    ./train_gpt --preset gpt2-124m --batch 16 --seq 1024
    mpirun -np 8 ./train_gpt --preset gpt2-124m ...

It mirrors train_gpt.c line for line above the training loop. It shares the model
(docs/model.md), the flags, the data order, the initialization, the checkpoint
format and the JSONL log (config/*.h, model/model.h, dataloader.h,
train/checkpoint.h, train/loop.h), and it makes the same calls into zero.h in the
same order, so every ZeRO stage runs here exactly as it runs on the CPU.

Precision:
  - Parameters, parameter gradients and activations are floatX: bf16, or IEEE fp16
    in the fp16 build (make train_gpt FP16=1), as llm.c chooses its floatX. The
    fp16 build trains with DeepSpeed's dynamic loss scaling (train/step_guard.h):
    the loss is scaled before the backward, in the fused classifier's dlogits
    (gpt_set_dloss); a step whose gradients overflow is skipped on every rank; and
    the gradients are unscaled in AdamW's multiply.
  - Every kernel accumulates in fp32: cuBLASLt with CUBLAS_COMPUTE_32F, and fp32
    reductions in the hand-written kernels under cuda/. Norm statistics, attention
    scores before the softmax, the per-position losses and the mean loss are fp32.
  - The fp32 master weights, Adam's m and v live in zero.h. Its AdamW writes the
    floatX parameters with round-to-nearest-even, so a resumed run reproduces an
    unbroken one bit for bit (every kernel here is deterministic: no float
    atomics, fixed reduction orders; cuBLAS is deterministic for a fixed GPU
    model and library version).
Every kernel runs on one stream, comm->compute, which comm_attach_device creates; zero.h
orders its collectives against that stream. With one rank or NCCL, a training
step waits for the GPU for the gradient norm after the gradient reduction, and
for the loss after every micro-step's forward (the default, as first measured)
or, with --device-loss 1, once right after the norm (gpt_step_loss); docs/gpu.md
lists every host synchronization and why. The step's other paths that have not
run on a GPU yet are opt-in too (--attention, --lean-step, --fuse-residual,
--plan-cache, --bias-grad-epilogue: config/train_config.h).

Reading order:
  1. the activations;
  2. the compute of each step of a pass (the embedding, one transformer layer, the
     head), forward and backward;
  3. the passes: train/passes.h walks model/model.h's schedule and calls zero.h's
     fetch/release and grads_open/grads_close around these steps;
  4. the training step: train_step in train/loop.h, between TRAINING SECTION BEGIN
     and END (forward, backward, then reduce, guard, update), and the loop around it;
  5. main, at the end of this file.
The kernels are in cuda/ (docs/kernels.md).
*/
#include <omp.h>
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
#if !FLOATX_FP16   // the fused attention is bf16 only; the fp16 build refuses --attention flash (gpt_check_attention)
#include "cuda/flash_attention.cuh"
#endif
#include "cuda/attention_decode.cuh"
#include "cuda/classifier.cuh"

// ----------------------------------------------------------------------------
// small kernels of the trainer itself

// x *= s in place, floatX with fp32 math: rescales dlogits when the backward's dloss differs
// from the one the forward's fused classifier assumed
__global__ void scale_floatX_kernel(floatX *x, size_t n, float s) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = f2bf(bf2f(x[i]) * s);
}

// ----------------------------------------------------------------------------
// the model

// What the forward pass keeps for the backward pass, per layer ([L][...], or [1][...]
// with recompute) and for the head, then the scratch, in train/activations.h's order.
// floatX unless marked fp32.
typedef struct {
    floatX *encoded;                         // [BT, C]
    floatX *ln1; float *ln1_mean, *ln1_rstd; // [L][BT, C], fp32 [L][BT] (mean: gpt2 only)
    floatX *qkvr;                            // [L][BT * QKV] q|k|v after RoPE: with cublas permuted by
                                             // attention_forward; with flash as the QKV matmul wrote them
    union {
        floatX *att;                         // cublas: [L][B, H, T, T] softmax probabilities
        float *lse;                          // flash: fp32 [L][B, H, T] log-sum-exp of each row's scores
    };
    floatX *atty;                            // [L][BT, C] attention output before its projection
    floatX *res2;                            // [L][BT, C] residual after attention
    floatX *ln2; float *ln2_mean, *ln2_rstd; // [L][BT, C], fp32 [L][BT]
    floatX *fch;                             // [L][BT, FC] MLP pre-activation: gpt2's pre-GELU, llama's gate|up
    floatX *fch_act;                         // [L][BT, F] after GELU / SwiGLU
    floatX *res3;                            // [L][BT, C] layer output; a ring of 3 with cpu_checkpointing
    floatX *lnf; float *lnf_mean, *lnf_rstd; // [BT, C], fp32 [BT]
    floatX *logits;                          // [BT, Vp]; dlogits after a training forward
    float *losses;                           // fp32 [BT]
    // scratch, one layer's worth
    floatX *qkv;                             // [BT, QKV] forward: qkv before the permute; backward: dqkv
    floatX *dres, *dbuf;                     // [BT, C]
    floatX *dfch;                            // [BT, FC]
    floatX *dfch_act;                        // [BT, F]
    float *att_f32;                          // fp32 [B, H, T, T] scores / dP; flash: fp32 [B, H, T], the backward's D
    floatX *att_bf16;                        // [B, H, T, T] dS; none with flash
    floatX *att_y;                           // [B, H, T, hd]; none with flash
    floatX *att_dqkvr;                       // [BT * QKV]; none with flash
    float *norm_scratch;                     // fp32 norm_backward_scratch_floats(C)
    float *dbias_scratch;                    // fp32 matmul_dbias_scratch_floats(max OC)
} Activations;

// Decoding, for sampling (train/sample.h): a step runs the model on one new position
// of each of B sequences, so its activations are B rows. The keys and values of the
// earlier positions wait in the KV cache (gpt_decode_alloc). Device memory unless
// marked.
typedef struct {
    int B, max_len;                          // sequences decoded together, positions the cache holds
    floatX *k, *v;                           // [L][B][KV][max_len][hd]: keys (after RoPE for llama) and values
    floatX *x;                               // [B, C] the residual stream of the new positions
    floatX *ln; float *mean, *rstd;          // [B, C], fp32 [B]: each norm's output and statistics in turn
    floatX *qkv, *atty, *buf;                // [B, QKV], [B, C], [B, C]
    float *scores;                           // fp32 [B, H, max_len] attention scores, then probabilities
    floatX *fch, *fch_act, *logits;          // [B, FC], [B, F], [B, Vp]
    int *d_tokens;                           // [B]
    void *memory;                            // the one allocation the views point into
    floatX *h_logits_x;                   // pinned host [B, Vp]
    float *h_logits;                         // host [B, Vp]
} Decode;

typedef struct GPT {
    ModelConfig cfg;
    ModelLayout layout;
    Zero zero;
    Comm *comm;
    int B, T;
    int QKV, FC, hd;
    cudaStream_t stream;                     // comm->compute
    Activations a;
    void *act_memory, *scratch_memory;       // device, one allocation each, from zero_alloc, so zero.h counts them
    int recompute;                           // activation checkpointing (--recompute)
    int flash;                               // the fused attention (--attention flash; gpu_flash_attention)
    // Residual + LN1 fusion (--fuse-residual 1): a forward layer ends without its last residual
    // add; the next step (layer l+1's LN1, or the head's final norm) adds res2 + the MLP output (left in
    // a->dbuf) inside its norm kernel, writing the layer output res3 on the way (layernorm.cuh: the
    // same bits as residual_forward + the norm)
    floatX *res_pending;                     // res2 of the layer whose output is not written yet; NULL: none
    double peak_flops;                       // for the step line's MFU: the device's dense 16-bit peak (gpu_peak_flops)
    // cpu_checkpointing: the layer outputs in pinned host memory, a copy stream and its events
    int cpu_ckpt, in_backward;
    floatX *ckpt_host;                       // [L-1][BT, C]
    cudaStream_t copy_stream;
    cudaEvent_t ckpt_ready[3], ckpt_copied[3], ckpt_free;
    Decode dec;                              // sampling with a KV cache (gpt_decode_alloc)
    EncoderBackwardScratch enc_scratch;
    int *inputs, *targets;                   // host [BT]
    int *d_inputs, *d_targets;               // device [BT]
    float *h_losses;                         // pinned host [BT] (--device-loss 0: every forward's losses)
    double *d_loss;                          // device [2]: [0] the sum of this step's training mean losses, [1] an eval forward's
    double *h_loss;                          // pinned host [1]: d_loss read here
    int step_losses;                         // training forwards since the last gpt_step_loss
    double step_loss_host;                   // --device-loss 0: their sum, read on the host every micro-step
    int fuse_residual, device_loss;          // --fuse-residual, --device-loss (config/train_config.h)
    int bias_grad_noted;                     // the note that --bias-grad-epilogue fell back to the kernel was printed
    floatX *h_logits_x;                      // pinned host [Vp]
    float *h_logits;                         // host [Vp]
    float dloss_hint;                        // the dloss the training forward builds dlogits with (gpt_set_dloss)
    float dlogits_scale;                     // d(loss)/d(position loss) the current dlogits carry; 0: none
} GPT;


// The device's peak dense 16-bit tensor-core FLOP/s, for the step line's MFU:
// NVIDIA's published figure for the data-center parts it knows by name, else
// SMs x boost clock x the FLOPs one SM does per clock at its compute capability.
// The clock reported is the maximum boost, so the estimate errs high.
// --peak-tflops overrides it.
static double gpu_peak_flops(int device) {
    cudaDeviceProp p;
    cudaCheck(cudaGetDeviceProperties(&p, device));
    static const struct { const char *name; double tflops; } KNOWN[] = {
        {"H100 SXM", 989.4}, {"H100 80GB HBM3", 989.4}, {"H100 NVL", 835.0}, {"H100 PCIe", 756.0}, {"H200", 989.4},
        {"GH200", 989.4}, {"A100", 312.0}, {"L40S", 362.1}, {"L4", 121.0}, {"A10", 125.0}, {"B200", 2250.0}};
    for (size_t i = 0; i < sizeof(KNOWN) / sizeof(KNOWN[0]); i++)
        if (strstr(p.name, KNOWN[i].name)) return KNOWN[i].tflops * 1e12;
    int khz = 0;
    cudaCheck(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
    int cc = p.major * 10 + p.minor;
    double per_sm_clock = cc >= 100 ? 8192 : cc >= 90 ? 4096 : cc >= 80 && cc != 86 && cc != 89 ? 2048 : 1024;
    return p.multiProcessorCount * (khz * 1e3) * per_sm_clock;
}

// the sizes the kernels rely on (16-byte vectors of 8 floatX), one line each
static void gpt_check_sizes(const ModelConfig *c, int T) {
    int hd = c->d_model / c->n_head;
    if (c->d_model % 8) fatal("the GPU trainer needs --dim divisible by 8 (got %d)", c->d_model);
    if (hd % 8) fatal("the GPU trainer needs a head size (--dim / --heads) divisible by 8 (got %d / %d = %d)", c->d_model, c->n_head, hd);
    if (c->d_ff % 8) fatal("the GPU trainer needs --ffn divisible by 8 (got %d)", c->d_ff);
    if (c->padded_vocab % 8) fatal("the GPU trainer needs the padded vocabulary divisible by 8 (got %d)", c->padded_vocab);
    if (T < 1 || T > c->max_seq) fatal("--seq %d must be in [1, --max-seq %d]", T, c->max_seq);
}

// What the fused attention's kernels accept (cuda/flash_attention.cuh), one line each. Its other
// requirements hold for every run that passes gpt_check_sizes: H % KV == 0 (config/flags.h), and
// 16-byte aligned rows, since the head size is a multiple of 8 and the buffers GPU_ACT_ALIGN-aligned.
// Any T up to the grid's y limit works, because partial tiles are masked.
static void gpt_check_attention(const ModelConfig *c, int T) {
    int hd = c->d_model / c->n_head;
    if (FLOATX_FP16)
        fatal("--attention flash: the fused attention kernels are bf16 only and this is the fp16 build "
              "(make train_gpt FP16=1); use --attention cublas");
    if (hd != 64 && hd != 128)
        fatal("--attention flash needs a head size (--dim / --heads) of 64 or 128 (got %d / %d = %d); use --attention cublas",
              c->d_model, c->n_head, hd);
    if (T > FLASH_MAX_T)
        fatal("--attention flash: --seq %d is more than the kernels' %d positions; use --attention cublas", T, FLASH_MAX_T);
}

static void gpt_build(GPT *m, const TrainConfig *tc, Comm *comm) {
    memset(m, 0, sizeof(*m));
    m->cfg = tc->model;
    m->comm = comm;
    m->stream = comm->compute;
    m->B = tc->B; m->T = tc->T;
    const ModelConfig *c = &m->cfg;
    gpt_check_sizes(c, m->T);
    m->recompute = tc->recompute;
    m->cpu_ckpt = tc->recompute && tc->cpu_checkpointing;
    m->flash = gpu_flash_attention(tc);
    if (m->flash) gpt_check_attention(c, m->T);
    m->peak_flops = tc->peak_tflops > 0 ? tc->peak_tflops * 1e12 : gpu_peak_flops(comm->device);
    model_layout_build(&m->layout, c);
    model_set_recompute(&m->layout, m->recompute);
    zero_init(&m->zero, &m->layout, tc, comm);
    matmul_setup();
    m->fuse_residual = tc->fuse_residual;
    m->device_loss = tc->device_loss;
    // cuda/matmul.cuh's process-wide switches (--plan-cache, --bias-grad-epilogue), set once here
    g_matmul_cache = tc->plan_cache;
    g_matmul_bias_grad_epilogue = tc->bias_grad_epilogue;
    int B = m->B, T = m->T, C = c->d_model, H = c->n_head, KV = c->n_kv_head, F = c->d_ff, Vp = c->padded_vocab;
    m->hd = C / H;
    m->QKV = (H + 2 * KV) * m->hd;
    m->FC = c->arch == ARCH_LLAMA ? 2 * F : F;
    size_t BT = (size_t)B * T;
    // one allocation for the saved activations and one for the scratch, views into them
    Activations *a = &m->a;
    size_t saved[N_ACT_SAVED], scratch[N_GPU_SCRATCH];
    saved_activation_sizes(saved, c, B, T, m->recompute, m->cpu_ckpt, m->flash, sizeof(floatX));
    gpu_scratch_sizes(scratch, c, B, T, m->flash, sizeof(floatX));
    void **saved_views[N_ACT_SAVED] = SAVED_ACTIVATION_VIEWS(a, qkvr);
    void **scratch_views[N_GPU_SCRATCH] = {
        (void **)&a->qkv, (void **)&a->dres, (void **)&a->dbuf, (void **)&a->dfch, (void **)&a->dfch_act,
        (void **)&a->att_f32, (void **)&a->att_bf16, (void **)&a->att_y, (void **)&a->att_dqkvr,
        (void **)&a->norm_scratch, (void **)&a->dbias_scratch, (void **)&m->d_inputs, (void **)&m->d_targets};
    m->act_memory = act_alloc(&m->zero, MEM_ACTIVATIONS, saved_views, saved, N_ACT_SAVED, GPU_ACT_ALIGN);
    m->scratch_memory = act_alloc(&m->zero, MEM_SCRATCH, scratch_views, scratch, N_GPU_SCRATCH, GPU_ACT_ALIGN);
    m->zero.mem[MEM_SCRATCH] += gpu_kernel_workspace_bytes(B, T);   // cuBLASLt's workspace, the embedding backward's sort
    if (m->cpu_ckpt) {
        m->ckpt_host = (floatX *)zero_alloc(&m->zero, MEM_ACTIVATIONS, cpu_checkpoint_host_bytes(c, B, T, sizeof(floatX)), ZMEM_HOST);
        cudaCheck(cudaStreamCreateWithFlags(&m->copy_stream, cudaStreamNonBlocking));
        for (int i = 0; i < 3; i++) {
            cudaCheck(cudaEventCreateWithFlags(&m->ckpt_ready[i], cudaEventDisableTiming));
            cudaCheck(cudaEventCreateWithFlags(&m->ckpt_copied[i], cudaEventDisableTiming));
        }
        cudaCheck(cudaEventCreateWithFlags(&m->ckpt_free, cudaEventDisableTiming));
    }

    encoder_backward_scratch_alloc(&m->enc_scratch, (int)BT, Vp);
    m->inputs = (int *)xcalloc(sizeof(int) * BT, "inputs");
    m->targets = (int *)xcalloc(sizeof(int) * BT, "targets");
    cudaCheck(cudaMallocHost(&m->h_losses, sizeof(float) * BT));
    cudaCheck(cudaMalloc(&m->d_loss, 2 * sizeof(double)));
    cudaCheck(cudaMallocHost(&m->h_loss, sizeof(double)));
    cudaCheck(cudaMallocHost(&m->h_logits_x, sizeof(floatX) * Vp));
    m->h_logits = (float *)xmalloc(sizeof(float) * Vp, "logits (host)");
    m->dloss_hint = 1.0f / (tc->accum > 0 ? tc->accum : 1);
    cudaCheck(cudaDeviceSynchronize());
}

static void gpt_free(GPT *m) {
    cudaCheck(cudaStreamSynchronize(m->stream));
    encoder_backward_scratch_free(&m->enc_scratch);
    cudaCheck(cudaFreeHost(m->h_losses)); cudaCheck(cudaFreeHost(m->h_logits_x));
    cudaCheck(cudaFree(m->d_loss)); cudaCheck(cudaFreeHost(m->h_loss));
    free(m->h_logits); free(m->inputs); free(m->targets);
    zb_free(&m->zero.be, m->act_memory, ZMEM_WORK);   // counted by zero.h, owned here
    zb_free(&m->zero.be, m->scratch_memory, ZMEM_WORK);
    if (m->cpu_ckpt) {
        cudaCheck(cudaStreamSynchronize(m->copy_stream));
        zb_free(&m->zero.be, m->ckpt_host, ZMEM_HOST);
        for (int i = 0; i < 3; i++) { cudaCheck(cudaEventDestroy(m->ckpt_ready[i])); cudaCheck(cudaEventDestroy(m->ckpt_copied[i])); }
        cudaCheck(cudaEventDestroy(m->ckpt_free));
        cudaCheck(cudaStreamDestroy(m->copy_stream));
    }
    zero_free(&m->zero);
    model_layout_free(&m->layout);
    matmul_teardown();   // the cuBLAS handles, the workspace, the cached cuBLASLt plans
}

// layer l's slices of the saved activations
typedef struct {
    floatX *ln1, *qkvr, *att, *atty, *res2, *ln2, *fch, *fch_act, *res3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
    float *lse;                              // flash: instead of att
} LayerActs;

// layer l's slices of the saved activations. With recompute every layer uses the
// one set, for the layer being computed, except for its output (layer_output).
static LayerActs layer_acts(GPT *m, int l) {
    Activations *a = &m->a;
    size_t N = (size_t)m->B * m->T, BTC = N * m->cfg.d_model, i = m->recompute ? 0 : (size_t)l;
    LayerActs s;
    s.ln1 = a->ln1 + i * BTC; s.ln1_mean = a->ln1_mean + i * N; s.ln1_rstd = a->ln1_rstd + i * N;
    s.qkvr = a->qkvr + i * N * m->QKV;
    if (m->flash) { s.lse = a->lse + i * flash_lse_elems(m->B, m->T, m->cfg.n_head); s.att = NULL; }
    else { s.att = a->att + i * attention_att_elems(m->B, m->T, m->cfg.n_head); s.lse = NULL; }
    s.atty = a->atty + i * BTC; s.res2 = a->res2 + i * BTC;
    s.ln2 = a->ln2 + i * BTC; s.ln2_mean = a->ln2_mean + i * N; s.ln2_rstd = a->ln2_rstd + i * N;
    s.fch = a->fch + i * N * m->FC; s.fch_act = a->fch_act + i * N * m->cfg.d_ff;
    s.res3 = a->res3 + (size_t)(m->cpu_ckpt ? l % 3 : l) * BTC;
    return s;
}

// the input of layer l; l == n_layer: of the head
static floatX *layer_input(GPT *m, int l) { return l == 0 ? m->a.encoded : layer_acts(m, l - 1).res3; }

// cpu_checkpointing, ZeRO-R's offloaded activation checkpoints, with recompute. The
// forward copies each layer's output to pinned host memory on a copy stream. The
// backward brings back the input of the next layer down, layer l-1's, while this
// one recomputes and differentiates. The device keeps the outputs in a ring of
// three: a layer's input, its output, and the one arriving.
// Called before the forward or the recompute of layer l, and after it.
static void ckpt_before_layer(GPT *m, int l) {
    if (!m->cpu_ckpt) return;
    size_t BTC = (size_t)m->B * m->T * m->cfg.d_model;
    if (!m->in_backward) {
        // the forward writes slot l % 3, so that slot's copy of layer l-3's output to the host must be done
        cudaCheck(cudaStreamWaitEvent(m->stream, m->ckpt_copied[l % 3], 0));
        return;
    }
    // backward: wait until this layer's input, layer l-1's output, has arrived; layer 0 has no such event
    if (l >= 1) cudaCheck(cudaStreamWaitEvent(m->stream, m->ckpt_ready[(l - 1) % 3], 0));
    if (l >= 2) {   // and the next layer's input, layer l-2's output, comes down into the slot nobody uses now
        cudaCheck(cudaEventRecord(m->ckpt_free, m->stream));
        cudaCheck(cudaStreamWaitEvent(m->copy_stream, m->ckpt_free, 0));
        cudaCheck(cudaMemcpyAsync(layer_acts(m, l - 2).res3, m->ckpt_host + (size_t)(l - 2) * BTC, BTC * sizeof(floatX),
                                  cudaMemcpyHostToDevice, m->copy_stream));
        cudaCheck(cudaEventRecord(m->ckpt_ready[(l - 2) % 3], m->copy_stream));
    }
}
static void ckpt_after_layer(GPT *m, int l) {
    if (!m->cpu_ckpt || m->in_backward || !m->zero.training || l >= m->cfg.n_layer - 1) return;
    size_t BTC = (size_t)m->B * m->T * m->cfg.d_model;
    cudaCheck(cudaEventRecord(m->ckpt_free, m->stream));
    cudaCheck(cudaStreamWaitEvent(m->copy_stream, m->ckpt_free, 0));
    cudaCheck(cudaMemcpyAsync(m->ckpt_host + (size_t)l * BTC, layer_acts(m, l).res3, BTC * sizeof(floatX),
                              cudaMemcpyDeviceToHost, m->copy_stream));
    cudaCheck(cudaEventRecord(m->ckpt_copied[l % 3], m->copy_stream));
}

// A sublayer's norm, out = norm(x), with its statistics saved: LayerNorm for gpt2, RMSNorm for
// llama, which has no mean and no bias. With `branch`, x is first written as res + branch: the
// residual add that ends the previous sublayer, fused into the norm's kernel. That is one pass over
// the rows instead of two kernels, with the same bits, since layernorm.cuh rounds the sum to floatX
// before its statistics.
static void pre_norm(GPT *m, floatX *out, float *mean, float *rstd, floatX *x, const floatX *res, const floatX *branch,
                     const floatX *w, const floatX *b, int N) {
    const ModelConfig *c = &m->cfg;
    int C = c->d_model;
    cudaStream_t s = m->stream;
    if (c->arch == ARCH_LLAMA) {
        if (branch) fused_residual_rmsnorm_forward(x, out, rstd, res, branch, w, N, C, c->norm_eps, s);
        else rmsnorm_forward(out, rstd, x, w, N, C, c->norm_eps, s);
    } else {
        if (branch) fused_residual_layernorm_forward(x, out, mean, rstd, res, branch, w, b, N, C, c->norm_eps, s);
        else layernorm_forward(out, mean, rstd, x, w, b, N, C, c->norm_eps, s);
    }
}

// One transformer layer on the rows of x: the forward's B*T rows (pos < 0), or a
// decode step's B rows, one new position `pos` per sequence, whose attention reads
// the earlier positions from layer l's KV cache (attention_decode.cuh).
//   la     where the activations go; a decode step keeps none for a backward
//   qkv    [rows, QKV] of scratch; the forward with flash passes la.qkvr, which it keeps
//   buf    [rows, C] of scratch
//   w      the layer's parameters
// For the residual + LN1 fusion: with x_res non-NULL, x is not written yet; it is
// x_res + buf, the previous layer's res2 and MLP output, added inside LN1. With
// leave_res3 the layer ends without its last residual add, and res3 = res2 + buf is
// left to the next step (layer_forward).
static void layer_rows(GPT *m, int l, LayerView w, floatX *x, const floatX *x_res, LayerActs la, floatX *qkv, floatX *buf,
                       int B, int T, int pos, int leave_res3) {
    const ModelConfig *c = &m->cfg;
    Activations *a = &m->a;
    cudaStream_t s = m->stream;
    int C = c->d_model, H = c->n_head, KV = c->n_kv_head, F = c->d_ff, N = B * T;
    size_t BTC = (size_t)N * C;
    floatX *ln1 = la.ln1, *qkvr = la.qkvr, *att = la.att, *atty = la.atty, *res2 = la.res2, *ln2 = la.ln2, *fch = la.fch;
    floatX *fch_act = la.fch_act, *res3 = la.res3;
    float *ln1_mean = la.ln1_mean, *ln1_rstd = la.ln1_rstd, *ln2_mean = la.ln2_mean, *ln2_rstd = la.ln2_rstd;
    int llama = c->arch == ARCH_LLAMA;

    pre_norm(m, ln1, ln1_mean, ln1_rstd, x, x_res, x_res ? buf : NULL, w.t[T_LN1_W], w.t[T_LN1_B], N);
    matmul_forward(qkv, ln1, w.t[T_QKV_W], w.t[T_QKV_B], N, C, m->QKV, NULL, s);
    if (pos < 0) {
        if (llama) rope_forward(qkv, qkv, B, T, H, KV, m->hd, c->rope_theta, s);
#if !FLOATX_FP16
        if (m->flash) flash_attention_forward(atty, la.lse, qkv, B, T, H, KV, m->hd, s);   // qkv is la.qkvr
        else
#endif
        attention_forward(atty, qkvr, att, qkv, a->att_f32, a->att_y, B, T, H, KV, m->hd, s);
    } else {
        Decode *d = &m->dec;
        size_t layer = (size_t)B * KV * d->max_len * m->hd;   // one layer's cache
        if (llama) rope_forward_at(qkv, qkv, B, 1, pos, H, KV, m->hd, c->rope_theta, s);
        attention_decode(atty, qkv, d->k + l * layer, d->v + l * layer, d->scores, B, H, KV, m->hd, pos, d->max_len, s);
    }
    matmul_forward(buf, atty, w.t[T_ATTPROJ_W], w.t[T_ATTPROJ_B], N, C, C, NULL, s);
    // res2 = x + attention branch, then the second norm, in one pass
    pre_norm(m, ln2, ln2_mean, ln2_rstd, res2, x, buf, w.t[T_LN2_W], w.t[T_LN2_B], N);
    if (llama) {
        matmul_forward(fch, ln2, w.t[T_FC_W], NULL, N, C, m->FC, NULL, s);
        swiglu_forward(fch_act, fch, (size_t)N, F, s);
    } else {
        // GELU fused into the matmul's epilogue: fch = pre-GELU (kept for backward), fch_act = GELU(fch)
        matmul_forward(fch_act, ln2, w.t[T_FC_W], w.t[T_FC_B], N, C, F, fch, s);
    }
    matmul_forward(buf, fch_act, w.t[T_FCPROJ_W], w.t[T_FCPROJ_B], N, F, C, NULL, s);
    if (!leave_res3) residual_forward(res3, res2, buf, BTC, s);
}

// one transformer layer, forward. In the forward pass the residual + LN1 fusion finishes
// the previous layer's output inside this layer's LN1 and leaves this one's to the next
// step. A recompute does not fuse, since its input is the saved, complete output of the
// layer before. With cpu_checkpointing the output goes to the host once it is written.
static void layer_forward(GPT *m, int l, LayerView w) {
    ckpt_before_layer(m, l);
    LayerActs la = layer_acts(m, l);
    const floatX *x_res = m->res_pending;   // layer l-1's res2; its MLP output is in a->dbuf
    int leave_res3 = m->fuse_residual && !m->in_backward;   // (the fusion: see GPT.res_pending)
    // flash: the QKV matmul (and RoPE) write q|k|v straight into the saved slot, which the fused
    // backward reads as it is; cublas: into scratch, which attention_forward permutes into the slot
    layer_rows(m, l, w, layer_input(m, l), x_res, la, m->flash ? la.qkvr : m->a.qkv, m->a.dbuf, m->B, m->T, -1, leave_res3);
    m->res_pending = leave_res3 ? la.res2 : NULL;
    if (x_res) ckpt_after_layer(m, l - 1);
    if (!leave_res3) ckpt_after_layer(m, l);
}

// one transformer layer, backward. a->dres comes in as d(layer output) and leaves as
// d(layer input); g is where this layer's parameter gradients accumulate (+=).
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
        // d(fch) directly: the GELU backward is fused into the matmul, a DGELU epilogue on the pre-GELU fch
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
#if !FLOATX_FP16
    if (m->flash) flash_attention_backward(a->qkv, a->att_f32, a->dbuf, qkvr, atty, la.lse, B, T, H, KV, m->hd, s);
    else
#endif
    attention_backward(a->qkv, a->dbuf, qkvr, att, a->att_f32, a->att_bf16, a->att_y, a->att_dqkvr,
                       B, T, H, KV, m->hd, s);
    if (llama) rope_backward(a->qkv, a->qkv, B, T, H, KV, m->hd, c->rope_theta, s);
    matmul_backward(a->dbuf, g.t[T_QKV_W], g.t[T_QKV_B], a->dbias_scratch, a->qkv, ln1, w.t[T_QKV_W], N, C, m->QKV, NULL, s);
    if (llama) rmsnorm_backward(a->dres, g.t[T_LN1_W], a->norm_scratch, a->dbuf, x, w.t[T_LN1_W], ln1_rstd, N, C, s);
    else layernorm_backward(a->dres, g.t[T_LN1_W], g.t[T_LN1_B], a->norm_scratch, a->dbuf, x, w.t[T_LN1_W],
                            ln1_mean, ln1_rstd, N, C, s);
}


// the embedding: x = wte[tokens], plus wpe for gpt2. The pass starts here, so the
// host's inputs go to the device first. They are pageable memory: the copy returns
// once they are staged, and the caller may overwrite m->inputs right away.
static void embed_forward(GPT *m, EmbedView w) {
    int N = m->B * m->T;
    m->in_backward = 0;
    m->res_pending = NULL;
    cudaCheck(cudaMemcpyAsync(m->d_inputs, m->inputs, sizeof(int) * N, cudaMemcpyHostToDevice, m->stream));
    encoder_forward(m->a.encoded, m->d_inputs, w.wte, w.wpe, m->B, m->T, m->cfg.d_model, m->stream);
}

// the final norm and the logits of N rows x, through lm_head, which is gpt2's tied wte. With x_res
// non-NULL, x is x_res + branch, written here: the last layer's residual add, fused.
static void head_rows(GPT *m, HeadView w, floatX *x, const floatX *x_res, const floatX *branch, floatX *ln, float *mean,
                      float *rstd, floatX *logits, int N) {
    const ModelConfig *c = &m->cfg;
    pre_norm(m, ln, mean, rstd, x, x_res, branch, w.lnf_w, w.lnf_b, N);
    matmul_forward(logits, ln, w.lm_head, NULL, N, c->d_model, c->padded_vocab, NULL, m->stream);
}

// d_loss[i] on the host: an 8-byte copy and the stream's synchronization
static double loss_to_host(GPT *m, int i) {
    cudaCheck(cudaMemcpyAsync(m->h_loss, m->d_loss + i, sizeof(double), cudaMemcpyDeviceToHost, m->stream));
    cudaCheck(cudaStreamSynchronize(m->stream));
    return *m->h_loss;
}

// the head: final norm, logits through lm_head (gpt2: the tied wte), and with
// targets the per-position losses (fp32). Training: the fused classifier leaves
// dlogits (for a dloss of 1/accum) in place of the logits, the mean loss joins the
// step's on the device (gpt_step_loss reads it once per step), and 0 is returned.
// Without training: returns the mean loss, read now; the logits stay (gpt_logits_host).
// That is --device-loss 1; with 0 (the default, as first measured) every forward's losses
// come to the host and are summed there, a synchronization per micro-step.
static float head_forward(GPT *m, HeadView w, const int *targets, int training) {
    const ModelConfig *c = &m->cfg;
    cudaStream_t s = m->stream;
    int N = m->B * m->T, V = c->vocab_size, Vp = c->padded_vocab;
    const floatX *x_res = m->res_pending;   // the last layer's res2, for the residual + norm fusion; its MLP output is in a->dbuf
    m->res_pending = NULL;
    head_rows(m, w, layer_input(m, c->n_layer), x_res, x_res ? m->a.dbuf : NULL, m->a.lnf, m->a.lnf_mean, m->a.lnf_rstd,
              m->a.logits, N);
    m->dlogits_scale = 0;
    float loss = 0;
    if (targets) {
        // per-position losses; in training also dlogits = (softmax - onehot) * dloss / N, over the logits
        cudaCheck(cudaMemcpyAsync(m->d_targets, targets, sizeof(int) * N, cudaMemcpyHostToDevice, s));
        float dscale = m->dloss_hint / N;
        fused_classifier(m->a.logits, m->a.losses, m->d_targets, dscale, N, V, Vp, training, s);
        if (training) m->dlogits_scale = dscale;
        if (!m->device_loss) {
            cudaCheck(cudaMemcpyAsync(m->h_losses, m->a.losses, sizeof(float) * N, cudaMemcpyDeviceToHost, s));
            cudaCheck(cudaStreamSynchronize(s));
            double sum = 0;
            for (int i = 0; i < N; i++) sum += m->h_losses[i];
            loss = (float)(sum / N);
            if (training) m->step_loss_host += loss;
        } else if (training) {
            loss_mean_accumulate(m->d_loss, m->a.losses, N, m->step_losses == 0, s);
        } else {
            loss_mean_accumulate(m->d_loss + 1, m->a.losses, N, 1, s);
            loss = (float)loss_to_host(m, 1);
        }
        if (training) { m->step_losses++; loss = 0; }
    }
    cudaCheckLaunch();
    return loss;
}

// The head's backward, from the dlogits the training forward left; its fused
// classifier already used the targets. dloss: see gpt_backward.
static void head_backward(GPT *m, HeadView w, HeadView g, const int *targets, float dloss) {
    const ModelConfig *c = &m->cfg;
    Activations *a = &m->a;
    cudaStream_t s = m->stream;
    int N = m->B * m->T, C = c->d_model, Vp = c->padded_vocab;
    if (m->dlogits_scale == 0) fatal("gpt_backward: no training forward with targets before it");
    m->in_backward = 1;   // the layers' forwards from here on are recomputations, for cpu_checkpointing
    float want = dloss / N;
    if (want != m->dlogits_scale) {   // not the dloss the forward assumed: rescale, at the cost of one extra rounding
        size_t n = (size_t)N * Vp;
        int grid = grid_for(n, 256);
        if (grid > 65536) grid = 65536;
        scale_floatX_kernel<<<grid, 256, 0, s>>>(a->logits, n, want / m->dlogits_scale);
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

// ----------------------------------------------------------------------------
// decoding with a KV cache (train/sample.h): the steps of gpt_decode (train/passes.h) on the
// B rows of m->dec, with the forward's kernels. Only attention differs.

// The KV cache and a step's activations for B sequences of up to max_len positions.
static void gpt_decode_alloc(GPT *m, int B, int max_len) {
    const ModelConfig *c = &m->cfg;
    Decode *d = &m->dec;
    d->B = B; d->max_len = max_len;
    const size_t X = sizeof(floatX), F4 = sizeof(float), C = c->d_model, Vp = c->padded_vocab;
    size_t cache = (size_t)c->n_layer * B * max_len * c->n_kv_head * m->hd;
    void **views[] = {(void **)&d->k, (void **)&d->v, (void **)&d->x, (void **)&d->ln, (void **)&d->mean, (void **)&d->rstd,
                      (void **)&d->qkv, (void **)&d->atty, (void **)&d->buf, (void **)&d->scores, (void **)&d->fch,
                      (void **)&d->fch_act, (void **)&d->logits, (void **)&d->d_tokens};
    size_t bytes[] = {cache * X, cache * X, B * C * X, B * C * X, B * F4, B * F4, (size_t)B * m->QKV * X, B * C * X, B * C * X,
                      (size_t)B * c->n_head * max_len * F4, (size_t)B * m->FC * X, (size_t)B * c->d_ff * X, B * Vp * X,
                      B * sizeof(int)};
    d->memory = act_alloc(&m->zero, MEM_KV_CACHE, views, bytes, sizeof(bytes) / sizeof(bytes[0]), GPU_ACT_ALIGN);
    cudaCheck(cudaMallocHost(&d->h_logits_x, B * Vp * X));
    d->h_logits = (float *)xmalloc(B * Vp * F4, "logits (host)");
}

static void gpt_decode_free(GPT *m) {
    cudaCheck(cudaStreamSynchronize(m->stream));
    zb_free(&m->zero.be, m->dec.memory, ZMEM_WORK);
    cudaCheck(cudaFreeHost(m->dec.h_logits_x));
    free(m->dec.h_logits);
    memset(&m->dec, 0, sizeof(m->dec));
}

// x = wte[tokens], plus wpe[pos] for gpt2. The tokens go to the device first; they are
// pageable memory, so the copy returns once they are staged.
static void embed_decode(GPT *m, EmbedView w, const int *tokens, int pos) {
    Decode *d = &m->dec;
    int C = m->cfg.d_model;
    cudaCheck(cudaMemcpyAsync(d->d_tokens, tokens, sizeof(int) * d->B, cudaMemcpyHostToDevice, m->stream));
    encoder_forward(d->x, d->d_tokens, w.wte, w.wpe ? w.wpe + (size_t)pos * C : NULL, d->B, 1, C, m->stream);
}

// one layer on the new positions: the residual stream in place, one buffer per kind
static void layer_decode(GPT *m, int l, LayerView w, int pos) {
    Decode *d = &m->dec;
    LayerActs la;
    la.ln1 = la.ln2 = d->ln; la.ln1_mean = la.ln2_mean = d->mean; la.ln1_rstd = la.ln2_rstd = d->rstd;
    la.qkvr = la.att = NULL; la.lse = NULL;   // the training forward's saved attention tensors are not used here
    la.atty = d->atty; la.res2 = la.res3 = d->x; la.fch = d->fch; la.fch_act = d->fch_act;
    layer_rows(m, l, w, d->x, NULL, la, d->qkv, d->buf, d->B, 1, pos, 0);   // in place, unfused
}

static void head_decode(GPT *m, HeadView w) {
    Decode *d = &m->dec;
    head_rows(m, w, d->x, NULL, NULL, d->ln, d->mean, d->rstd, d->logits, d->B);
    cudaCheckLaunch();
}

#include "train/passes.h"

// ----------------------------------------------------------------------------
// what train/loop.h needs besides the passes, and main

// floatX device logits of n rows to fp32 host memory
static const float *logits_to_host(GPT *m, const floatX *d_logits, floatX *h_x, float *h, size_t n) {
    cudaCheck(cudaMemcpyAsync(h_x, d_logits, sizeof(floatX) * n, cudaMemcpyDeviceToHost, m->stream));
    cudaCheck(cudaStreamSynchronize(m->stream));
    const uint16_t *b = (const uint16_t *)h_x;
    for (size_t i = 0; i < n; i++) h[i] = floatX_bits_to_float(b[i]);
    return h;
}

// for sampling: the logits of position t of sequence b after a forward without training, on the host
static const float *gpt_logits_host(GPT *m, int b, int t) {
    int Vp = m->cfg.padded_vocab;
    return logits_to_host(m, m->a.logits + ((size_t)b * m->T + t) * Vp, m->h_logits_x, m->h_logits, Vp);
}
// the logits [dec.B, Vp] of the last decode step, on the host
static const float *gpt_decode_logits_host(GPT *m) {
    Decode *d = &m->dec;
    return logits_to_host(m, d->logits, d->h_logits_x, d->h_logits, (size_t)d->B * m->cfg.padded_vocab);
}

// The dloss of the coming training passes: 1/accum, times the loss scale with fp16.
// The fused classifier writes dlogits for it in the forward, so that they are rounded
// to floatX once, already scaled; rescaling afterwards would lose what underflowed.
static void gpt_set_dloss(GPT *m, float dloss) { m->dloss_hint = dloss; }

// The mean loss of the training forwards since the last call (a step's micro-steps):
// the device's sum read once, an 8-byte copy and a synchronization (train/loop.h calls
// this after the gradient norm's synchronization: the stream has little left to do) with
// --device-loss 1, or the host's sum. Either way each micro-batch's mean, rounded to
// float, is added in double in micro-step order, as the CPU trainer does; only the order
// in which the device sums a micro-batch's positions differs (loss_mean_accumulate).
static float gpt_step_loss(GPT *m) {
    if (m->step_losses == 0) fatal("gpt_step_loss: no training forward since the last call");
    double sum = m->device_loss ? loss_to_host(m, 0) : m->step_loss_host;
    float loss = (float)(sum / m->step_losses);
    m->step_losses = 0;
    m->step_loss_host = 0;
    // --bias-grad-epilogue 1 where cuBLASLt had no BGRADB algorithm: the flag did not do all it says
    if (g_matmul_bias_grad_fallbacks > 0 && !m->bias_grad_noted && m->comm->rank == 0) {
        fprintf(stderr, "note: --bias-grad-epilogue: cuBLASLt had no BGRADB algorithm for %ld bias gradients so far; "
                "the column-sum kernel computed them\n", g_matmul_bias_grad_fallbacks);
        m->bias_grad_noted = 1;
    }
    return loss;
}

#include "train/loop.h"

// The device, which comm_attach_device selected, and the host threads for OpenMP and for
// CPU-Adam with --offload: --threads, else OMP_NUM_THREADS, else this node's cores shared
// among its ranks (comm/launch.h).
static void gpu_setup(const TrainConfig *tc, const Comm *comm, char *desc, size_t n) {
    char why[96];
    int threads = launch_threads(tc->threads, comm->local_world, why, sizeof(why));
    omp_set_num_threads(threads);
    cudaDeviceProp p;
    cudaCheck(cudaGetDeviceProperties(&p, comm->device));
    snprintf(desc, n, "%.200s (sm_%d%d), %d CPU thread%s (%s), %s attention%s", p.name, p.major, p.minor, threads,
             threads > 1 ? "s" : "", why, gpu_flash_attention(tc) ? "flash" : "cuBLAS",
             tc->bias_grad_epilogue ? ", bias gradients in the GEMM epilogue" : "");
}

#ifndef TESTING
// main: start-up, the model, then train/loop.h's train(). Each optimizer step is
// train_step there, its TRAINING SECTION: forward and backward per micro-step, then
// reduce, guard, update.
int main(int argc, char **argv) {
    Comm comm;
    TrainConfig tc;
    if (!train_startup(&comm, &tc, &argc, &argv)) return 0;   // MPI and the flags; --estimate-memory ends here
    char device[384];
    gpu_setup(&tc, &comm, device, sizeof(device));
    GPT m;
    gpt_build(&m, &tc, &comm);
    int status = tc.sample ? sample_run(&m, &tc, "train_gpt", device)   // --sample 1: generate text, no training
                           : train(&m, &tc, "train_gpt", device);      // 0, or EXIT_PREEMPTED after a signal
    gpt_free(&m);
    comm_finalize(&comm);
    return status;
}
#endif
