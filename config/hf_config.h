// config/hf_config.h: Hugging Face's config.json for zeroc's two architectures,
// GPT2Config for gpt2 and LlamaConfig for llama, and what it means for
// --init X.safetensors: the model's architecture and sizes come from the
// config.json beside X, and flags given explicitly must agree with it.
//
// config/flags.h's parse_args calls hf_config_for_init.
//
// Keys read, with transformers' defaults where a key is absent:
//   gpt2:  n_layer n_head n_embd n_inner (null: 4 n_embd) n_positions vocab_size layer_norm_epsilon;
//          activation_function must be gelu_new (or gelu_pytorch_tanh, the same function),
//          scale_attn_weights true, scale_attn_by_inverse_layer_idx false, tie_word_embeddings true
//   llama: num_hidden_layers num_attention_heads num_key_value_heads hidden_size intermediate_size
//          head_dim (= hidden_size / heads) max_position_embeddings vocab_size rms_norm_eps
//          rope_theta (or rope_parameters.rope_theta); hidden_act silu, no attention/mlp bias,
//          no rope scaling; tie_word_embeddings (true: lm_head starts as a copy of embed_tokens)
#pragma once
#include "config/train_config.h"
#include "config/json.h"
#include "formats/safetensors.h"

// the config.json beside a weights file
static void hf_config_path(const char *weights, char *out, size_t n) {
    const char *slash = strrchr(weights, '/');
    if (slash) snprintf(out, n, "%.*s/config.json", (int)(slash - weights), weights);
    else snprintf(out, n, "config.json");
}

// key absent or null: dflt; else an integer in [lo, hi]
static int hf_int(cJSON *root, const char *path, const char *key, int dflt, int lo, int hi) {
    cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) return dflt;
    if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) || j->valuedouble < lo || j->valuedouble > hi)
        fatal("%s: \"%s\" must be an integer in [%d, %d]", path, key, lo, hi);
    return (int)j->valuedouble;
}

// key absent or null: dflt; else a positive number that a 32-bit float (the model's type) holds
// as a normal number
static float hf_float(cJSON *root, const char *path, const char *key, float dflt) {
    cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) return dflt;
    if (!cJSON_IsNumber(j) || !(j->valuedouble > 0)) fatal("%s: \"%s\" must be a positive number", path, key);
    float f = (float)j->valuedouble;
    if (!isnormal(f))
        fatal("%s: \"%s\" is %g, which is %g as the 32-bit float it is used as: expected a positive number in [1.2e-38, 3.4028235e38]",
              path, key, j->valuedouble, (double)f);
    return f;
}

static int hf_bool(cJSON *root, const char *path, const char *key, int dflt) {
    cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) return dflt;
    if (!cJSON_IsBool(j)) fatal("%s: \"%s\" must be true or false", path, key);
    return cJSON_IsTrue(j);
}

static const char *hf_str(cJSON *root, const char *key) {
    cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

// rope_scaling / rope_parameters: only the default (unscaled) rotary embedding is zeroc's
static void hf_check_rope_type(cJSON *root, const char *path, const char *key) {
    cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) return;
    const char *type = cJSON_IsObject(j) ? hf_str(j, "rope_type") : NULL;
    if (!type && cJSON_IsObject(j)) type = hf_str(j, "type");
    if (!type || strcmp(type, "default") != 0)
        fatal("%s: \"%s\" asks for %s RoPE scaling: zeroc implements the default rotary embedding only", path, key,
              type ? type : "an unknown");
}

