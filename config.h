// config.h: the model and training configuration, the named presets, the
// learning-rate schedules and the command line, shared by train_gpt_cpu,
// train_gpt (CUDA) and mirrored flag for flag by scripts/train_gpt.py.
//
// Precedence: preset < --config FILE (DeepSpeed-style JSON) < explicit flags.
#pragma once
#include "common.h"
#include <cjson/cJSON.h>

#ifndef ZERO_STAGE
#define ZERO_STAGE 0
#endif
#ifndef OFFLOAD
#define OFFLOAD 0       // make train_gpt OFFLOAD=1: optimizer offload on by default (--offload 0 turns it off)
#endif

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

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

// d_ff defaults: gpt2 4C; llama 8C/3 rounded up to a multiple of 64
static int default_ffn(int arch, int C) { return arch == ARCH_LLAMA ? round_up(8 * C / 3, 64) : 4 * C; }

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
        m->padded_vocab = round_up(m->vocab_size, 128);
        m->max_seq = p->max_seq;
        m->norm_eps = 1e-5f;
        m->rope_theta = 10000.0f;
        return 1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// training

enum { SCHED_COSINE = 0, SCHED_CONSTANT, SCHED_WARMUP_LR, SCHED_WARMUP_DECAY_LR };
static const char *SCHED_NAMES[] = {"cosine", "constant", "WarmupLR", "WarmupDecayLR"};

typedef struct {
    ModelConfig model;
    char arch[16], preset[32];
    // data
    char train_path[512], val_path[512];   // a shard, a directory of shards or a glob (dataloader.h)
    int shuffle;          // per epoch: shard order and each shard's sequences, seeded by seed
    int B, T, accum;
    int total_batch;      // global sequences per step; 0: derived as B * accum * world
    int steps;
    // optimizer (AdamW, DeepSpeed/PyTorch semantics)
    float lr, beta1, beta2, eps, weight_decay, grad_clip;  // grad_clip <= 0: off
    // schedule
    int sched, warmup, warmup_log;  // warmup_log: WarmupLR's "log" warmup type
    float min_lr_frac;    // cosine floor as a fraction of lr; WarmupLR's warmup_min_lr = lr * min_lr_frac
    // run
    uint64_t seed;
    char init_path[512], save_dir[512], resume_dir[512], log_path[512], config_path[512];
    int save_every, threads;
    int val_every, val_batches, sample_every, sample_len;
    int quiet;
    // ZeRO (see zero.h)
    int zero_stage;                 // must equal the compiled ZERO_STAGE
    long long persistence_threshold;// stage3_param_persistence_threshold
    long long max_live_elems;       // stage3_max_live_parameters
    int prefetch;                   // stage-3 prefetch of the next unit (overlap_comm)
    int offload;                    // optimizer offload to CPU-Adam (GPU trainer)
    int offload_param;              // stage 3: parameter shards in pinned host memory (GPU trainer)
    int estimate_world;             // --estimate-memory N: print the per-rank memory of every stage at N ranks, exit
    char comm[8];                   // "nccl" or "mpi" (GPU trainer)
    char tokenizer_path[512];
} TrainConfig;

static void train_config_defaults(TrainConfig *c) {
    memset(c, 0, sizeof(*c));
    strcpy(c->arch, "gpt2");
    strcpy(c->preset, "tiny");
    strcpy(c->train_path, "data/brown/train.bin");
    strcpy(c->val_path, "data/brown/val.bin");
    strcpy(c->tokenizer_path, "data/gpt2_tokenizer.bin");
    c->B = 4; c->T = 64; c->accum = 1; c->steps = 50;
    c->lr = 6e-4f; c->beta1 = 0.9f; c->beta2 = 0.95f; c->eps = 1e-8f; c->weight_decay = 0.1f; c->grad_clip = 1.0f;
    c->sched = SCHED_COSINE; c->warmup = 0; c->min_lr_frac = 0.1f;
    c->seed = 1337;
    c->save_every = 0; c->threads = 0;
    c->val_every = 0; c->val_batches = 8; c->sample_every = 0; c->sample_len = 64;
    c->zero_stage = -1;  // not asked for: take the compiled stage
    c->persistence_threshold = 100000LL;
    c->max_live_elems = 1000000000LL;
    c->prefetch = 1;
    strcpy(c->comm, "nccl");
    c->offload = OFFLOAD;
}

