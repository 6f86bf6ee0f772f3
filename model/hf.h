// model/hf.h: zeroc's parameters under Hugging Face's names and layouts, GPT2LMHeadModel for gpt2 and
// LlamaForCausalLM for llama: the one table both directions use, the element layout of each tensor,
// and the import. tools/export_model.c writes with the table; --init X.safetensors reads with it.
//
//   zeroc (model/model.h)        gpt2 (GPT2LMHeadModel)                    llama (LlamaForCausalLM)
//   embed.wte [Vp, C]      transformer.wte.weight [V, C]             model.embed_tokens.weight [V, C]
//   embed.wpe [T, C]       transformer.wpe.weight [T, C]
//   layerN.ln1_w, ln1_b    transformer.h.N.ln_1.{weight,bias}        model.layers.N.input_layernorm.weight
//   layerN.qkv_w           .attn.c_attn.weight [C, 3C] (Conv1D)      .self_attn.{q,k,v}_proj.weight (rows of qkv_w;
//   layerN.qkv_b           .attn.c_attn.bias [3C]                     q and k rows permuted for RoPE, below)
//   layerN.attproj_w, _b   .attn.c_proj.{weight [C, C], bias}        .self_attn.o_proj.weight
//   layerN.ln2_w, ln2_b    .ln_2.{weight,bias}                       .post_attention_layernorm.weight
//   layerN.fc_w, fc_b      .mlp.c_fc.{weight [C, F], bias}           .mlp.gate_proj.weight (rows 0..F-1),
//                                                                    .mlp.up_proj.weight (rows F..2F-1)
//   layerN.fcproj_w, _b    .mlp.c_proj.{weight [F, C], bias}         .mlp.down_proj.weight
//   final.lnf_w, lnf_b     transformer.ln_f.{weight,bias}            model.norm.weight
//   final.lm_head [Vp, C]  (tied to wte: not stored)                 lm_head.weight [V, C]
//
// Layouts: GPT-2's Conv1D stores W as [in, out] (y = x W + b), the transpose of zeroc's Linear
// [out, in]. The vocabulary padding rows V..Vp-1 are zeroc's own: they are dropped on export and
// come back as zeros on import. RoPE: zeroc rotates interleaved pairs (2i, 2i+1) of each head, as
// Meta's layout does (docs/model.md); transformers' LlamaAttention rotates the two halves
// (i, i + hd/2) with rotate_half. Permuting the rows of q_proj and k_proj within each head, from
// interleaved row 2i + s to half-split row s*hd/2 + i, makes the two compute the same attention
// scores, since q.k is the same sum in another order. It is the permutation of transformers'
// convert_llama_weights_to_hf.py.
#pragma once
#include "model/model.h"
#include "config/hf_config.h"
#include "formats/safetensors.h"


typedef struct {
    char name[96];        // Hugging Face's name, with its model's prefix: transformer. or model.
    int unit, k;          // the zeroc tensor: unit, tensor index within the unit
    int row0, rows, cols; // rows [row0, row0 + rows) of it, cols each
    int ndim;             // 1 (norms, biases) or 2
    int conv1d;           // GPT-2 Conv1D: stored [cols, rows]
    int rope_hd;          // > 0: q/k rows permuted within each head of rope_hd rows
} HFTensor;

static int hf_max_tensors(const ModelLayout *L) { return 12 * L->cfg.n_layer + 4; }

