// model/model.h: the parameter layout of both architectures, shared by the CPU
// trainer, the GPU trainer and the checkpoint format, and mirrored by the PyTorch
// reference. Parameters are grouped into units, the granularity at which ZeRO-3
// gathers and releases them:
//
//   unit 0          embedding:  gpt2: wte [Vp,C], wpe [maxT,C]      llama: wte [Vp,C]
//   unit 1 .. L     layer l-1:  see LAYER_* below
//   unit L+1        final:      gpt2: lnf_w [C], lnf_b [C]          llama: norm_w [C], lm_head [Vp,C]
//
// gpt2 ties its output head to wte (unit 0); llama has an untied lm_head.
// Linear weights are [out, in] as in PyTorch: y = x W^T + b.
// The flat order of all tensors, unit by unit and tensor by tensor without padding,
// is the order of the model file and of scripts/train_gpt.py's parameter list.
//
// Below the layout come named views of the tensors, which both trainers use over
// parameters and over gradients, and THE SCHEDULE: the units a forward and a
// backward pass use, in order. zero.h derives from it everything it needs to know
// about the model.
#pragma once
#include "config/train_config.h"

#define MAX_TENSORS_PER_UNIT 12

// tensors of one transformer layer: gpt2 uses all, llama the ones marked L
enum {
    T_LN1_W,       // gpt2 ln_1.weight [C]          L: attn_norm.weight [C]
    T_LN1_B,       // gpt2 ln_1.bias [C]
    T_QKV_W,       // attn qkv [(H+2KV)*hd, C]      L
    T_QKV_B,       // gpt2 [(H+2KV)*hd]
    T_ATTPROJ_W,   // attn output proj [C, C]       L  (residual projection)
    T_ATTPROJ_B,   // gpt2 [C]
    T_LN2_W,       // gpt2 ln_2.weight [C]          L: mlp_norm.weight [C]
    T_LN2_B,       // gpt2 ln_2.bias [C]
    T_FC_W,        // gpt2 fc [F, C]                L: gate and up, fused [2F, C]: rows 0..F-1 gate (w1), F..2F-1 up (w3)
    T_FC_B,        // gpt2 [F]
    T_FCPROJ_W,    // mlp down proj [C, F]          L  (residual projection)
    T_FCPROJ_B,    // gpt2 [C]
    N_LAYER_TENSORS
};

static const char *LAYER_TENSOR_NAMES[N_LAYER_TENSORS] = {
    "ln1_w", "ln1_b", "qkv_w", "qkv_b", "attproj_w", "attproj_b",
    "ln2_w", "ln2_b", "fc_w", "fc_b", "fcproj_w", "fcproj_b"};

typedef struct {
    char name[32];
    size_t offset;      // element offset inside its unit, unpadded
    size_t numel;
    int rows, cols;     // 2-D: [rows, cols]; 1-D: rows = 1, cols = numel
    int decay;          // AdamW's weight decay applies: 2-D weights and embeddings
    float init_std;     // normal(0, std); 0 means constant init_value
    float init_value;   // 1 for norm weights, 0 for biases
    int valid_rows;     // rows that are real; the Vp padding rows beyond V stay zero
    uint64_t first_draw;// the initialization stream's draws before this tensor, for model_init_range
} TensorSpec;

typedef struct {
    char name[24];
    int n_tensors;
    TensorSpec t[MAX_TENSORS_PER_UNIT];
    size_t numel;       // sum of the tensors' sizes
    size_t flat_offset; // offset in the flat, unpadded parameter order
} UnitSpec;

// where a named tensor lives: a unit and an element offset inside it; unit -1: absent
typedef struct { int unit; size_t offset; } TensorRef;

// ----------------------------------------------------------------------------
// the schedule

enum { STEP_EMBED, STEP_LAYER, STEP_HEAD };   // what a step of a pass computes
#define MAX_STEP_UNITS 2