// Learning rate for 0-based step index `it` of `total` steps.
//   cosine:        linear warmup (it+1)/W, then cosine from lr to lr*min_lr_frac (nanoGPT/llm.c)
//   constant:      lr
//   WarmupLR:      DeepSpeed: min + (max-min) * gamma, gamma = log(it+1)/log(W) or it/W, flat after W
//   WarmupDecayLR: WarmupLR, then linear decay to 0 at `total`
static float lr_at(const TrainConfig *c, int it, int total) {
    double lr = c->lr, W = c->warmup;
    switch (c->sched) {
    case SCHED_CONSTANT: return (float)lr;
    case SCHED_COSINE: {
        if (it < c->warmup) return (float)(lr * (it + 1) / W);
        double min_lr = lr * c->min_lr_frac;
        if (total <= c->warmup + 1) return (float)lr;
        double ratio = (double)(it - c->warmup) / (double)(total - 1 - c->warmup);
        if (ratio > 1) ratio = 1;
        return (float)(min_lr + 0.5 * (1.0 + cos(M_PI * ratio)) * (lr - min_lr));
    }
    default: {
        double min_lr = lr * c->min_lr_frac;
        if (it < c->warmup) {
            double gamma = c->warmup_log ? log(it + 1.0) / log(W) : it / W;
            return (float)(min_lr + (lr - min_lr) * gamma);
        }
        if (c->sched == SCHED_WARMUP_LR) return (float)lr;
        double frac = (double)(total - it) / (double)(total - c->warmup);
        if (frac < 0) frac = 0;
        return (float)(lr * frac);
    }
    }
}

// ----------------------------------------------------------------------------
// command line

static void print_help(const char *prog) {
    printf("usage: %s [flags]\n\n", prog);
    printf("model\n"
           "  --arch gpt2|llama        architecture (default gpt2)\n"
           "  --preset NAME            model size preset (default tiny):\n");
    for (int i = 0; i < N_PRESETS; i++) printf("                             %-10s %s\n", PRESETS[i].name, PRESETS[i].what);
    printf("  --layers N --heads N --kv-heads N --dim N --ffn N --vocab N --max-seq N\n"
           "                           override one size of the preset\n"
           "data\n"
           "  --train PATH --val PATH  a token shard, a directory of shards or a glob (default data/brown/{train,val}.bin)\n"
           "  --shuffle 0|1            shuffle shard order and sequences each epoch, seeded by --seed (default 0)\n"
           "  --batch B                micro batch per rank (default 4)\n"
           "  --seq T                  sequence length (default 64)\n"
           "  --accum K                gradient accumulation steps (default 1)\n"
           "  --total-batch N          global sequences per step; sets --accum = N / (B * world)\n"
           "optimizer and schedule\n"
           "  --steps N --lr X --beta1 X --beta2 X --eps X --weight-decay X --clip X (0: off)\n"
           "  --lr-schedule cosine|constant|WarmupLR|WarmupDecayLR  --warmup N\n"
           "  --warmup-type linear|log --min-lr-frac X\n"
           "run\n"
           "  --seed S --init FILE --save DIR --save-every N --resume DIR --log FILE\n"
           "  --threads N --val-every N --val-batches N --sample-every N --sample-len N\n"
           "  --tokenizer FILE --config FILE (DeepSpeed-style JSON) --quiet\n"
           "ZeRO (compiled stage: %d)\n"
           "  --zero-stage K           must equal the compiled stage (make ZERO=K)\n"
           "  --persistence-threshold N  stage 3: units this small stay whole\n"
           "  --max-live N             stage 3: cap on gathered parameter elements\n"
           "  --prefetch 0|1           stage 3: prefetch the next unit (default 1)\n"
           "  --offload 0|1            optimizer state on the CPU (GPU trainer)\n"
           "  --offload-param 0|1      stage 3: parameter shards in host memory (GPU trainer)\n"
           "  --estimate-memory N      print per-rank model-state bytes of every stage at N ranks, allocate nothing, exit\n"
           "  --comm nccl|mpi          GPU collective backend\n", ZERO_STAGE);
}