// Reads config.json into m (all of ModelConfig); *tied: the output head is the embedding.
// Every problem is a one-line fatal error naming the file and the key.
static void hf_config_read(const char *path, ModelConfig *m, int *tied) {
    cJSON *root = json_parse_file_or_die(path);
    const char *type = hf_str(root, "model_type");
    cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const char *arch0 = cJSON_IsArray(archs) && cJSON_IsString(cJSON_GetArrayItem(archs, 0)) ? cJSON_GetArrayItem(archs, 0)->valuestring : NULL;
    if (!type && arch0) type = strcmp(arch0, "GPT2LMHeadModel") == 0 ? "gpt2" : strcmp(arch0, "LlamaForCausalLM") == 0 ? "llama" : arch0;
    if (!type) fatal("%s: no \"model_type\" (gpt2 or llama)", path);
    memset(m, 0, sizeof(*m));
    m->rope_theta = 10000.0f;   // zeroc's value (gpt2 ignores it; the model file records it)
    if (strcmp(type, "gpt2") == 0) {
        m->arch = ARCH_GPT2;
        m->n_layer = hf_int(root, path, "n_layer", 12, 1, 1024);
        m->n_head = m->n_kv_head = hf_int(root, path, "n_head", 12, 1, 1024);
        m->d_model = hf_int(root, path, "n_embd", 768, 1, 65536);
        m->d_ff = hf_int(root, path, "n_inner", 4 * m->d_model, 1, 1 << 20);
        m->max_seq = hf_int(root, path, "n_positions", 1024, 1, 1 << 20);
        m->vocab_size = hf_int(root, path, "vocab_size", 50257, 2, 65536);
        m->norm_eps = hf_float(root, path, "layer_norm_epsilon", 1e-5f);
        const char *act = hf_str(root, "activation_function");
        if (act && strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh"))
            fatal("%s: \"activation_function\" is \"%s\": zeroc's gpt2 uses the tanh GELU (gelu_new)", path, act);
        if (!hf_bool(root, path, "scale_attn_weights", 1)) fatal("%s: \"scale_attn_weights\" false is not zeroc's attention", path);
        if (hf_bool(root, path, "scale_attn_by_inverse_layer_idx", 0)) fatal("%s: \"scale_attn_by_inverse_layer_idx\" is not zeroc's attention", path);
        if (!hf_bool(root, path, "tie_word_embeddings", 1)) fatal("%s: \"tie_word_embeddings\" false: zeroc's gpt2 ties its output head to wte", path);
        *tied = 1;
    } else if (strcmp(type, "llama") == 0) {
        m->arch = ARCH_LLAMA;
        m->n_layer = hf_int(root, path, "num_hidden_layers", 32, 1, 1024);
        m->n_head = hf_int(root, path, "num_attention_heads", 32, 1, 1024);
        m->n_kv_head = hf_int(root, path, "num_key_value_heads", m->n_head, 1, 1024);
        m->d_model = hf_int(root, path, "hidden_size", 4096, 1, 65536);
        m->d_ff = hf_int(root, path, "intermediate_size", 11008, 1, 1 << 20);
        m->max_seq = hf_int(root, path, "max_position_embeddings", 2048, 1, 1 << 20);
        m->vocab_size = hf_int(root, path, "vocab_size", 32000, 2, 65536);
        m->norm_eps = hf_float(root, path, "rms_norm_eps", 1e-6f);
        cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");   // transformers 5
        m->rope_theta = cJSON_IsObject(rp) ? hf_float(rp, path, "rope_theta", hf_float(root, path, "rope_theta", 10000.0f))
                                           : hf_float(root, path, "rope_theta", 10000.0f);
        hf_check_rope_type(root, path, "rope_scaling");
        hf_check_rope_type(root, path, "rope_parameters");
        const char *act = hf_str(root, "hidden_act");
        if (act && strcmp(act, "silu")) fatal("%s: \"hidden_act\" is \"%s\": zeroc's llama MLP is SwiGLU (silu)", path, act);
        if (hf_bool(root, path, "attention_bias", 0)) fatal("%s: \"attention_bias\" true: zeroc's llama has no biases", path);
        if (hf_bool(root, path, "mlp_bias", 0)) fatal("%s: \"mlp_bias\" true: zeroc's llama has no biases", path);
        if (m->d_model % m->n_head == 0 && hf_int(root, path, "head_dim", m->d_model / m->n_head, 1, 65536) != m->d_model / m->n_head)
            fatal("%s: \"head_dim\" must be hidden_size / num_attention_heads = %d in zeroc", path, m->d_model / m->n_head);
        *tied = hf_bool(root, path, "tie_word_embeddings", 0);
    } else {
        fatal("%s: model_type \"%s\" is not supported (gpt2, llama)", path, type);
    }
    if (m->d_model % m->n_head) fatal("%s: width %d is not divisible by %d heads", path, m->d_model, m->n_head);
    if (m->n_head % m->n_kv_head) fatal("%s: %d heads are not divisible by %d key/value heads", path, m->n_head, m->n_kv_head);
    if (m->arch == ARCH_LLAMA && (m->d_model / m->n_head) % 2) fatal("%s: head dimension %d must be even for RoPE", path, m->d_model / m->n_head);
    m->padded_vocab = round_up(m->vocab_size, 128);
    cJSON_Delete(root);
}

// the shortest decimal that reads back as this float (1e-05, not 9.9999997473787516e-06; 10000.0)
static cJSON *hf_float_json(float x) {
    char buf[48];
    if (x == floorf(x) && fabsf(x) < 1e9f) snprintf(buf, sizeof(buf), "%.1f", x);   // 10000.0
    else
        for (int p = 1; p <= 9; p++) {
            snprintf(buf, sizeof(buf), "%.*g", p, x);
            if (strtof(buf, NULL) == x) break;
        }
    return cJSON_CreateRaw(buf);
}

// config.json for GPT2LMHeadModel or LlamaForCausalLM describing m, as transformers' save_pretrained
// would write it, with dropout 0 since zeroc has none. torch_dtype: "float32" or "bfloat16".
static void hf_config_write(const ModelConfig *m, const char *path, const char *torch_dtype) {
    cJSON *j = cJSON_CreateObject();
    cJSON *archs = cJSON_AddArrayToObject(j, "architectures");
    int gpt2 = m->arch == ARCH_GPT2;
    cJSON_AddItemToArray(archs, cJSON_CreateString(gpt2 ? "GPT2LMHeadModel" : "LlamaForCausalLM"));
    cJSON_AddStringToObject(j, "model_type", gpt2 ? "gpt2" : "llama");
    cJSON_AddNumberToObject(j, "vocab_size", m->vocab_size);
    if (gpt2) {
        cJSON_AddNumberToObject(j, "n_layer", m->n_layer);
        cJSON_AddNumberToObject(j, "n_head", m->n_head);
        cJSON_AddNumberToObject(j, "n_embd", m->d_model);
        cJSON_AddNumberToObject(j, "n_inner", m->d_ff);
        cJSON_AddNumberToObject(j, "n_positions", m->max_seq);
        cJSON_AddNumberToObject(j, "n_ctx", m->max_seq);
        cJSON_AddStringToObject(j, "activation_function", "gelu_new");
        cJSON_AddItemToObject(j, "layer_norm_epsilon", hf_float_json(m->norm_eps));
        cJSON_AddItemToObject(j, "resid_pdrop", hf_float_json(0.0f));
        cJSON_AddItemToObject(j, "embd_pdrop", hf_float_json(0.0f));
        cJSON_AddItemToObject(j, "attn_pdrop", hf_float_json(0.0f));
        cJSON_AddTrueToObject(j, "scale_attn_weights");
        cJSON_AddFalseToObject(j, "scale_attn_by_inverse_layer_idx");
        cJSON_AddFalseToObject(j, "reorder_and_upcast_attn");
        cJSON_AddTrueToObject(j, "tie_word_embeddings");
    } else {
        cJSON_AddNumberToObject(j, "num_hidden_layers", m->n_layer);
        cJSON_AddNumberToObject(j, "num_attention_heads", m->n_head);
        cJSON_AddNumberToObject(j, "num_key_value_heads", m->n_kv_head);
        cJSON_AddNumberToObject(j, "hidden_size", m->d_model);
        cJSON_AddNumberToObject(j, "head_dim", m->d_model / m->n_head);
        cJSON_AddNumberToObject(j, "intermediate_size", m->d_ff);
        cJSON_AddNumberToObject(j, "max_position_embeddings", m->max_seq);
        cJSON_AddStringToObject(j, "hidden_act", "silu");
        cJSON_AddItemToObject(j, "rms_norm_eps", hf_float_json(m->norm_eps));
        cJSON_AddItemToObject(j, "rope_theta", hf_float_json(m->rope_theta));
        cJSON_AddNullToObject(j, "rope_scaling");
        cJSON_AddFalseToObject(j, "attention_bias");
        cJSON_AddFalseToObject(j, "mlp_bias");
        cJSON_AddItemToObject(j, "attention_dropout", hf_float_json(0.0f));
        cJSON_AddNumberToObject(j, "pretraining_tp", 1);
        cJSON_AddFalseToObject(j, "tie_word_embeddings");
    }
    cJSON_AddItemToObject(j, "initializer_range", hf_float_json(0.02f));
    if (m->vocab_size > 50256) {   // GPT-2's <|endoftext|>, the token zeroc's data puts before every document
        cJSON_AddNumberToObject(j, "bos_token_id", 50256);
        cJSON_AddNumberToObject(j, "eos_token_id", 50256);
    }
    cJSON_AddStringToObject(j, "torch_dtype", torch_dtype);
    cJSON_AddTrueToObject(j, "use_cache");
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    AtomicFile a = atomic_open(path);
    fwrite_or_die(text, 1, strlen(text), a.f, a.tmp);
    fwrite_or_die("\n", 1, 1, a.f, a.tmp);
    atomic_commit(&a);
    free(text);
}

// parse_args: with --init X.safetensors the model is the one X's config.json describes
// (config_take_model: a flag that disagrees is an error).
static void hf_config_for_init(TrainConfig *c, int argc, char **argv) {
    if (!c->init_path[0] || !st_sniff(c->init_path)) return;
    char path[1100];
    hf_config_path(c->init_path, path, sizeof(path));
    ModelConfig hf;
    int tied;
    hf_config_read(path, &hf, &tied);
    config_take_model(c, &hf, "config.json's", path, argc, argv);
    snprintf(c->preset, sizeof(c->preset), "config.json");
}