typedef struct {
    int kind;                       // STEP_*
    int layer;                      // STEP_LAYER: which layer
    int n_params, params[MAX_STEP_UNITS];   // units whose parameters the step reads
    int n_grads, grads[MAX_STEP_UNITS];     // backward: units whose gradients it writes
    int keep_for_backward;  // forward: in a training pass these parameters stay gathered for the backward
    int reuses_forward;     // backward: its parameters are the forward's, still gathered
    int recompute;  // backward: first recompute the step's forward from its saved input (activation checkpointing)
} PassStep;

typedef struct {
    int n_fwd, n_bwd;
    PassStep *fwd, *bwd;            // a forward pass; the backward pass that follows a training forward
} Schedule;

typedef struct {
    ModelConfig cfg;
    int n_units;        // L + 2
    UnitSpec *units;
    size_t num_params;  // total elements, unpadded, with the padded vocab rows
    int layer_tensor_index[N_LAYER_TENSORS];  // index of each T_* inside a layer unit, -1 if absent
    TensorRef wte, wpe, lnf_w, lnf_b, lm_head;  // the embedding's and the head's tensors; lm_head is wte when tied
    Schedule schedule;
} ModelLayout;

static void unit_add(UnitSpec *u, const char *name, int rows, int cols, int decay, float std, float value, int valid_rows) {
    TensorSpec *t = &u->t[u->n_tensors++];
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->offset = u->numel;
    t->rows = rows; t->cols = cols;
    t->numel = (size_t)rows * cols;
    t->decay = decay; t->init_std = std; t->init_value = value;
    t->valid_rows = valid_rows;
    u->numel += t->numel;
}

// the units of the embedding, of layer l and of the final norm and head
static int model_unit_embed(const ModelLayout *L) { return 0; }
static int model_unit_layer(const ModelLayout *L, int l) { return 1 + l; }
static int model_unit_final(const ModelLayout *L) { return L->n_units - 1; }

// the tensor of unit u called `name`, or absent
static TensorRef unit_tensor(const ModelLayout *L, int u, const char *name) {
    for (int k = 0; k < L->units[u].n_tensors; k++)
        if (!strcmp(L->units[u].t[k].name, name)) return (TensorRef){u, L->units[u].t[k].offset};
    return (TensorRef){-1, 0};
}

static PassStep *schedule_push(PassStep *steps, int *n, int kind, int layer) {
    PassStep *s = &steps[(*n)++];
    memset(s, 0, sizeof(*s));
    s->kind = kind; s->layer = layer;
    return s;
}
static void step_add(int *n, int *units, int u) {
    for (int k = 0; k < *n; k++) if (units[k] == u) return;
    units[(*n)++] = u;
}

// The passes. Forward: the embedding, the layers in order, then the head, which is
// the final norm and the output projection; it also reads the unit holding lm_head,
// the embedding when tied. Backward: the head first, with its parameters kept from
// the forward, since the logits' gradient follows the loss directly; the layers in
// reverse; then the embedding, whose backward needs only the token ids and no
// parameters. The head writes the gradient of lm_head's unit, so a tied embedding's
// gradient is written twice, by the head and by the embedding, with every layer
// between.
static void schedule_build(ModelLayout *L) {
    Schedule *S = &L->schedule;
    int nl = L->cfg.n_layer, E = model_unit_embed(L), F = model_unit_final(L);
    S->fwd = (PassStep *)xcalloc(sizeof(PassStep) * (nl + 2), "schedule");
    S->bwd = (PassStep *)xcalloc(sizeof(PassStep) * (nl + 2), "schedule");
    PassStep *s = schedule_push(S->fwd, &S->n_fwd, STEP_EMBED, -1);
    step_add(&s->n_params, s->params, E);
    for (int l = 0; l < nl; l++) {
        s = schedule_push(S->fwd, &S->n_fwd, STEP_LAYER, l);
        step_add(&s->n_params, s->params, model_unit_layer(L, l));
    }
    s = schedule_push(S->fwd, &S->n_fwd, STEP_HEAD, -1);
    step_add(&s->n_params, s->params, F);
    step_add(&s->n_params, s->params, L->lm_head.unit);
    s->keep_for_backward = 1;

    PassStep *head = schedule_push(S->bwd, &S->n_bwd, STEP_HEAD, -1);
    *head = S->fwd[S->n_fwd - 1];
    head->keep_for_backward = 0; head->reuses_forward = 1;
    head->n_grads = head->n_params;
    memcpy(head->grads, head->params, sizeof(head->params));
    for (int l = nl - 1; l >= 0; l--) {
        s = schedule_push(S->bwd, &S->n_bwd, STEP_LAYER, l);
        step_add(&s->n_params, s->params, model_unit_layer(L, l));
        step_add(&s->n_grads, s->grads, model_unit_layer(L, l));
    }
    s = schedule_push(S->bwd, &S->n_bwd, STEP_EMBED, -1);
    step_add(&s->n_grads, s->grads, E);
}