static int parse_int_or_die(const char *flag, const char *s, long long lo, long long hi) {
    char *end; errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        fatal("%s: expected an integer in [%lld, %lld], got '%s'", flag, lo, hi, s);
    return (int)v;
}
static long long parse_ll_or_die(const char *flag, const char *s) {
    char *end; errno = 0;
    double v = strtod(s, &end);  // accepts 5e8
    if (errno || *end || end == s || v < 0 || v > 9e18) fatal("%s: expected a non-negative count, got '%s'", flag, s);
    return (long long)v;
}
static float parse_float_or_die(const char *flag, const char *s) {
    char *end; errno = 0;
    float v = strtof(s, &end);
    if (errno || *end || end == s || !isfinite(v)) fatal("%s: expected a number, got '%s'", flag, s);
    return v;
}
static void copy_str_or_die(char *dst, size_t n, const char *flag, const char *s) {
    if (strlen(s) >= n) fatal("%s: value too long", flag);
    strcpy(dst, s);
}
static int sched_from_name(const char *flag, const char *s) {
    for (int i = 0; i < 4; i++) if (strcmp(s, SCHED_NAMES[i]) == 0) return i;
    fatal("%s: unknown schedule '%s' (cosine, constant, WarmupLR, WarmupDecayLR)", flag, s);
    return 0;
}

