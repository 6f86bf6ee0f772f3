// train/activations.h: what each trainer keeps from its forward pass for its backward
// pass, and the scratch its kernels need, as sizes. The trainers lay their
// activation structs out from these lists: one allocation per class, with views at
// aligned offsets in the order of the lists. The memory report and the estimator
// add the same lists up without allocating anything.
//
// Both trainers save the same tensors. Per layer: the norms' outputs and
// statistics, q|k|v, the attention probabilities, the attention output, the
// residual after attention, the MLP's pre- and post-activation and the layer's
// output. For the head: the final norm, the logits and the losses.
// With --recompute 1 (activation checkpointing) a layer's tensors exist once, for
// the layer being computed, instead of once per layer. Every layer's output is
// still kept, since it is the next layer's input, and the backward recomputes a
// layer's forward from its input before its backward.
//
// The CPU trainer stores everything in fp32. The GPU trainer stores floatX (2
// bytes), except the norm statistics, the losses and the fp32 attention scratch.
//
// The GPU trainer's attention (--attention, gpu_flash_attention) decides what a
// layer keeps of its attention and which scratch the attention needs:
//   cublas (cuda/attention.cuh): q|k|v permuted and the [B,H,T,T] probabilities.
//          Scratch: fp32 scores / dP and bf16 dS [B,H,T,T], y [B,H,T,hd], dq|dk|dv.
//   flash  (cuda/flash_attention.cuh): q|k|v as the QKV matmul wrote them, after
//          RoPE, and the fp32 log-sum-exp [B,H,T] in the probabilities' slot.
//          Scratch: the backward's fp32 D [B,H,T]. Nothing of size T x T.
#pragma once
#include "zero.h"
#include "cuda/sizes.h"

// the saved activations, in the order of both trainers' Activations structs
enum {
    ACT_ENCODED, ACT_LN1, ACT_LN1_MEAN, ACT_LN1_RSTD, ACT_QKV, ACT_ATT, ACT_ATTY, ACT_RES2,
    ACT_LN2, ACT_LN2_MEAN, ACT_LN2_RSTD, ACT_FCH, ACT_FCH_ACT, ACT_RES3,
    ACT_LNF, ACT_LNF_MEAN, ACT_LNF_RSTD, ACT_LOGITS, ACT_LOSSES, N_ACT_SAVED
};
// the CPU trainer's scratch: one layer's backward worth, and the RoPE tables
enum { CPU_DRES, CPU_DBUF, CPU_DQKV, CPU_DATT, CPU_DFCH, CPU_DFCH_ACT, CPU_ROPE_COS, CPU_ROPE_SIN, N_CPU_SCRATCH };
// the GPU trainer's scratch: one layer's worth, the kernels' workspaces, the token ids on the device.
// The embedding backward's sort buffers and cuBLASLt's workspace are allocated by their kernels'
// headers (gpu_kernel_workspace_bytes).
enum {
    GPU_QKV, GPU_DRES, GPU_DBUF, GPU_DFCH, GPU_DFCH_ACT, GPU_ATT_F32, GPU_ATT_X, GPU_ATT_Y, GPU_ATT_DQKVR,
    GPU_NORM_SCRATCH, GPU_DBIAS_SCRATCH, GPU_INPUTS, GPU_TARGETS, N_GPU_SCRATCH
};

// The views of the saved activations in the order above, for act_alloc. Both trainers' Activations
// name their fields alike, except qkv: the CPU keeps q|k|v as the matmul wrote them, the GPU keeps
// them permuted in qkvr.
#define SAVED_ACTIVATION_VIEWS(a, qkv) {                                                                        \
    (void **)&(a)->encoded, (void **)&(a)->ln1, (void **)&(a)->ln1_mean, (void **)&(a)->ln1_rstd, (void **)&(a)->qkv, \
    (void **)&(a)->att, (void **)&(a)->atty, (void **)&(a)->res2, (void **)&(a)->ln2, (void **)&(a)->ln2_mean,      \
    (void **)&(a)->ln2_rstd, (void **)&(a)->fch, (void **)&(a)->fch_act, (void **)&(a)->res3, (void **)&(a)->lnf,   \
    (void **)&(a)->lnf_mean, (void **)&(a)->lnf_rstd, (void **)&(a)->logits, (void **)&(a)->losses}