// The table in zeroc's flat order, so that an export streams the model file front to back. Returns the count.
static int hf_tensors(const ModelLayout *L, HFTensor *out) {
    const ModelConfig *c = &L->cfg;
    int n = 0, gpt2 = c->arch == ARCH_GPT2, hd = c->d_model / c->n_head, H = c->n_head, KV = c->n_kv_head, F = c->d_ff;
    const char *P = gpt2 ? "transformer." : "model.";
    // one entry: rows [r0, r0 + nr) of tensor kk of unit u; nr < 0: all its valid rows
#define HF_ADD(u, kk, r0, nr, conv, rope, ...) do { \
        const TensorSpec *ts_ = &L->units[u].t[kk]; HFTensor *e_ = &out[n++]; \
        snprintf(e_->name, sizeof(e_->name), __VA_ARGS__); \
        e_->unit = (u); e_->k = (kk); e_->row0 = (r0); e_->rows = (nr) < 0 ? ts_->valid_rows : (nr); e_->cols = ts_->cols; \
        e_->ndim = ts_->decay ? 2 : 1; e_->conv1d = (conv); e_->rope_hd = (rope); } while (0)
    HF_ADD(0, 0, 0, -1, 0, 0, "%s%s.weight", P, gpt2 ? "wte" : "embed_tokens");
    if (gpt2) HF_ADD(0, 1, 0, -1, 0, 0, "%swpe.weight", P);
    for (int l = 0; l < c->n_layer; l++) {
        int u = model_unit_layer(L, l);
        const int *ix = L->layer_tensor_index;
        if (gpt2) {
            static const char *NAMES[N_LAYER_TENSORS] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                "mlp.c_proj.weight", "mlp.c_proj.bias"};
            for (int t = 0; t < N_LAYER_TENSORS; t++)
                HF_ADD(u, ix[t], 0, -1, L->units[u].t[ix[t]].decay, 0, "%sh.%d.%s", P, l, NAMES[t]);
        } else {
            HF_ADD(u, ix[T_LN1_W], 0, -1, 0, 0, "%slayers.%d.input_layernorm.weight", P, l);
            HF_ADD(u, ix[T_QKV_W], 0, H * hd, 0, hd, "%slayers.%d.self_attn.q_proj.weight", P, l);
            HF_ADD(u, ix[T_QKV_W], H * hd, KV * hd, 0, hd, "%slayers.%d.self_attn.k_proj.weight", P, l);
            HF_ADD(u, ix[T_QKV_W], (H + KV) * hd, KV * hd, 0, 0, "%slayers.%d.self_attn.v_proj.weight", P, l);
            HF_ADD(u, ix[T_ATTPROJ_W], 0, -1, 0, 0, "%slayers.%d.self_attn.o_proj.weight", P, l);
            HF_ADD(u, ix[T_LN2_W], 0, -1, 0, 0, "%slayers.%d.post_attention_layernorm.weight", P, l);
            HF_ADD(u, ix[T_FC_W], 0, F, 0, 0, "%slayers.%d.mlp.gate_proj.weight", P, l);
            HF_ADD(u, ix[T_FC_W], F, F, 0, 0, "%slayers.%d.mlp.up_proj.weight", P, l);
            HF_ADD(u, ix[T_FCPROJ_W], 0, -1, 0, 0, "%slayers.%d.mlp.down_proj.weight", P, l);
        }
    }
    int u = model_unit_final(L);
    if (gpt2) {
        HF_ADD(u, 0, 0, -1, 0, 0, "%sln_f.weight", P);
        HF_ADD(u, 1, 0, -1, 0, 0, "%sln_f.bias", P);
    } else {
        HF_ADD(u, 0, 0, -1, 0, 0, "%snorm.weight", P);
        HF_ADD(u, 1, 0, -1, 0, 0, "lm_head.weight");
    }
#undef HF_ADD
    return n;
}

// Hugging Face's shape of the tensor
static int hf_shape(const HFTensor *t, int64_t shape[2]) {
    if (t->ndim == 1) { shape[0] = (int64_t)t->rows * t->cols; return 1; }
    shape[0] = t->conv1d ? t->cols : t->rows;
    shape[1] = t->conv1d ? t->rows : t->cols;
    return 2;
}

// Where element (r, c) of the tensor's zeroc rows, r in [0, rows), sits in Hugging Face's layout.
static size_t hf_index(const HFTensor *t, int r, int c) {
    if (t->rope_hd) {   // within each head: interleaved row 2i + s -> half-split row s*hd/2 + i
        int hd = t->rope_hd, j = r % hd;
        r = r - j + (j % 2) * (hd / 2) + j / 2;
    }
    return t->conv1d ? (size_t)c * t->rows + r : (size_t)r * t->cols + c;
}

// ----------------------------------------------------------------------------
// dtypes: what a checkpoint may hold, to fp32

static int hf_dtype_readable(int dtype) { return dtype == ST_F32 || dtype == ST_BF16 || dtype == ST_F16; }

static void hf_to_f32(int dtype, const void *src, size_t n, float *dst) {
    if (dtype == ST_F32) { memcpy(dst, src, n * 4); return; }
    const uint16_t *h = (const uint16_t *)src;
    for (size_t i = 0; i < n; i++) dst[i] = dtype == ST_BF16 ? bf16_to_float(h[i]) : fp16_to_float(h[i]);
}