// A DeepSpeed-style config file: the keys we honour are listed in README.md.
static void apply_json_config(TrainConfig *c, const char *path, int print_rank) {
    FILE *f = fopen_or_die(path, "rb");
    long long n = file_size_or_die(f, path);
    if (n > (1 << 24)) fatal("%s: config file too large", path);
    char *text = (char *)xmalloc(n + 1, "config text");
    fread_or_die(text, 1, n, f, path, "config");
    text[n] = 0;
    fclose(f);
    cJSON *root = cJSON_Parse(text);
    if (!root || !cJSON_IsObject(root)) fatal("%s: not a JSON object (near '%.20s')", path, cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "");
#define JNUM(obj, key) ({ cJSON *_j = cJSON_GetObjectItemCaseSensitive(obj, key); \
        (_j && !cJSON_IsNumber(_j)) ? (fatal("%s: \"%s\" must be a number", path, key), (cJSON *)0) : _j; })
    cJSON *j;
    if ((j = JNUM(root, "train_micro_batch_size_per_gpu"))) c->B = j->valueint;
    if ((j = JNUM(root, "gradient_accumulation_steps"))) c->accum = j->valueint;
    if ((j = JNUM(root, "train_batch_size"))) c->total_batch = j->valueint;
    if ((j = JNUM(root, "gradient_clipping"))) c->grad_clip = (float)j->valuedouble;
    cJSON *zo = cJSON_GetObjectItemCaseSensitive(root, "zero_optimization");
    if (zo) {
        if ((j = JNUM(zo, "stage"))) c->zero_stage = j->valueint;
        // zeroc's reduce bucket is one unit (a transformer layer): zero.h reduces each unit's
        // gradient as its backward finishes, so DeepSpeed's bucket sizes have nothing to set
        if (JNUM(zo, "reduce_bucket_size") && print_rank)
            fprintf(stderr, "note: %s: reduce_bucket_size is not used (zeroc reduces one layer at a time)\n", path);
        if ((j = JNUM(zo, "stage3_param_persistence_threshold"))) c->persistence_threshold = (long long)j->valuedouble;
        if ((j = JNUM(zo, "stage3_max_live_parameters"))) c->max_live_elems = (long long)j->valuedouble;
        cJSON *oc = cJSON_GetObjectItemCaseSensitive(zo, "overlap_comm");
        if (oc) c->prefetch = cJSON_IsTrue(oc);
        cJSON *off = cJSON_GetObjectItemCaseSensitive(zo, "offload_optimizer");
        cJSON *dev = off ? cJSON_GetObjectItemCaseSensitive(off, "device") : NULL;
        if (dev && cJSON_IsString(dev)) c->offload = strcmp(dev->valuestring, "cpu") == 0;
        cJSON *offp = cJSON_GetObjectItemCaseSensitive(zo, "offload_param");
        cJSON *devp = offp ? cJSON_GetObjectItemCaseSensitive(offp, "device") : NULL;
        if (devp && cJSON_IsString(devp)) c->offload_param = strcmp(devp->valuestring, "cpu") == 0;
    }
    cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
    cJSON *op = opt ? cJSON_GetObjectItemCaseSensitive(opt, "params") : NULL;
    if (op) {
        if ((j = JNUM(op, "lr"))) c->lr = (float)j->valuedouble;
        if ((j = JNUM(op, "eps"))) c->eps = (float)j->valuedouble;
        if ((j = JNUM(op, "weight_decay"))) c->weight_decay = (float)j->valuedouble;
        cJSON *betas = cJSON_GetObjectItemCaseSensitive(op, "betas");
        if (betas) {
            if (!cJSON_IsArray(betas) || cJSON_GetArraySize(betas) != 2) fatal("%s: \"betas\" must be an array of two numbers", path);
            c->beta1 = (float)cJSON_GetArrayItem(betas, 0)->valuedouble;
            c->beta2 = (float)cJSON_GetArrayItem(betas, 1)->valuedouble;
        }
    }
    cJSON *sc = cJSON_GetObjectItemCaseSensitive(root, "scheduler");
    if (sc) {
        cJSON *type = cJSON_GetObjectItemCaseSensitive(sc, "type");
        if (type && cJSON_IsString(type)) c->sched = sched_from_name(path, type->valuestring);
        cJSON *sp = cJSON_GetObjectItemCaseSensitive(sc, "params");
        if (sp) {
            if ((j = JNUM(sp, "warmup_max_lr"))) c->lr = (float)j->valuedouble;
            if ((j = JNUM(sp, "warmup_num_steps"))) c->warmup = j->valueint;
            if ((j = JNUM(sp, "warmup_min_lr"))) c->min_lr_frac = c->lr > 0 ? (float)(j->valuedouble / c->lr) : 0;
            if ((j = JNUM(sp, "total_num_steps"))) c->steps = j->valueint;
            cJSON *wt = cJSON_GetObjectItemCaseSensitive(sp, "warmup_type");
            if (wt && cJSON_IsString(wt)) c->warmup_log = strcmp(wt->valuestring, "log") == 0;
        }
    }
#undef JNUM
    cJSON_Delete(root);
    free(text);
}