#define CPU_ACT_ALIGN 64    // bytes: 16 floats, a cache line
#define GPU_ACT_ALIGN 256   // bytes: what cuBLASLt and the vector loads like

// Whether the fused attention's kernels can run this model: they need bf16 (not the
// fp16 build), a head size of 64 or 128, and T up to FLASH_MAX_T (cuda/flash_attention.cuh).
static int flash_attention_applies(const ModelConfig *c, int T) {
    int hd = c->d_model / c->n_head;
    return !FLOATX_FP16 && (hd == 64 || hd == 128) && T <= FLASH_MAX_T;
}

// The GPU trainer runs the fused attention: --attention flash (train_gpt refuses a model it does not
// apply to), or auto where it applies.
static int gpu_flash_attention(const TrainConfig *tc) {
    if (!strcmp(tc->attention, "auto")) return flash_attention_applies(&tc->model, tc->T);
    return !strcmp(tc->attention, "flash");
}

// the model's sizes every list needs
typedef struct { size_t L, BT, C, QKV, FC, F, att, Vp, hd; } ActDims;

static ActDims act_dims(const ModelConfig *c, int B, int T) {
    ActDims d;
    d.L = c->n_layer; d.BT = (size_t)B * T; d.C = c->d_model; d.F = c->d_ff; d.Vp = c->padded_vocab;
    d.hd = c->d_model / c->n_head;
    d.QKV = (c->n_head + 2 * c->n_kv_head) * d.hd;
    d.FC = c->arch == ARCH_LLAMA ? 2 * d.F : d.F;
    d.att = attention_att_elems(B, T, c->n_head);
    return d;
}

// Saved activations in bytes. x is the size of an activation element: 4 on the
// CPU, sizeof(floatX) on the GPU; statistics and losses are fp32 in both.
// cpu_ckpt (GPU trainer with recompute): the layer outputs live in pinned host
// memory (cpu_checkpoint_host_bytes) and the device keeps a ring of three.
// flash (GPU trainer, gpu_flash_attention): the attention keeps its fp32
// log-sum-exp instead of the probabilities. The CPU trainer passes 0.
static void saved_activation_sizes(size_t t[N_ACT_SAVED], const ModelConfig *c, int B, int T, int recompute, int cpu_ckpt,
                                   int flash, size_t x) {
    ActDims d = act_dims(c, B, T);
    size_t Ls = recompute ? 1 : d.L;   // layers whose tensors are kept at once
    t[ACT_ENCODED] = d.BT * d.C * x;
    t[ACT_LN1] = Ls * d.BT * d.C * x; t[ACT_LN1_MEAN] = Ls * d.BT * 4; t[ACT_LN1_RSTD] = Ls * d.BT * 4;
    t[ACT_QKV] = Ls * d.BT * d.QKV * x; t[ACT_ATTY] = Ls * d.BT * d.C * x;
    t[ACT_ATT] = Ls * (flash ? flash_lse_elems(B, T, c->n_head) * 4 : d.att * x);   // lse, or the probabilities
    t[ACT_RES2] = Ls * d.BT * d.C * x;
    t[ACT_LN2] = Ls * d.BT * d.C * x; t[ACT_LN2_MEAN] = Ls * d.BT * 4; t[ACT_LN2_RSTD] = Ls * d.BT * 4;
    t[ACT_FCH] = Ls * d.BT * d.FC * x; t[ACT_FCH_ACT] = Ls * d.BT * d.F * x;
    t[ACT_RES3] = (cpu_ckpt ? 3 : d.L) * d.BT * d.C * x;   // every layer's output: the next layer's input
    t[ACT_LNF] = d.BT * d.C * x; t[ACT_LNF_MEAN] = d.BT * 4; t[ACT_LNF_RSTD] = d.BT * 4;
    t[ACT_LOGITS] = d.BT * d.Vp * x; t[ACT_LOSSES] = d.BT * 4;
}