// ----------------------------------------------------------------------------
// import: --init X.safetensors; model_file_read in train/checkpoint.h dispatches here

// buffers a checkpoint's own tensors carry that are not parameters
static int hf_ignorable(int arch, const char *name) {
    size_t n = strlen(name);
#define ENDS(s) (n >= strlen(s) && strcmp(name + n - strlen(s), s) == 0)
    return arch == ARCH_GPT2 ? ENDS(".attn.bias") || ENDS(".attn.masked_bias") : ENDS(".rotary_emb.inv_freq");
#undef ENDS
}

// A tensor of the file against the entry it is to fill: its shape and a readable dtype.
static int hf_check_tensor(const STFile *s, const STTensor *t, const HFTensor *e, char *err, size_t errn) {
    char a[64], b[64];
    int64_t shape[2];
    int ndim = hf_shape(e, shape);
    if (t->ndim != ndim || memcmp(t->shape, shape, sizeof(int64_t) * ndim) != 0) {
        snprintf(err, errn, "%.500s: tensor %s has shape %s, this model needs %s (sizes from config.json)", s->path, t->name,
                 st_shape_str(t->shape, t->ndim, a, sizeof(a)), st_shape_str(shape, ndim, b, sizeof(b)));
        return 0;
    }
    if (!hf_dtype_readable(t->dtype)) {
        snprintf(err, errn, "%s: tensor %s has dtype %s; zeroc reads F32, BF16 and F16", s->path, t->name, ST_DTYPE_NAMES[t->dtype]);
        return 0;
    }
    return 1;
}

// A checked tensor of the file as fp32, its values checked finite. raw: scratch.
static int hf_read_f32(STFile *s, const STTensor *t, void *raw, float *out, char *err, size_t errn) {
    if (!st_read_raw(s, t, raw, err, errn)) return 0;
    hf_to_f32(t->dtype, raw, t->numel, out);
    for (size_t i = 0; i < t->numel; i++)
        if (!isfinite(out[i])) { snprintf(err, errn, "%s: tensor %s: non-finite value at element %zu", s->path, t->name, i); return 0; }
    return 1;
}

// --init X.safetensors as a source of parameter ranges (ParamSource, model/model.h), so that under
// ZeRO a rank reads only the slices it holds, as it does from zeroc's own model file. Opening
// checks the file against the model c, which parse_args took from the config.json beside it,
// from the header alone: every tensor present, of the right shape and a readable dtype, none
// unexpected. The names may come with or without their model's prefix, since OpenAI's GPT-2
// files say h.0.attn... rather than transformer.h.0.attn.... GPT-2's attn.bias and
// attn.masked_bias and LLaMA's rotary_emb.inv_freq buffers are skipped. With tied embeddings
// llama's lm_head is served from embed_tokens. A read converts only the tensors its range
// touches, one at a time, checking their values finite: a rank holds its slices and one
// tensor, never the model.
typedef struct {
    ModelLayout L;
    STFile s;
    HFTensor *map;          // zeroc's tensors in flat order (hf_tensors)
    const STTensor **src;   // the file's tensor behind each; embed_tokens for llama's tied lm_head
    int n;
    const STTensor *cached; // the tensor whose fp32 values buf holds; NULL: none
    float *buf;
    void *raw;
} HFSource;

static void hf_source_close(HFSource *h) {
    free(h->map); free(h->src); free(h->buf); free(h->raw);
    if (h->s.f) st_close(&h->s);
    model_layout_free(&h->L);
    memset(h, 0, sizeof(*h));
}

// the fp32 values of file tensor t into h->buf
static int hf_source_load(HFSource *h, const STTensor *t, char *err, size_t errn) {
    if (h->cached == t) return 1;
    h->cached = NULL;
    if (!hf_read_f32(&h->s, t, h->raw, h->buf, err, errn)) return 0;
    h->cached = t;
    return 1;
}

