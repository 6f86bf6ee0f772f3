// config/model_config.h: the model's architecture and sizes (ModelConfig) and the
// named presets that fill them in (--preset).
#pragma once
#include "util/common.h"
#include <cjson/cJSON.h>

// ----------------------------------------------------------------------------
// model

enum { ARCH_GPT2 = 0, ARCH_LLAMA = 1 };

typedef struct {
    int arch;          // ARCH_GPT2 or ARCH_LLAMA
    int n_layer;
    int n_head;
    int n_kv_head;     // grouped-query attention: n_head % n_kv_head == 0 (gpt2: == n_head)
    int d_model;       // C
    int d_ff;          // MLP hidden width (gpt2: 4C; llama: SwiGLU width)
    int vocab_size;    // V: real vocabulary (GPT-2: 50257)
    int padded_vocab;  // Vp: V rounded up to a multiple of 128 (rows >= V stay zero, logits masked)
    int max_seq;       // maximum sequence length (gpt2: rows of the position table)
    float norm_eps;    // LayerNorm / RMSNorm epsilon
    float rope_theta;  // llama rotary base
} ModelConfig;

static const char *arch_name(int arch) { return arch == ARCH_LLAMA ? "llama" : "gpt2"; }

// The architecture and sizes into the JSON object o, by these names: a checkpoint's manifest
// and the log's config record describe the model alike.
static void model_config_json(cJSON *o, const ModelConfig *mc) {
    cJSON_AddStringToObject(o, "arch", arch_name(mc->arch));
    cJSON_AddNumberToObject(o, "n_layer", mc->n_layer);
    cJSON_AddNumberToObject(o, "n_head", mc->n_head);
    cJSON_AddNumberToObject(o, "n_kv_head", mc->n_kv_head);
    cJSON_AddNumberToObject(o, "d_model", mc->d_model);
    cJSON_AddNumberToObject(o, "d_ff", mc->d_ff);
    cJSON_AddNumberToObject(o, "vocab_size", mc->vocab_size);
    cJSON_AddNumberToObject(o, "max_seq", mc->max_seq);
}

// d_ff defaults: gpt2 4C; llama 8C/3 rounded up to a multiple of 64
static int default_ffn(int arch, int C) { return arch == ARCH_LLAMA ? (int)round_up(8 * C / 3, 64) : 4 * C; }

typedef struct { const char *name; int n_layer, n_head, n_kv_head_llama, d_model, max_seq; const char *what; } Preset;

static const Preset PRESETS[] = {
    {"tiny",      2,  4, 2,   64,   64, "2 layers, 4 heads, C=64: tests"},
    {"mini",      4,  4, 2,   64,   64, "4 layers, 4 heads, C=64: the CPU demo (llama)"},
    {"small",     4,  4, 2,  128,  128, "4 layers, 4 heads, C=128"},
    {"gpt2-124m", 12, 12, 4, 768, 1024, "GPT-2 small (124M with gpt2), the GPU demo"},
    {"gpt2-350m", 24, 16, 4, 1024, 1024, "GPT-2 medium"},
};
#define N_PRESETS ((int)(sizeof(PRESETS) / sizeof(PRESETS[0])))

static int model_apply_preset(ModelConfig *m, int arch, const char *name) {
    for (int i = 0; i < N_PRESETS; i++) {
        if (strcmp(PRESETS[i].name, name) != 0) continue;
        const Preset *p = &PRESETS[i];
        m->arch = arch;
        m->n_layer = p->n_layer;
        m->n_head = p->n_head;
        m->n_kv_head = arch == ARCH_LLAMA ? p->n_kv_head_llama : p->n_head;
        m->d_model = p->d_model;
        m->d_ff = default_ffn(arch, p->d_model);
        m->vocab_size = 50257;
        m->padded_vocab = (int)round_up(m->vocab_size, 128);
        m->max_seq = p->max_seq;
        m->norm_eps = 1e-5f;
        m->rope_theta = 10000.0f;
        return 1;
    }
    return 0;
}