// Parse argv into c. Returns 0, or exits with a one-line error. --help prints and exits 0.
static void parse_args(TrainConfig *c, int argc, char **argv, int print_rank) {
    train_config_defaults(c);
    // pass 1: arch, preset and config file come first so that flags override them
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { if (print_rank) print_help(argv[0]); exit(0); }
        if (i + 1 >= argc) continue;
        if (strcmp(a, "--arch") == 0) copy_str_or_die(c->arch, sizeof(c->arch), a, argv[i + 1]);
        if (strcmp(a, "--preset") == 0) copy_str_or_die(c->preset, sizeof(c->preset), a, argv[i + 1]);
        if (strcmp(a, "--config") == 0) copy_str_or_die(c->config_path, sizeof(c->config_path), a, argv[i + 1]);
    }
    int arch;
    if (strcmp(c->arch, "gpt2") == 0) arch = ARCH_GPT2;
    else if (strcmp(c->arch, "llama") == 0) arch = ARCH_LLAMA;
    else fatal("--arch: unknown architecture '%s' (gpt2, llama)", c->arch);
    if (!model_apply_preset(&c->model, arch, c->preset)) fatal("--preset: unknown preset '%s' (see --help)", c->preset);
    if (c->config_path[0]) apply_json_config(c, c->config_path, print_rank);
    int ffn_set = 0;
    ModelConfig *m = &c->model;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) fatal("unexpected argument '%s' (see --help)", a);
        if (i + 1 >= argc) fatal("%s: missing value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--arch") || !strcmp(a, "--preset") || !strcmp(a, "--config")) continue;
        else if (!strcmp(a, "--layers")) m->n_layer = parse_int_or_die(a, v, 1, 1024);
        else if (!strcmp(a, "--heads")) m->n_head = parse_int_or_die(a, v, 1, 1024);
        else if (!strcmp(a, "--kv-heads")) m->n_kv_head = parse_int_or_die(a, v, 1, 1024);
        else if (!strcmp(a, "--dim")) m->d_model = parse_int_or_die(a, v, 1, 65536);
        else if (!strcmp(a, "--ffn")) { m->d_ff = parse_int_or_die(a, v, 1, 1 << 20); ffn_set = 1; }
        else if (!strcmp(a, "--vocab")) { m->vocab_size = parse_int_or_die(a, v, 2, 65536); m->padded_vocab = round_up(m->vocab_size, 128); }
        else if (!strcmp(a, "--max-seq")) m->max_seq = parse_int_or_die(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--train")) copy_str_or_die(c->train_path, sizeof(c->train_path), a, v);
        else if (!strcmp(a, "--val")) copy_str_or_die(c->val_path, sizeof(c->val_path), a, v);
        else if (!strcmp(a, "--shuffle")) c->shuffle = parse_int_or_die(a, v, 0, 1);
        else if (!strcmp(a, "--batch")) c->B = parse_int_or_die(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--seq")) c->T = parse_int_or_die(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--accum")) c->accum = parse_int_or_die(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--total-batch")) c->total_batch = parse_int_or_die(a, v, 1, 1 << 30);
        else if (!strcmp(a, "--steps")) c->steps = parse_int_or_die(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--lr")) c->lr = parse_float_or_die(a, v);
        else if (!strcmp(a, "--beta1")) c->beta1 = parse_float_or_die(a, v);
        else if (!strcmp(a, "--beta2")) c->beta2 = parse_float_or_die(a, v);
        else if (!strcmp(a, "--eps")) c->eps = parse_float_or_die(a, v);
        else if (!strcmp(a, "--weight-decay")) c->weight_decay = parse_float_or_die(a, v);
        else if (!strcmp(a, "--clip")) c->grad_clip = parse_float_or_die(a, v);
        else if (!strcmp(a, "--lr-schedule")) c->sched = sched_from_name(a, v);
        else if (!strcmp(a, "--warmup")) c->warmup = parse_int_or_die(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--warmup-type")) {
            if (strcmp(v, "log") && strcmp(v, "linear")) fatal("%s: expected linear or log, got '%s'", a, v);
            c->warmup_log = strcmp(v, "log") == 0;
        }
        else if (!strcmp(a, "--min-lr-frac")) c->min_lr_frac = parse_float_or_die(a, v);
        else if (!strcmp(a, "--seed")) c->seed = (uint64_t)parse_ll_or_die(a, v);
        else if (!strcmp(a, "--init")) copy_str_or_die(c->init_path, sizeof(c->init_path), a, v);
        else if (!strcmp(a, "--save")) copy_str_or_die(c->save_dir, sizeof(c->save_dir), a, v);
        else if (!strcmp(a, "--save-every")) c->save_every = parse_int_or_die(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--resume")) copy_str_or_die(c->resume_dir, sizeof(c->resume_dir), a, v);
        else if (!strcmp(a, "--log")) copy_str_or_die(c->log_path, sizeof(c->log_path), a, v);
        else if (!strcmp(a, "--threads")) c->threads = parse_int_or_die(a, v, 0, 4096);
        else if (!strcmp(a, "--val-every")) c->val_every = parse_int_or_die(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--val-batches")) c->val_batches = parse_int_or_die(a, v, 0, 1 << 20);
        else if (!strcmp(a, "--sample-every")) c->sample_every = parse_int_or_die(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--sample-len")) c->sample_len = parse_int_or_die(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--tokenizer")) copy_str_or_die(c->tokenizer_path, sizeof(c->tokenizer_path), a, v);
        else if (!strcmp(a, "--quiet")) c->quiet = parse_int_or_die(a, v, 0, 1);
        else if (!strcmp(a, "--zero-stage")) c->zero_stage = parse_int_or_die(a, v, 0, 3);
        else if (!strcmp(a, "--persistence-threshold")) c->persistence_threshold = parse_ll_or_die(a, v);
        else if (!strcmp(a, "--max-live")) c->max_live_elems = parse_ll_or_die(a, v);
        else if (!strcmp(a, "--prefetch")) c->prefetch = parse_int_or_die(a, v, 0, 1);
        else if (!strcmp(a, "--offload")) c->offload = parse_int_or_die(a, v, 0, 1);
        else if (!strcmp(a, "--offload-param")) c->offload_param = parse_int_or_die(a, v, 0, 1);
        else if (!strcmp(a, "--estimate-memory")) c->estimate_world = parse_int_or_die(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--comm")) {
            if (strcmp(v, "nccl") && strcmp(v, "mpi")) fatal("%s: expected nccl or mpi, got '%s'", a, v);
            strcpy(c->comm, v);
        }
        else fatal("unknown flag '%s' (see --help)", a);
    }
    if (!ffn_set) m->d_ff = default_ffn(arch, m->d_model);
    if (arch == ARCH_GPT2 && m->n_kv_head != m->n_head) {
        // gpt2 has no grouped-query attention; a preset's llama kv heads do not apply
        for (int i = 1; i + 1 < argc; i++) if (!strcmp(argv[i], "--kv-heads")) fatal("--kv-heads: gpt2 uses n_kv_heads == n_heads");
        m->n_kv_head = m->n_head;
    }
    // validation: each error names the flag
    if (m->d_model % m->n_head) fatal("--dim %d is not divisible by --heads %d", m->d_model, m->n_head);
    if (m->n_head % m->n_kv_head) fatal("--heads %d is not divisible by --kv-heads %d", m->n_head, m->n_kv_head);
    if (arch == ARCH_LLAMA && (m->d_model / m->n_head) % 2) fatal("llama: head dimension %d must be even for RoPE", m->d_model / m->n_head);
    if (c->T > m->max_seq) fatal("--seq %d exceeds the model's maximum sequence length %d (--max-seq)", c->T, m->max_seq);
    if (c->lr < 0) fatal("--lr must be >= 0");
    if (c->beta1 < 0 || c->beta1 >= 1 || c->beta2 < 0 || c->beta2 >= 1) fatal("--beta1/--beta2 must be in [0, 1)");
    if (c->sched >= SCHED_WARMUP_LR && c->warmup_log && c->warmup < 2) fatal("--warmup-type log needs --warmup >= 2");
    if (c->sched == SCHED_WARMUP_DECAY_LR && c->steps <= c->warmup) fatal("WarmupDecayLR needs --steps > --warmup");
    if (c->zero_stage >= 0 && c->zero_stage != ZERO_STAGE)
        fatal("the config asks for ZeRO stage %d but this binary was built with ZERO=%d (rebuild: make ... ZERO=%d)",
              c->zero_stage, ZERO_STAGE, c->zero_stage);
    c->zero_stage = ZERO_STAGE;
    if (c->offload_param && ZERO_STAGE != 3) fatal("--offload-param (offload_param) needs ZeRO stage 3: parameters are partitioned only there");
}

// With the world size known: derive accumulation from --total-batch.
static void config_resolve_batch(TrainConfig *c, int world) {
    if (c->total_batch > 0) {
        long long per = (long long)c->B * world;
        if (c->total_batch % per)
            fatal("--total-batch %d is not divisible by micro batch %d x world size %d", c->total_batch, c->B, world);
        c->accum = (int)(c->total_batch / per);
    }
    c->total_batch = c->B * c->accum * world;
}