// Returns 1, or 0 with a one-line err naming the file and the tensor.
static int hf_source_open(HFSource *h, const char *path, const ModelConfig *c, char *err, size_t errn) {
    memset(h, 0, sizeof(*h));
    model_layout_build(&h->L, c);
    char cfg_path[1100];
    hf_config_path(path, cfg_path, sizeof(cfg_path));
    ModelConfig fc;
    int tied;
    hf_config_read(cfg_path, &fc, &tied);
    if (!st_open(&h->s, path, err, errn)) { h->s.f = NULL; hf_source_close(h); return 0; }
    h->map = (HFTensor *)xmalloc(sizeof(HFTensor) * hf_max_tensors(&h->L), "tensor map");
    h->n = hf_tensors(&h->L, h->map);
    h->src = (const STTensor **)xcalloc(sizeof(STTensor *) * h->n, "tensor map");
    size_t max_numel = 1;
    for (int i = 0; i < h->s.n; i++) if (h->s.t[i].numel > max_numel) max_numel = h->s.t[i].numel;
    h->buf = (float *)xmalloc(max_numel * 4, "import buffer");
    h->raw = xmalloc(max_numel * 4, "import buffer");
    char *used = (char *)xcalloc(h->s.n + 1, "import");
    // the file's naming: with the model's prefix, as save_pretrained writes, or without, as OpenAI's GPT-2
    const char *prefix = c->arch == ARCH_GPT2 ? "transformer." : "model.";
    size_t plen = strlen(prefix);
    int strip = !st_find(&h->s, h->map[0].name) && st_find(&h->s, h->map[0].name + plen);
    int ok = 1;
    for (int i = 0; i < h->n && ok; i++) {
        const HFTensor *e = &h->map[i];
        int lm_from_embed = tied && c->arch == ARCH_LLAMA && strcmp(e->name, "lm_head.weight") == 0;
        const HFTensor *named = lm_from_embed ? &h->map[0] : e;   // map[0]: the embedding, the same shape
        const char *name = strip && strncmp(named->name, prefix, plen) == 0 ? named->name + plen : named->name;
        const STTensor *t = st_find(&h->s, name);
        if (!t) { snprintf(err, errn, "%s: missing tensor %s", path, name); ok = 0; }
        else if ((ok = hf_check_tensor(&h->s, t, e, err, errn))) {
            h->src[i] = t;
            used[t - h->s.t] = 1;
        }
    }
    for (int i = 0; i < h->s.n && ok; i++) {
        if (used[i] || hf_ignorable(c->arch, h->s.t[i].name)) continue;
        if (tied && strcmp(h->s.t[i].name, "lm_head.weight") == 0) {
            // some exports store a tied head anyway: it must be the embedding
            float *embed = (float *)xmalloc(h->src[0]->numel * 4, "embedding copy");
            ok = hf_check_tensor(&h->s, &h->s.t[i], &h->map[0], err, errn) && hf_source_load(h, h->src[0], err, errn);
            if (ok) memcpy(embed, h->buf, h->src[0]->numel * 4);
            ok = ok && hf_source_load(h, &h->s.t[i], err, errn);
            if (ok && memcmp(h->buf, embed, h->s.t[i].numel * 4) != 0) {
                snprintf(err, errn, "%s: lm_head.weight differs from the embedding, but config.json ties them (tie_word_embeddings)", path);
                ok = 0;
            }
            free(embed);
            continue;
        }
        snprintf(err, errn, "%s: unexpected tensor %s (not part of zeroc's %s)", path, h->s.t[i].name, arch_name(c->arch));
        ok = 0;
    }
    free(used);
    if (!ok) hf_source_close(h);
    return ok;
}

// Elements [lo, lo + n) of unit u in zeroc's layout into out, with zeros where no tensor
// is: the vocabulary's padding rows and the plan's padding. Returns 1, or 0 with err.
static int hf_source_read(HFSource *h, int u, size_t lo, size_t n, float *out, char *err, size_t errn) {
    memset(out, 0, n * sizeof(float));
    for (int i = 0; i < h->n; i++) {
        const HFTensor *e = &h->map[i];
        if (e->unit != u) continue;
        size_t start = h->L.units[u].t[e->k].offset + (size_t)e->row0 * e->cols, len = (size_t)e->rows * e->cols;
        size_t a = start > lo ? start : lo, z = start + len < lo + n ? start + len : lo + n;
        if (a >= z) continue;
        if (!hf_source_load(h, h->src[i], err, errn)) return 0;
        for (size_t x = a; x < z; x++) {
            size_t r = (x - start) / e->cols, cc = (x - start) % e->cols;
            out[x - lo] = h->buf[hf_index(e, (int)r, (int)cc)];
        }
    }
    return 1;
}