static void cpu_scratch_sizes(size_t t[N_CPU_SCRATCH], const ModelConfig *c, int B, int T) {
    ActDims d = act_dims(c, B, T);
    size_t rope = c->arch == ARCH_LLAMA ? (size_t)c->max_seq * (d.hd / 2) * 4 : 0;   // RoPE angle tables
    t[CPU_DRES] = d.BT * d.C * 4; t[CPU_DBUF] = d.BT * d.C * 4; t[CPU_DQKV] = d.BT * d.QKV * 4; t[CPU_DATT] = d.att * 4;
    t[CPU_DFCH] = d.BT * d.FC * 4; t[CPU_DFCH_ACT] = d.BT * d.F * 4; t[CPU_ROPE_COS] = rope; t[CPU_ROPE_SIN] = rope;
}

// flash: as for saved_activation_sizes. The fused attention's backward needs only D, fp32 [B,H,T].
static void gpu_scratch_sizes(size_t t[N_GPU_SCRATCH], const ModelConfig *c, int B, int T, int flash, size_t x) {
    ActDims d = act_dims(c, B, T);
    size_t max_oc = d.QKV > d.FC ? d.QKV : d.FC;
    if (d.C > max_oc) max_oc = d.C;
    t[GPU_QKV] = d.BT * d.QKV * x; t[GPU_DRES] = d.BT * d.C * x; t[GPU_DBUF] = d.BT * d.C * x;
    t[GPU_DFCH] = d.BT * d.FC * x; t[GPU_DFCH_ACT] = d.BT * d.F * x;
    if (flash) {
        t[GPU_ATT_F32] = flash_lse_elems(B, T, c->n_head) * 4; t[GPU_ATT_X] = t[GPU_ATT_Y] = t[GPU_ATT_DQKVR] = 0;
    } else {
        t[GPU_ATT_F32] = d.att * 4; t[GPU_ATT_X] = d.att * x;
        t[GPU_ATT_Y] = attention_y_elems(B, T, c->n_head, (int)d.hd) * x;
        t[GPU_ATT_DQKVR] = attention_qkv_elems(B, T, c->n_head, c->n_kv_head, (int)d.hd) * x;
    }
    t[GPU_NORM_SCRATCH] = norm_backward_scratch_floats((int)d.C) * 4; t[GPU_DBIAS_SCRATCH] = matmul_dbias_scratch_floats((int)max_oc) * 4;
    t[GPU_INPUTS] = d.BT * 4; t[GPU_TARGETS] = d.BT * 4;
}

// The buffers the GPU kernels' headers allocate themselves: cuBLASLt's workspace
// and the embedding backward's sort keys and positions. CUB's temporary storage is
// not included: CUB decides its size at run time.
static size_t gpu_kernel_workspace_bytes(int B, int T) { return CUBLASLT_WORKSPACE_BYTES + 3 * (size_t)B * T * sizeof(int); }

// cpu_checkpointing: the outputs of layers 0..L-2 in pinned host memory. They are the
// inputs the backward's recompute needs; the embedding's output stays on the device.
static size_t cpu_checkpoint_host_bytes(const ModelConfig *c, int B, int T, size_t x) {
    return (size_t)(c->n_layer - 1) * B * T * c->d_model * x;
}

// bytes of one allocation holding the n tensors at `align`-byte boundaries
static size_t act_total(const size_t *t, int n, size_t align) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += round_up(t[i], align);
    return total;
}

// point views[i] at tensor i inside one allocation `base` laid out as act_total does
static void act_point(void **const *views, const size_t *t, int n, size_t align, void *base) {
    size_t off = 0;
    for (int i = 0; i < n; i++) { *views[i] = (char *)base + off; off += round_up(t[i], align); }
}

// One allocation of `kind` (zero.h counts it) holding the n tensors of `bytes`,
// views[i] pointed at tensor i.
static void *act_alloc(Zero *z, int kind, void **const *views, const size_t *bytes, int n, size_t align) {
    void *mem = zero_alloc(z, kind, act_total(bytes, n, align), ZMEM_WORK);
    act_point(views, bytes, n, align, mem);
    return mem;
}