static void model_layout_build(ModelLayout *L, const ModelConfig *c) {
    memset(L, 0, sizeof(*L));
    L->cfg = *c;
    L->n_units = c->n_layer + 2;
    L->units = (UnitSpec *)xcalloc(sizeof(UnitSpec) * L->n_units, "model layout");
    int C = c->d_model, F = c->d_ff, Vp = c->padded_vocab, V = c->vocab_size;
    int hd = C / c->n_head, qkv = (c->n_head + 2 * c->n_kv_head) * hd;
    int gpt2 = c->arch == ARCH_GPT2;
    float std = 0.02f, resid_std = 0.02f / sqrtf(2.0f * c->n_layer);

    UnitSpec *u = &L->units[0];
    strcpy(u->name, "embed");
    unit_add(u, "wte", Vp, C, 1, std, 0, V);
    if (gpt2) unit_add(u, "wpe", c->max_seq, C, 1, std, 0, c->max_seq);

    for (int i = 0; i < N_LAYER_TENSORS; i++) L->layer_tensor_index[i] = -1;
    for (int l = 0; l < c->n_layer; l++) {
        u = &L->units[1 + l];
        snprintf(u->name, sizeof(u->name), "layer%d", l);
        int k = 0;
#define ADD(T, r, cc, d, s, v) do { unit_add(u, LAYER_TENSOR_NAMES[T], r, cc, d, s, v, r); L->layer_tensor_index[T] = k++; } while (0)
        ADD(T_LN1_W, 1, C, 0, 0, 1);
        if (gpt2) ADD(T_LN1_B, 1, C, 0, 0, 0);
        ADD(T_QKV_W, qkv, C, 1, std, 0);
        if (gpt2) ADD(T_QKV_B, 1, qkv, 0, 0, 0);
        ADD(T_ATTPROJ_W, C, C, 1, resid_std, 0);
        if (gpt2) ADD(T_ATTPROJ_B, 1, C, 0, 0, 0);
        ADD(T_LN2_W, 1, C, 0, 0, 1);
        if (gpt2) ADD(T_LN2_B, 1, C, 0, 0, 0);
        ADD(T_FC_W, gpt2 ? F : 2 * F, C, 1, std, 0);
        if (gpt2) ADD(T_FC_B, 1, F, 0, 0, 0);
        ADD(T_FCPROJ_W, C, F, 1, resid_std, 0);
        if (gpt2) ADD(T_FCPROJ_B, 1, C, 0, 0, 0);
#undef ADD
    }
    u = &L->units[L->n_units - 1];
    strcpy(u->name, "final");
    unit_add(u, gpt2 ? "lnf_w" : "norm_w", 1, C, 0, 0, 1, 1);
    if (gpt2) unit_add(u, "lnf_b", 1, C, 0, 0, 0, 1);
    else unit_add(u, "lm_head", Vp, C, 1, std, 0, V);

    size_t off = 0;
    uint64_t draws = 0;   // two per normal-initialized element, in flat order
    for (int i = 0; i < L->n_units; i++) {
        L->units[i].flat_offset = off; off += L->units[i].numel;
        for (int k = 0; k < L->units[i].n_tensors; k++) {
            TensorSpec *t = &L->units[i].t[k];
            t->first_draw = draws;
            if (t->init_std > 0) draws += 2 * (uint64_t)t->valid_rows * t->cols;
        }
    }
    L->num_params = off;

    int E = model_unit_embed(L), Fu = model_unit_final(L);
    L->wte = unit_tensor(L, E, "wte");
    L->wpe = unit_tensor(L, E, "wpe");
    L->lnf_w = unit_tensor(L, Fu, gpt2 ? "lnf_w" : "norm_w");
    L->lnf_b = unit_tensor(L, Fu, "lnf_b");
    L->lm_head = gpt2 ? L->wte : unit_tensor(L, Fu, "lm_head");   // gpt2's output head is wte, tied
    schedule_build(L);
}

// Activation checkpointing: every layer's backward starts by recomputing the layer's
// forward with the parameters gathered for the backward, so it costs no extra
// communication. The forward then keeps only each layer's input (train/activations.h).
static void model_set_recompute(ModelLayout *L, int on) {
    for (int i = 0; i < L->schedule.n_bwd; i++)
        if (L->schedule.bwd[i].kind == STEP_LAYER) L->schedule.bwd[i].recompute = on;
}

static void model_layout_free(ModelLayout *L) {
    free(L->units); free(L->schedule.fwd); free(L->schedule.bwd);
    L->units = NULL; L->schedule.fwd = L->schedule.bwd = NULL;
}

// ----------------------------------------------------------------------------
// Named views, over parameters or over gradients. `units` maps a unit to the buffer
// that holds it whole: what zero.h fetched, or the gradient it opened. Absent
// tensors, such as llama's biases and wpe, are NULL.

typedef struct { floatX *t[N_LAYER_TENSORS]; } LayerView;
typedef struct { floatX *wte, *wpe; } EmbedView;
typedef struct { floatX *lnf_w, *lnf_b, *lm_head; } HeadView;

static floatX *tensor_in(TensorRef r, floatX *const *units) { return r.unit < 0 ? NULL : units[r.unit] + r.offset; }

static LayerView layer_view(const ModelLayout *L, floatX *unit_base) {
    LayerView v;
    const UnitSpec *u = &L->units[1];
    for (int i = 0; i < N_LAYER_TENSORS; i++) {
        int k = L->layer_tensor_index[i];
        v.t[i] = k >= 0 ? unit_base + u->t[k].offset : NULL;
    }
    return v;
}
static EmbedView embed_view(const ModelLayout *L, floatX *const *units) {
    return (EmbedView){tensor_in(L->wte, units), tensor_in(L->wpe, units)};
}
static HeadView head_view(const ModelLayout *L, floatX *const *units) {
    return (HeadView){tensor_in(L->lnf_w, units), tensor_in(L->lnf_b, units), tensor_in(L->lm_head, units)};
}

// Seeded GPT-2 style initialization: one splitmix64 stream from `seed` over the
// whole model in flat order, tensor by tensor, row-major, two draws per normal
// (Box-Muller). Constant tensors draw nothing. Padded vocab rows are zero and stay
// zero, since their gradient is always zero. Every rank and both trainers produce
// the same bits. The stream is counter-based: splitmix64's state after k draws is
// seed + k times its increment. So any element can be generated directly:
// model_init_range makes just a range of one unit, and under ZeRO each rank
// generates only what it holds, as DeepSpeed's zero.Init does.
static void model_init_range(const ModelLayout *L, int unit, size_t lo, size_t n, float *out, uint64_t seed) {
    const UnitSpec *u = &L->units[unit];
    for (size_t j = 0; j < n; j++) out[j] = 0.0f;   // past the unit's elements: padding
    for (int k = 0; k < u->n_tensors; k++) {
        const TensorSpec *t = &u->t[k];
        size_t a = t->offset > lo ? t->offset : lo, b = t->offset + t->numel < lo + n ? t->offset + t->numel : lo + n;
        size_t valid = (size_t)t->valid_rows * t->cols;
        for (size_t i = a; i < b; i++) {
            size_t e = i - t->offset;
            float v = 0.0f;
            if (e < valid && t->init_std > 0) {
                Rng rng = {seed + (t->first_draw + 2 * (uint64_t)e) * 0x9E3779B97F4A7C15ull};
                v = t->init_std * rng_normal(&rng);
            } else if (e < valid) v = t->init_value;
            out[i - lo] = v;
        }
    }
}

// Elements [lo, lo + n) of unit u, read from a model file at `path`, checked finite:
// returns 1, or 0 with a one-line err naming the tensor and element that is not
// (the same words as a safetensors file's, model/hf.h)
static int params_check_finite(const ModelLayout *L, int u, size_t lo, const float *v, size_t n, const char *path, char *err, size_t errn) {
    size_t i = first_nonfinite(v, n);
    if (i == n) return 1;
    const UnitSpec *U = &L->units[u];
    size_t e = lo + i;
    int k = 0;
    while (k + 1 < U->n_tensors && e >= U->t[k + 1].offset) k++;
    snprintf(err, errn, "%s: tensor %s.%s: non-finite value at element %zu", path, U->name, U->t[k].name, e - U->t[k].offset);
    return 0;
}

// ----------------------------------------------------------------------------
// Where a run's starting parameters come from. They are read unit by unit and range
// by range, so that each rank reads only what its ZeRO stage holds.

typedef struct ParamSource ParamSource;
struct ParamSource {
    // elements [lo, lo + n) of unit u into out, zeros past its numel (the plan's padding); 0 with err set on failure
    int (*read)(ParamSource *s, int u, size_t lo, size_t n, float *out);
    const ModelLayout *L;
    uint64_t seed;        // the seeded initialization
    const float *flat;    // parameters in memory, in flat order
    int fd;               // a model file (train/checkpoint.h); -1 if none
    void *hf;             // a safetensors file (model/hf.h's HFSource); NULL if none
    char path[512];
    char err[1200];
};

static int params_read_init(ParamSource *s, int u, size_t lo, size_t n, float *out) {
    model_init_range(s->L, u, lo, n, out, s->seed);
    return 1;
}
static int params_read_flat(ParamSource *s, int u, size_t lo, size_t n, float *out) {
    size_t numel = s->L->units[u].numel, real = lo >= numel ? 0 : (lo + n < numel ? n : numel - lo);
    memcpy(out, s->flat + s->L->units[u].flat_offset + lo, real * sizeof(float));
    memset(out + real, 0, (n - real) * sizeof(float));
    return 1;
}
static ParamSource params_from_init(const ModelLayout *L, uint64_t seed) {
    ParamSource s;
    memset(&s, 0, sizeof(s));
    s.read = params_read_init; s.L = L; s.seed = seed; s.fd = -1;
    return s;
}
static ParamSource params_from_flat(const ModelLayout *L, const float *flat) {
    ParamSource s = params_from_init(L, 0);
    s.read = params_read_flat; s.flat = flat;
    return s;
}

// the whole model in flat order, for tests and the PyTorch reference's start
static int params_read_all(ParamSource *s, float *flat) {
    for (int u = 0; u < s->L->n_units; u++)
        if (!s->read(s, u, 0, s->L->units[u].numel, flat + s->L->units[u].flat_offset)) return 0;
    return 1;
}

// FLOPs per token for one training step, by the PaLM and llm.c convention: 6 per
// matmul weight, 2 forward and 4 backward, plus 12*L*T*C for the attention scores
// and values, with no discount for the causal mask. So 6N + 12LTC for GPT-2.
static double model_flops_per_token(const ModelConfig *c, int T) {
    double C = c->d_model, F = c->d_ff, hd = C / c->n_head;
    double qkv = (c->n_head + 2.0 * c->n_kv_head) * hd;
    double mlp = c->arch == ARCH_LLAMA ? 3.0 * C * F : 2.0 * C * F;
    double per_layer = 2.0 * (C * qkv + C * C + mlp) + 4.0 * T * C;  // forward
    double fwd = c->n_layer * per_layer + 2.0 * C * c->padded_vocab;
    return 3.0 * fwd;
}
