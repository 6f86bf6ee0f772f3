// config.h: the model and training configuration, the named presets, the
// learning-rate schedules and the command line, shared by train_gpt_cpu,
// train_gpt (CUDA) and mirrored flag for flag by scripts/train_gpt.py.
// The DeepSpeed JSON file (--config) is ds_config.h.
//
// Precedence: preset < --config FILE (DeepSpeed JSON) < explicit flags.
#pragma once
#include "common.h"
#include <cjson/cJSON.h>

#ifndef ZERO_STAGE
#define ZERO_STAGE 0
#endif
#ifndef OFFLOAD
#define OFFLOAD 0       // make train_gpt OFFLOAD=1: optimizer offload on by default (--offload 0 turns it off)
#endif
#ifdef __CUDACC__
#define TRAINER_IS_GPU 1   // train_gpt (bf16 on the GPU; fp16 in the FP16=1 build)
#else
#define TRAINER_IS_GPU 0   // train_gpt_cpu (fp32; --fp16 1: parameters and gradients rounded to fp16)
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

// ----------------------------------------------------------------------------
// ranges: every numeric setting has one, checked the same way whether the value
// comes from a flag or from a config key, and each message names where it came from

typedef struct { double lo, hi; char lo_open, hi_open, integer; } Range;

#define FLT_BIG 3.4e38
static const Range R_BATCH = {1, 1 << 20, 0, 0, 1}, R_ACCUM = {1, 1 << 20, 0, 0, 1}, R_TOTAL = {1, 1 << 30, 0, 0, 1},
                   R_STEPS = {0, 1 << 30, 0, 0, 1}, R_STAGE = {0, 3, 0, 0, 1}, R_COUNT = {0, 9e18, 0, 0, 1},
                   R_LR = {0, FLT_BIG, 0, 0, 0}, R_NONNEG = {0, FLT_BIG, 0, 0, 0}, R_BETA = {0, 1, 0, 1, 0},
                   R_EPS = {0, FLT_BIG, 1, 0, 0}, R_WD = {0, FLT_BIG, 0, 0, 0}, R_CLIP = {0, FLT_BIG, 0, 0, 0},
                   R_FRAC = {0, 1, 0, 0, 0}, R_TOP_P = {0, 1, 1, 0, 0}, R_TIMEOUT = {0, 1e7, 0, 0, 0},
                   R_TILE = {1, 1e12, 0, 0, 1}, R_BUDGET = {0, 1 << 30, 1, 0, 0};

static int range_ok(const Range *r, double v) {
    if (!isfinite(v) || (r->integer && v != floor(v))) return 0;
    if (v < r->lo || (r->lo_open && v == r->lo)) return 0;
    if (v > r->hi || (r->hi_open && v == r->hi)) return 0;
    return 1;
}

// "an integer in [1, 1048576]", "a number > 0", "a number in [0, 1)"
static const char *range_text(const Range *r, char *buf, size_t n) {
    const char *what = r->integer ? "an integer" : "a number";
    if (r->hi >= 9e18 || r->hi >= FLT_BIG) snprintf(buf, n, "%s %s %g", what, r->lo_open ? ">" : ">=", r->lo);
    else snprintf(buf, n, "%s in %c%.10g, %.10g%c", what, r->lo_open ? '(' : '[', r->lo, r->hi, r->hi_open ? ')' : ']');
    return buf;
}

// ----------------------------------------------------------------------------
// training

enum { SCHED_COSINE = 0, SCHED_CONSTANT, SCHED_WARMUP_LR, SCHED_WARMUP_DECAY_LR, SCHED_WARMUP_COSINE_LR, N_SCHED };
static const char *SCHED_NAMES[] = {"cosine", "constant", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR"};

// DeepSpeed's optimizer.type: not given, "Adam" (AdamW unless adam_w_mode is false), "AdamW" (always decoupled)
enum { OPT_DEFAULT = 0, OPT_ADAM, OPT_ADAMW };

// settings whose origin messages name: a flag ("--batch"), a config key path, or NULL (zeroc's default)
enum { FROM_B, FROM_ACCUM, FROM_TOTAL, FROM_STAGE, FROM_OFFLOAD, FROM_OFFLOAD_PARAM, FROM_SCHED, FROM_WARMUP,
       FROM_WARMUP_TYPE, FROM_MIN_LR_FRAC, FROM_WARMUP_MIN_LR, FROM_WARMUP_MAX_LR, FROM_WARMUP_MIN_RATIO,
       FROM_COS_MIN_RATIO, FROM_SCHED_TOTAL, FROM_ADAM_W_MODE, FROM_BF16, FROM_RECOMPUTE, FROM_CPU_CKPT, FROM_FP16,
       FROM_NVME_OPTIM, FROM_NVME_PARAM, FROM_NVME_OPTIM_KEY, FROM_NVME_PARAM_KEY, FROM_NVME_BUFFERS, FROM_NVME_PARAM_BUFFERS,
       FROM_AIO, FROM_NVME_TILE, N_FROM };

typedef struct {
    ModelConfig model;
    char arch[16], preset[32];
    // data and batch: B, accum and total_batch are 0 until given (flag or config key);
    // config_resolve_batch derives the rest as DeepSpeed does, with the world size
    char train_path[512], val_path[512];   // a shard, a directory of shards or a glob (dataloader.h)
    int shuffle;          // per epoch: shard order and each shard's sequences, seeded by seed
    int B, T, accum;
    int total_batch;      // global sequences per optimizer step
    int world;            // the world size config_resolve_batch resolved with
    int steps;
    // optimizer (DeepSpeed's Adam/AdamW, PyTorch semantics)
    float lr, beta1, beta2, eps, weight_decay, grad_clip;  // grad_clip 0: off
    int opt_type;         // OPT_*
    int adam_w_mode;      // 1: decoupled weight decay (AdamW); 0: L2, the decay added to the gradient
    // schedule (lr_at)
    int sched, warmup, warmup_log;  // warmup_log: DeepSpeed's warmup_type "log" (else "linear")
    float min_lr_frac;              // cosine: the floor as a fraction of lr
    float warmup_min_lr;            // WarmupLR, WarmupDecayLR: the warm-up start and the decay's end
    float warmup_min_ratio;         // WarmupCosineLR: the warm-up start as a fraction of lr
    float cos_min_ratio;            // WarmupCosineLR: the cosine's end as a fraction of lr
    int sched_total;                // total_num_steps: WarmupDecayLR/WarmupCosineLR's horizon (0: --steps)
    // precision: DeepSpeed's fp16 block (step_guard.h, loss_scaler.h) and bf16 block (-1: not given).
    // fp16: the CPU trainer's fp16 mode; the GPU trainer's must match its build (FLOATX_FP16)
    int fp16, bf16;
    float loss_scale, min_loss_scale;   // loss_scale 0: dynamic
    int initial_scale_power, loss_scale_window, hysteresis, consecutive_hysteresis;
    // non-finite steps (step_guard.h)
    int max_skips;                  // stop after this many consecutive counted skips; 0: never
    char inject_nonfinite[256];     // tests: --inject-nonfinite STEP:RANK[:inf|nan][,...]
    // run
    uint64_t seed;
    char init_path[512], save_dir[512], resume_dir[512], log_path[512], config_path[512];
    int save_every, threads;
    int keep_last;                  // --keep-last K: keep the newest K checkpoints (0: all)
    double timeout;                 // --timeout S: the watchdog's limit on a step or collective without progress (0: off)
    int breakdown;                  // --breakdown 1 (wall_clock_breakdown): per-phase times of each step
    double peak_tflops;             // --peak-tflops X: the device's peak for MFU (0: the GPU's own; none on the CPU)
    int val_every, val_batches, sample_every, sample_len;
    // sampling (sample.h): --sample 1 samples instead of training; the rest apply to --sample-every too
    int sample, num_samples, top_k, kv_cache;
    float temperature, top_p;
    const char *prompt;   // argv's text ("": the samples start from <|endoftext|> alone)
    int quiet;
    // ZeRO (see zero.h)
    int zero_stage;                 // must equal the compiled ZERO_STAGE
    long long persistence_threshold;// stage3_param_persistence_threshold
    long long max_live_elems;       // stage3_max_live_parameters
    int prefetch;                   // stage-3 prefetch of the next unit (overlap_comm)
    int offload;                    // optimizer offload to CPU-Adam (GPU trainer)
    int offload_param;              // stage 3: parameter shards in pinned host memory (GPU trainer)
    // ZeRO-Infinity (zero_nvme.h): state in each rank's file under a directory on NVMe ("": off)
    char nvme_optim_dir[512];       // offload_optimizer "nvme": the fp32 master (where separate), m, v (--offload-nvme DIR)
    char nvme_param_dir[512];       // offload_param "nvme", stage 3: the parameter shard (--offload-param-nvme DIR)
    long long nvme_tile;            // --nvme-tile: elements per tile of the streamed optimizer step
    int nvme_buffers;               // offload_optimizer.buffer_count: tiles in memory at once
    int nvme_pipeline_read, nvme_pipeline_write, nvme_fast_init;   // offload_optimizer's pipeline_read/_write, fast_init
    int nvme_param_buffers;         // offload_param.buffer_count (2 are used)
    long long nvme_param_buffer_size; // offload_param.buffer_size (0: not given)
    long long aio_block_size;       // DeepSpeed's "aio" block (nvme_offload.h)
    int aio_queue_depth, aio_thread_count, aio_single_submit, aio_overlap_events;
    int estimate_world;             // --estimate-memory N: print the per-rank memory of every stage at N ranks, exit
    double memory_budget;           // --memory-budget GIB (with --estimate-memory): the largest micro batch that fits
    // activations (activations.h)
    int recompute;                  // activation checkpointing: the backward recomputes each layer's forward
    int cpu_checkpointing;          // GPU trainer, with recompute: the layer inputs in pinned host memory
    char comm[8];                   // "auto", "nccl" or "mpi" (GPU trainer; comm_setup_backend)
    // GPU trainer: which kernels a step runs (train_gpt.cu), for comparison and measurement
    char attention[8];              // --attention cublas|flash|auto: the cuBLAS path (scores materialized), fused flash
                                    // attention, or flash where its kernels apply (activations.h: gpu_flash_attention)
    int gpu_baseline;               // --gpu-baseline 1: the step as first measured (per-segment optimizer kernels, a host
                                    // read of each micro-step's loss, cuBLASLt's heuristic on every call, the unfused
                                    // residual + norm): bench/gpu_train.sh's same-run baseline
    char tokenizer_path[512];
    // where settings came from (FROM_*), and the config keys that said "auto"
    const char *from[N_FROM];
    char config_auto[4096];
} TrainConfig;

static void train_config_defaults(TrainConfig *c) {
    memset(c, 0, sizeof(*c));
    strcpy(c->arch, "gpt2");
    strcpy(c->preset, "tiny");
    strcpy(c->train_path, "data/brown/train.bin");
    strcpy(c->val_path, "data/brown/val.bin");
    strcpy(c->tokenizer_path, "data/gpt2_tokenizer.bin");
    c->T = 64; c->steps = 50;   // B (4) and accum (1): config_resolve_batch
    c->lr = 6e-4f; c->beta1 = 0.9f; c->beta2 = 0.95f; c->eps = 1e-8f; c->weight_decay = 0.1f; c->grad_clip = 1.0f;
    c->adam_w_mode = 1;
    c->sched = SCHED_COSINE; c->warmup = 0; c->warmup_log = 1; c->min_lr_frac = 0.1f;
    c->warmup_min_lr = 0.0f; c->warmup_min_ratio = 0.0f; c->cos_min_ratio = 1e-4f;   // DeepSpeed's defaults
    c->bf16 = -1;
    c->fp16 = TRAINER_IS_GPU && FLOATX_FP16;   // the fp16 build of train_gpt trains in fp16
    c->max_skips = 5;
    c->loss_scale = 0.0f; c->initial_scale_power = 16; c->loss_scale_window = 1000; c->hysteresis = 2;   // DeepSpeed's
    c->consecutive_hysteresis = 0; c->min_loss_scale = 1.0f;                                            // documented defaults
    c->seed = 1337;
    c->save_every = 0; c->threads = 0;
    c->keep_last = 0; c->timeout = 600;
    c->val_every = 0; c->val_batches = 8; c->sample_every = 0; c->sample_len = 64;
    c->sample = 0; c->num_samples = 1; c->top_k = 0; c->kv_cache = 1; c->temperature = 1.0f; c->top_p = 1.0f; c->prompt = "";
    c->zero_stage = -1;  // not asked for: take the compiled stage
    c->persistence_threshold = 100000LL;
    c->max_live_elems = 1000000000LL;
    c->prefetch = 1;
    strcpy(c->comm, "auto");
    // "auto" (flash where its kernels apply, activations.h) once docs/gpu.md's "Flash attention" checks pass on a GPU
    strcpy(c->attention, "cublas");
    c->offload = OFFLOAD;
    c->nvme_tile = 1 << 20;   // the GPU's CPU-Adam tile (zero_device.cuh)
    c->nvme_buffers = 4; c->nvme_param_buffers = 5;   // DeepSpeed's defaults
    c->nvme_pipeline_read = c->nvme_pipeline_write = 1;   // zeroc's (DeepSpeed's: false)
    c->aio_block_size = 1 << 20; c->aio_queue_depth = 8; c->aio_thread_count = 1;   // DeepSpeed's aio defaults
    c->aio_single_submit = 0; c->aio_overlap_events = 1;
}

// ----------------------------------------------------------------------------
// learning-rate schedules

// DeepSpeed's warm-up fraction at scheduler iteration t < W (lr_schedules.py _get_gamma):
// "log": log(t + 1) * (1 / log W), "linear": t / W, evaluated as DeepSpeed's Python does
static double ds_warmup_gamma(const TrainConfig *c, long long t, int W) {
    if (c->warmup_log) return (1.0 / log((double)W)) * log((double)t + 1);
    return (double)t / (double)W;
}

// The learning rate of optimizer step `it` (0-based: the number of optimizer steps
// applied before this one) of a run of `total` steps.
//   cosine:   zeroc's (nanoGPT/llm.c): linear warmup lr*(it+1)/W, then cosine from lr
//             down to lr*min_lr_frac at the last step
//   constant: lr
//   WarmupLR, WarmupDecayLR, WarmupCosineLR: DeepSpeed's (deepspeed/runtime/lr_schedules.py),
//             computed in double as its Python does. DeepSpeed builds the scheduler with
//             last_batch_iteration = -1 (which sets the optimizer's lr) and calls
//             scheduler.step() after every applied optimizer step (engine._take_model_step;
//             not after a step skipped for fp16 overflow), so step `it` runs at scheduler
//             iteration t = it - 1. With W = max(2, warmup_num_steps), T = total_num_steps
//             (else `total`) and g(t) = ds_warmup_gamma:
//     WarmupLR:       t = -1: warmup_min_lr; t < W: min + (max - min) * g(t); then max
//     WarmupDecayLR:  the same warm-up; then min + (max - min) * max(0, (T - t) / max(1, T - W)):
//                     down to warmup_min_lr at T
//     WarmupCosineLR: t = -1: 0; t < W: lr * (warmup_min_ratio + g(t) * (1 - warmup_min_ratio));
//                     then lr * max(0, cos_min_ratio + (1 - cos_min_ratio) * (1 + cos(pi * (t - W + 1) / (T - W))) / 2)
//             (max = lr: scheduler.params.warmup_max_lr or the optimizer's lr; min = warmup_min_lr)
static float lr_at(const TrainConfig *c, int it, int total) {
    double lr = c->lr;
    if (c->sched == SCHED_CONSTANT) return (float)lr;
    if (c->sched == SCHED_COSINE) {
        double W = c->warmup;
        if (it < c->warmup) return (float)(lr * (it + 1) / W);
        double min_lr = lr * c->min_lr_frac;
        if (total <= c->warmup + 1) return (float)lr;
        double ratio = (double)(it - c->warmup) / (double)(total - 1 - c->warmup);
        if (ratio > 1) ratio = 1;
        return (float)(min_lr + 0.5 * (1.0 + cos(M_PI * ratio)) * (lr - min_lr));
    }
    int W = c->warmup > 2 ? c->warmup : 2;
    int T = c->sched_total > 0 ? c->sched_total : total;
    long long t = (long long)it - 1;
    if (c->sched == SCHED_WARMUP_COSINE_LR) {
        if (t < 0) return 0.0f;
        double ratio;
        if (t < W) {
            ratio = c->warmup_min_ratio + ds_warmup_gamma(c, t, W) * (1.0 - (double)c->warmup_min_ratio);
        } else {
            double cmr = c->cos_min_ratio;
            ratio = (1 + cos(M_PI * (double)(t - W + 1) / (double)(T - W))) / 2;
            ratio = cmr + (1.0 - cmr) * ratio;
            if (ratio < 0) ratio = 0;
        }
        return (float)(lr * ratio);
    }
    double min_lr = c->warmup_min_lr, delta = lr - min_lr;
    if (t < 0) return (float)min_lr;
    double gamma = 1.0;
    if (t < W) gamma = ds_warmup_gamma(c, t, W);
    else if (c->sched == SCHED_WARMUP_DECAY_LR) {
        double span = (double)(T - W) > 1.0 ? (double)(T - W) : 1.0;
        gamma = (double)(T - t) / span;
        if (gamma < 0) gamma = 0;
    }
    return (float)(min_lr + delta * gamma);
}

// a JSON object from a file (a config file, a Hugging Face config.json), or one line and exit
static cJSON *json_parse_file_or_die(const char *path) {
    FILE *f = fopen_or_die(path, "rb");
    long long n = file_size_or_die(f, path);
    if (n > (1 << 24)) fatal("%s: file too large for a JSON config", path);
    char *text = (char *)xmalloc(n + 1, "config text");
    fread_or_die(text, 1, n, f, path, "config");
    text[n] = 0;
    fclose(f);
    cJSON *root = cJSON_Parse(text);
    if (!root || !cJSON_IsObject(root)) fatal("%s: not a JSON object (near '%.20s')", path, cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "");
    free(text);
    return root;
}

#include "ds_config.h"

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
           "data and batch (any two of --batch, --accum, --total-batch derive the third, as DeepSpeed does)\n"
           "  --train PATH --val PATH  a token shard, a directory of shards or a glob (default data/brown/{train,val}.bin)\n"
           "  --shuffle 0|1            shuffle shard order and sequences each epoch, seeded by --seed (default 0)\n"
           "  --batch B                micro batch per rank (default 4)\n"
           "  --seq T                  sequence length (default 64)\n"
           "  --accum K                gradient accumulation steps (default 1)\n"
           "  --total-batch N          global sequences per optimizer step (= batch x accum x ranks)\n"
           "optimizer and schedule\n"
           "  --steps N --lr X --beta1 X --beta2 X --eps X --weight-decay X --clip X (0: off)\n"
           "  --adam-w-mode 0|1        1: AdamW (decoupled weight decay, default); 0: Adam with L2 weight decay\n"
           "  --lr-schedule cosine|constant|WarmupLR|WarmupDecayLR|WarmupCosineLR  --warmup N\n"
           "  --min-lr-frac X          cosine: the floor as a fraction of --lr (default 0.1)\n"
           "  --warmup-type log|linear DeepSpeed's schedules: the warm-up's shape (default log)\n"
           "  --warmup-min-lr X        WarmupLR, WarmupDecayLR: warm-up start and decay end (default 0)\n"
           "  --warmup-min-ratio X --cos-min-ratio X   WarmupCosineLR (defaults 0, 1e-4)\n"
           "run\n"
           "  --seed S --init FILE --save DIR --save-every N --resume DIR --log FILE\n"
           "                           --init X.safetensors: Hugging Face weights, the model from X's config.json\n"
           "  --keep-last K            keep the newest K checkpoints in --save DIR (default 0: all)\n"
           "  --breakdown 0|1          per step: forward, backward, communication wait and optimizer times\n"
           "                           (wall_clock_breakdown; the GPU synchronizes between phases to measure them)\n"
           "  --peak-tflops X          the peak the step line's MFU is relative to (default: the GPU's dense\n"
           "                           16-bit tensor peak; the CPU trainer prints GFLOP/s unless given)\n"
           "  --timeout S              watchdog: abort the job when a step or collective makes no progress\n"
           "                           for S seconds (default 600; 0: off)\n"
           "  --threads N --val-every N --val-batches N --sample-every N --sample-len N\n"
           "  --tokenizer FILE --quiet 0|1\n"
           "  --config FILE            DeepSpeed JSON config; explicit flags override it\n"
           "  --config-keys            print every DeepSpeed key and what it does here, exit\n"
           "precision and non-finite steps\n"
           "  --fp16 0|1               fp16 with DeepSpeed's dynamic loss scaling (the fp16 config block sets\n"
           "                           the scaler): train_gpt_cpu stores parameters and gradients as fp16\n"
           "                           values; train_gpt must be the fp16 build (make train_gpt FP16=1)\n"
           "  --max-skips N            stop after N consecutive skipped steps (non-finite loss or gradients;\n"
           "                           fp16 overflows the loss scaler handles are not counted); 0: never (default 5)\n"
           "  --inject-nonfinite STEP:RANK[:inf|nan][,...]\n"
           "                           TESTS ONLY: Inf (or NaN) into rank RANK's reduced gradient at step STEP\n"
           "sampling (also the samples of --sample-every)\n"
           "  --sample 1               sample instead of training, from --init FILE or --resume DIR; rank 0 prints\n"
           "  --prompt TEXT            the text the samples continue (default: none, after <|endoftext|>)\n"
           "  --sample-len N           tokens generated per sample (default 64)\n"
           "  --num-samples N          samples generated together (default 1)\n"
           "  --temperature X          logits / X before the softmax; 0: greedy argmax (default 1)\n"
           "  --top-k N                sample among the N most likely tokens (default 0: all)\n"
           "  --top-p X                sample among the most likely tokens whose probabilities sum to X (default 1: all)\n"
           "  --seed S                 the sampling random numbers (with --sample 1)\n"
           "  --kv-cache 0|1           1: one position per token with a KV cache (default); 0: a full forward per token\n"
           "ZeRO (compiled stage: %d)\n"
           "  --zero-stage K           must equal the compiled stage (make ZERO=K)\n"
           "  --persistence-threshold N  stage 3: units this small stay whole\n"
           "  --max-live N             stage 3: cap on gathered parameter elements\n"
           "  --prefetch 0|1           stage 3: prefetch the next unit (default 1)\n"
           "  --offload 0|1            optimizer state on the CPU (GPU trainer)\n"
           "  --offload-param 0|1      stage 3: parameter shards in host memory (GPU trainer)\n"
           "  --offload-nvme DIR       ZeRO-Infinity: the optimizer state (m, v; the fp32 master where separate) in each\n"
           "                           rank's file under DIR, streamed through the step in tiles (both trainers)\n"
           "  --offload-param-nvme DIR stage 3: the parameter shard in each rank's file under DIR, read one unit ahead\n"
           "  --nvme-tile N            elements per tile of the streamed optimizer step (default 1048576)\n"
           "  --estimate-memory N      print the per-rank memory of every stage at N ranks (model states, activations\n"
           "                           for --batch/--seq, working buffers), allocate nothing, exit\n"
           "  --memory-budget GIB      with --estimate-memory: the largest micro batch per rank within GIB, per stage,\n"
           "                           with and without --recompute\n"
           "activations\n"
           "  --recompute 0|1          activation checkpointing: keep each layer's input only, recompute in the backward\n"
           "  --cpu-checkpointing 0|1  with --recompute (GPU trainer): the layer inputs in pinned host memory\n"
           "  --comm auto|nccl|mpi     GPU collective backend (auto: NCCL with one GPU per rank; one rank: none;\n"
           "                           ranks sharing a GPU: host-staged MPI, with a notice)\n"
           "  --attention cublas|flash|auto\n"
           "                           GPU attention: cuBLAS with the scores materialized (default), the fused\n"
           "                           flash attention (cuda/flash_attention.cuh: bf16, head size 64 or 128),\n"
           "                           or auto: flash where it applies, else cuBLAS\n"
           "  --gpu-baseline 0|1       GPU trainer: run the step as first measured (for same-run comparisons)\n", ZERO_STAGE);
}

// A number for `flag` within its range, or a one-line error naming the flag.
// Integers below 2^31 are read as decimal integers; counts and numbers with strtod (5e8).
static double flag_number(const char *flag, const char *s, const Range *r) {
    char *end;
    errno = 0;
    double v = r->integer && r->hi < 9e18 ? (double)strtoll(s, &end, 10) : strtod(s, &end);
    if (!errno && *end == 0 && end != s && range_ok(r, v) && (r->integer || range_ok(r, (float)v))) return v;
    char want[96];
    fatal("%s: expected %s, got '%s'", flag, range_text(r, want, sizeof(want)), s);
    return 0;
}
static int flag_int(const char *flag, const char *s, long long lo, long long hi) {
    Range r = {(double)lo, (double)hi, 0, 0, 1};
    return (int)flag_number(flag, s, &r);
}
static void copy_str_or_die(char *dst, size_t n, const char *flag, const char *s) {
    if (strlen(s) >= n) fatal("%s: value too long", flag);
    strcpy(dst, s);
}
static int sched_from_name(const char *flag, const char *s) {
    for (int i = 0; i < N_SCHED; i++) if (strcmp(s, SCHED_NAMES[i]) == 0) return i;
    fatal("%s: unknown schedule '%s' (cosine, constant, WarmupLR, WarmupDecayLR, WarmupCosineLR)", flag, s);
    return 0;
}

// Which schedules use a schedule setting (FROM_* id); 0: not a schedule setting.
static unsigned sched_users(int id) {
    const unsigned ds = 1u << SCHED_WARMUP_LR | 1u << SCHED_WARMUP_DECAY_LR | 1u << SCHED_WARMUP_COSINE_LR;
    switch (id) {
    case FROM_WARMUP: return ds | 1u << SCHED_COSINE;
    case FROM_WARMUP_TYPE: return ds;
    case FROM_MIN_LR_FRAC: return 1u << SCHED_COSINE;
    case FROM_WARMUP_MIN_LR: case FROM_WARMUP_MAX_LR: return 1u << SCHED_WARMUP_LR | 1u << SCHED_WARMUP_DECAY_LR;
    case FROM_WARMUP_MIN_RATIO: case FROM_COS_MIN_RATIO: return 1u << SCHED_WARMUP_COSINE_LR;
    case FROM_SCHED_TOTAL: return 1u << SCHED_WARMUP_DECAY_LR | 1u << SCHED_WARMUP_COSINE_LR;
    default: return 0;
    }
}

// ZeRO-Infinity's settings, the config's keys and the flags together: a device "nvme"
// needs its directory; what only NVMe offload uses says so when nothing goes to NVMe;
// the step's tiles need their buffers; what each trainer can put on NVMe.
static void nvme_config_check(TrainConfig *c, ConfigReport *r) {
    for (int param = 0; param < 2; param++) {
        char *dir = param ? c->nvme_param_dir : c->nvme_optim_dir;
        const char *dev = c->from[param ? FROM_NVME_PARAM : FROM_NVME_OPTIM];   // what asked for "nvme": a device key or a flag
        const char *key = c->from[param ? FROM_NVME_PARAM_KEY : FROM_NVME_OPTIM_KEY];   // the block's first NVMe-only key
        const char *path_key = param ? "zero_optimization.offload_param.nvme_path" : "zero_optimization.offload_optimizer.nvme_path";
        struct stat sb;
        if (!dev) {
            if (key) report_at(r, MSG_NOTE, key, "no effect: used only with device \"nvme\"");
            dir[0] = 0;
        } else if (!dir[0]) {
            report_at(r, MSG_ERROR, dev, "\"nvme\" needs nvme_path: the directory of each rank's file");
        } else if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            int e = stat(dir, &sb) != 0 ? errno : ENOTDIR;
            report_at(r, MSG_ERROR, strncmp(dev, "--", 2) == 0 ? dev : path_key, "%s: %s (the directory of each rank's file)", dir, strerror(e));
        }
    }
    int optim = c->nvme_optim_dir[0] != 0, param = c->nvme_param_dir[0] != 0;
    if (param && ZERO_STAGE != 3)
        report_at(r, MSG_ERROR, c->from[FROM_NVME_PARAM], "parameter offload needs ZeRO stage 3: parameters are partitioned only there");
#if TRAINER_IS_GPU
    if (optim) c->offload = 1;   // CPU-Adam on the host, its state streamed from NVMe
    if (param && !c->offload)
        report_at(r, MSG_ERROR, c->from[FROM_NVME_PARAM], "\"nvme\" needs the optimizer on the host too (offload_optimizer device "
                  "\"cpu\" or \"nvme\": --offload 1 or --offload-nvme DIR): CPU-Adam writes the updated parameters to NVMe");
#endif
    if (!optim && !param) {
        if (c->from[FROM_AIO]) report_at(r, MSG_NOTE, "aio", "no effect: no state is offloaded to NVMe");
        if (c->from[FROM_NVME_TILE]) report_at(r, MSG_NOTE, c->from[FROM_NVME_TILE], "no effect without --offload-nvme or --offload-param-nvme");
        return;
    }
    int need = 1 + c->nvme_pipeline_read + c->nvme_pipeline_write;
    if (c->nvme_buffers < need)
        report_at(r, MSG_ERROR, c->from[FROM_NVME_BUFFERS] ? c->from[FROM_NVME_BUFFERS] : "zero_optimization.offload_optimizer.buffer_count",
                  "%d buffers are too few for the NVMe step: it needs %d (one tile being updated%s%s)", c->nvme_buffers, need,
                  c->nvme_pipeline_read ? ", one read ahead" : "", c->nvme_pipeline_write ? ", one written behind" : "");
    if (param && c->nvme_param_buffers < 2)
        report_at(r, MSG_ERROR, c->from[FROM_NVME_PARAM_BUFFERS], "%d: at least 2 (a unit's slice is read while the one before it is gathered)",
                  c->nvme_param_buffers);
    else if (param && c->nvme_param_buffers > 2 && c->from[FROM_NVME_PARAM_BUFFERS])
        report_at(r, MSG_NOTE, c->from[FROM_NVME_PARAM_BUFFERS], "%d: zeroc reads exactly one unit ahead of the gather, in 2 buffers",
                  c->nvme_param_buffers);
    if (c->aio_block_size % 4096)   // nvme_offload.h's NVME_ALIGN
        report_at(r, MSG_ERROR, "aio.block_size", "%lld: a multiple of 4096 bytes (O_DIRECT's alignment)", c->aio_block_size);
}

// The checks that need the config file and the flags together; every problem goes
// to the report, named by the flag or key each setting came from.
static void config_check(TrainConfig *c, ConfigReport *r) {
    // a schedule setting the chosen schedule does not take: DeepSpeed's constructors refuse it
    for (int id = 0; id < N_FROM; id++) {
        unsigned users = sched_users(id);
        if (!users || !c->from[id] || (users >> c->sched & 1)) continue;
        char names[96] = "";
        for (int s = 0; s < N_SCHED; s++)
            if (users >> s & 1) snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", names[0] ? ", " : "", SCHED_NAMES[s]);
        report_at(r, MSG_ERROR, c->from[id], "not used by the %s schedule (used by %s)%s%s", SCHED_NAMES[c->sched], names,
                  c->from[FROM_SCHED] ? ": the schedule comes from " : "", c->from[FROM_SCHED] ? c->from[FROM_SCHED] : "");
    }
    int W = c->warmup > 2 ? c->warmup : 2, T = c->sched_total > 0 ? c->sched_total : c->steps;
    const char *tname = c->from[FROM_SCHED_TOTAL] ? c->from[FROM_SCHED_TOTAL] : "--steps";
    if ((c->sched == SCHED_WARMUP_DECAY_LR || c->sched == SCHED_WARMUP_COSINE_LR) && T < W)
        report_at(r, MSG_WARNING, tname, "total_num_steps %d is less than warmup_num_steps %d (DeepSpeed warns too)", T, W);
    if (c->sched == SCHED_WARMUP_COSINE_LR && T == W)
        report_at(r, MSG_ERROR, tname, "WarmupCosineLR with total_num_steps == warmup_num_steps (%d) divides by zero after the warm-up (as in DeepSpeed)", T);
    // DeepSpeed's "AdamW" is decoupled whatever adam_w_mode says
    if (c->opt_type == OPT_ADAMW && !c->adam_w_mode) {
        report_at(r, MSG_NOTE, c->from[FROM_ADAM_W_MODE], "false has no effect with optimizer.type \"AdamW\" (always decoupled weight decay, "
                  "as in DeepSpeed); for Adam with L2 weight decay write \"type\": \"Adam\"");
        c->adam_w_mode = 1;
    }
    // precision: the GPU trainer's 16-bit type is a build choice (make train_gpt FP16=1)
    const char *fp16_from = c->from[FROM_FP16] ? c->from[FROM_FP16] : "fp16.enabled";
    if (TRAINER_IS_GPU && FLOATX_FP16 && c->bf16 == 1)
        report_at(r, MSG_ERROR, c->from[FROM_BF16], "true: this train_gpt is the fp16 build (make train_gpt FP16=1); "
                  "bf16 training needs the default build (make train_gpt)");
    else if (c->fp16 && c->bf16 == 1)
        report_at(r, MSG_ERROR, fp16_from, "bfloat16 and fp16 modes cannot be simultaneously enabled (DeepSpeed's rule)");
    else if (TRAINER_IS_GPU && c->fp16 != FLOATX_FP16)
        report_at(r, MSG_ERROR, fp16_from, c->fp16 ? "true: this train_gpt trains in bf16; fp16 training needs the fp16 build "
                  "(make train_gpt FP16=1)" : "false: this train_gpt is the fp16 build (make train_gpt FP16=1); bf16 training "
                  "needs the default build (make train_gpt)");
    if (c->bf16 == 1 && !TRAINER_IS_GPU && !c->fp16)
        report_at(r, MSG_NOTE, c->from[FROM_BF16], "true: the CPU trainer trains in fp32 (bf16 is train_gpt's precision; "
                  "fp16.enabled is the CPU trainer's 16-bit mode)");
    if (c->bf16 == 0 && TRAINER_IS_GPU && !c->fp16)
        report_at(r, MSG_NOTE, c->from[FROM_BF16], "false: this train_gpt trains in bf16 (fp32 master weights and optimizer); "
                  "fp16 training is the fp16 build (make train_gpt FP16=1)");
    // ZeRO
    if (c->zero_stage >= 0 && c->zero_stage != ZERO_STAGE)
        report_at(r, MSG_ERROR, c->from[FROM_STAGE], "asks for ZeRO stage %d but this binary was built with ZERO=%d (rebuild: make ... ZERO=%d)",
                  c->zero_stage, ZERO_STAGE, c->zero_stage);
#if !TRAINER_IS_GPU
    // the CPU trainer's model states live in host memory already: offload has nothing to move
    // (the estimator keeps the settings: its train_gpt rows use them)
    if (!c->estimate_world) {
    if (c->offload)
        report_at(r, MSG_NOTE, c->from[FROM_OFFLOAD] ? c->from[FROM_OFFLOAD] : "--offload",
                  "\"cpu\": the CPU trainer's optimizer state is in host memory already (offload applies to train_gpt)");
    if (c->offload_param)
        report_at(r, MSG_NOTE, c->from[FROM_OFFLOAD_PARAM] ? c->from[FROM_OFFLOAD_PARAM] : "--offload-param",
                  "\"cpu\": the CPU trainer's parameters are in host memory already (offload applies to train_gpt)");
    c->offload = c->offload_param = 0;
    }
#endif
    nvme_config_check(c, r);
    // activations
    if (c->cpu_checkpointing && !c->recompute)
        report_at(r, MSG_ERROR, c->from[FROM_CPU_CKPT], "offloads the checkpoints of activation checkpointing: it needs --recompute 1 "
                  "(or an activation_checkpointing block)");
#if !TRAINER_IS_GPU
    else if (c->cpu_checkpointing && !c->estimate_world)
        report_at(r, MSG_NOTE, c->from[FROM_CPU_CKPT], "the CPU trainer's activations are in host memory already (cpu_checkpointing applies to train_gpt)");
    if (!c->estimate_world) c->cpu_checkpointing = 0;
#endif
    if (c->memory_budget > 0 && !c->estimate_world)
        report_at(r, MSG_ERROR, "--memory-budget", "is a question for the estimator: give it with --estimate-memory N");
    if (c->offload_param && ZERO_STAGE != 3)
        report_at(r, MSG_ERROR, c->from[FROM_OFFLOAD_PARAM] ? c->from[FROM_OFFLOAD_PARAM] : "--offload-param",
                  "parameter offload needs ZeRO stage 3: parameters are partitioned only there");
}

// Sampling against the mode: --sample 1 needs weights to sample from, and the
// flags of the other mode have no effect (one note naming them). The sampling
// flags also shape the samples of --sample-every.
static void sample_flags_check(const TrainConfig *c, ConfigReport *r, int argc, char **argv) {
    static const char *TRAINING[] = {"--steps", "--lr", "--beta1", "--beta2", "--eps", "--weight-decay", "--clip", "--adam-w-mode",
        "--lr-schedule", "--warmup", "--warmup-type", "--min-lr-frac", "--warmup-min-lr", "--warmup-min-ratio", "--cos-min-ratio",
        "--train", "--val", "--batch", "--accum", "--total-batch", "--seq", "--save", "--save-every", "--val-every",
        "--val-batches", "--sample-every", "--log", NULL};
    static const char *SAMPLING[] = {"--prompt", "--num-samples", "--temperature", "--top-k", "--top-p", "--kv-cache", NULL};
    if (c->sample && !c->init_path[0] && !c->resume_dir[0])
        report_at(r, MSG_ERROR, "--sample", "1 needs weights to sample from: --init FILE (a model file or a model.safetensors) or --resume DIR");
    if (!c->sample && c->sample_every > 0) return;
    char given[400] = "";
    for (int i = 1; i + 1 < argc; i += 2)     // every flag takes a value
        for (const char **f = c->sample ? TRAINING : SAMPLING; *f; f++)
            if (!strcmp(argv[i], *f) && strlen(given) + strlen(*f) + 3 < sizeof(given))
                snprintf(given + strlen(given), sizeof(given) - strlen(given), "%s%s", given[0] ? ", " : "", *f);
    if (given[0] && c->sample) report_at(r, MSG_NOTE, "--sample", "1 samples and does not train: %s ha%s no effect", given, strchr(given, ',') ? "ve" : "s");
    if (given[0] && !c->sample) report_at(r, MSG_NOTE, NULL, "%s ha%s no effect without --sample 1 or --sample-every N", given, strchr(given, ',') ? "ve" : "s");
    if (c->sample && c->config_path[0]) report_at(r, MSG_NOTE, "--config", "when sampling only its ZeRO settings apply");
}

// Parse argv into c. Returns, or exits with the errors (one line each). --help and
// --config-keys print and exit 0.

// --init X.safetensors: the model comes from X's config.json (hf_config.h, included at the end)
static void hf_config_for_init(TrainConfig *c, int argc, char **argv);

static void parse_args(TrainConfig *c, int argc, char **argv, int print_rank) {
    train_config_defaults(c);
    // pass 1: arch, preset and config file come first so that flags override them
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { if (print_rank) print_help(argv[0]); exit(0); }
        if (strcmp(a, "--config-keys") == 0) { if (print_rank) ds_print_keys(stdout); exit(0); }
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
    ConfigReport rep = {c->config_path, NULL, 0, 0, 0};
    if (c->config_path[0]) ds_config_apply(c, c->config_path, &rep);
    int ffn_set = 0, gpu_only_flags = 0;
    ModelConfig *m = &c->model;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) fatal("unexpected argument '%s' (see --help)", a);
        if (i + 1 >= argc) fatal("%s: missing value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--arch") || !strcmp(a, "--preset") || !strcmp(a, "--config")) continue;
        else if (!strcmp(a, "--layers")) m->n_layer = flag_int(a, v, 1, 1024);
        else if (!strcmp(a, "--heads")) m->n_head = flag_int(a, v, 1, 1024);
        else if (!strcmp(a, "--kv-heads")) m->n_kv_head = flag_int(a, v, 1, 1024);
        else if (!strcmp(a, "--dim")) m->d_model = flag_int(a, v, 1, 65536);
        else if (!strcmp(a, "--ffn")) { m->d_ff = flag_int(a, v, 1, 1 << 20); ffn_set = 1; }
        else if (!strcmp(a, "--vocab")) { m->vocab_size = flag_int(a, v, 2, 65536); m->padded_vocab = (int)round_up(m->vocab_size, 128); }
        else if (!strcmp(a, "--max-seq")) m->max_seq = flag_int(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--train")) copy_str_or_die(c->train_path, sizeof(c->train_path), a, v);
        else if (!strcmp(a, "--val")) copy_str_or_die(c->val_path, sizeof(c->val_path), a, v);
        else if (!strcmp(a, "--shuffle")) c->shuffle = flag_int(a, v, 0, 1);
        else if (!strcmp(a, "--batch")) { c->B = (int)flag_number(a, v, &R_BATCH); c->from[FROM_B] = "--batch"; }
        else if (!strcmp(a, "--seq")) c->T = flag_int(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--accum")) { c->accum = (int)flag_number(a, v, &R_ACCUM); c->from[FROM_ACCUM] = "--accum"; }
        else if (!strcmp(a, "--total-batch")) { c->total_batch = (int)flag_number(a, v, &R_TOTAL); c->from[FROM_TOTAL] = "--total-batch"; }
        else if (!strcmp(a, "--steps")) c->steps = (int)flag_number(a, v, &R_STEPS);
        else if (!strcmp(a, "--lr")) c->lr = (float)flag_number(a, v, &R_LR);
        else if (!strcmp(a, "--beta1")) c->beta1 = (float)flag_number(a, v, &R_BETA);
        else if (!strcmp(a, "--beta2")) c->beta2 = (float)flag_number(a, v, &R_BETA);
        else if (!strcmp(a, "--eps")) c->eps = (float)flag_number(a, v, &R_EPS);
        else if (!strcmp(a, "--weight-decay")) c->weight_decay = (float)flag_number(a, v, &R_WD);
        else if (!strcmp(a, "--clip")) c->grad_clip = (float)flag_number(a, v, &R_CLIP);
        else if (!strcmp(a, "--adam-w-mode")) { c->adam_w_mode = flag_int(a, v, 0, 1); c->from[FROM_ADAM_W_MODE] = "--adam-w-mode"; }
        else if (!strcmp(a, "--lr-schedule")) { c->sched = sched_from_name(a, v); c->from[FROM_SCHED] = "--lr-schedule"; }
        else if (!strcmp(a, "--warmup")) { c->warmup = (int)flag_number(a, v, &R_STEPS); c->from[FROM_WARMUP] = "--warmup"; }
        else if (!strcmp(a, "--warmup-type")) {
            if (strcmp(v, "log") && strcmp(v, "linear")) fatal("%s: expected log or linear, got '%s'", a, v);
            c->warmup_log = strcmp(v, "log") == 0;
            c->from[FROM_WARMUP_TYPE] = "--warmup-type";
        }
        else if (!strcmp(a, "--min-lr-frac")) { c->min_lr_frac = (float)flag_number(a, v, &R_FRAC); c->from[FROM_MIN_LR_FRAC] = "--min-lr-frac"; }
        else if (!strcmp(a, "--warmup-min-lr")) { c->warmup_min_lr = (float)flag_number(a, v, &R_NONNEG); c->from[FROM_WARMUP_MIN_LR] = "--warmup-min-lr"; }
        else if (!strcmp(a, "--warmup-min-ratio")) { c->warmup_min_ratio = (float)flag_number(a, v, &R_FRAC); c->from[FROM_WARMUP_MIN_RATIO] = "--warmup-min-ratio"; }
        else if (!strcmp(a, "--cos-min-ratio")) { c->cos_min_ratio = (float)flag_number(a, v, &R_FRAC); c->from[FROM_COS_MIN_RATIO] = "--cos-min-ratio"; }
        else if (!strcmp(a, "--seed")) c->seed = (uint64_t)flag_number(a, v, &R_COUNT);
        else if (!strcmp(a, "--init")) copy_str_or_die(c->init_path, sizeof(c->init_path), a, v);
        else if (!strcmp(a, "--save")) copy_str_or_die(c->save_dir, sizeof(c->save_dir), a, v);
        else if (!strcmp(a, "--save-every")) c->save_every = flag_int(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--keep-last")) c->keep_last = flag_int(a, v, 0, 1 << 20);
        else if (!strcmp(a, "--timeout")) c->timeout = flag_number(a, v, &R_TIMEOUT);
        else if (!strcmp(a, "--breakdown")) c->breakdown = flag_int(a, v, 0, 1);
        else if (!strcmp(a, "--peak-tflops")) c->peak_tflops = flag_number(a, v, &R_TIMEOUT);
        else if (!strcmp(a, "--resume")) copy_str_or_die(c->resume_dir, sizeof(c->resume_dir), a, v);
        else if (!strcmp(a, "--log")) copy_str_or_die(c->log_path, sizeof(c->log_path), a, v);
        else if (!strcmp(a, "--threads")) c->threads = flag_int(a, v, 0, 4096);
        else if (!strcmp(a, "--val-every")) c->val_every = flag_int(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--val-batches")) c->val_batches = flag_int(a, v, 0, 1 << 20);
        else if (!strcmp(a, "--sample-every")) c->sample_every = flag_int(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--sample-len")) c->sample_len = flag_int(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--sample")) c->sample = flag_int(a, v, 0, 1);
        else if (!strcmp(a, "--prompt")) c->prompt = v;
        else if (!strcmp(a, "--num-samples")) c->num_samples = flag_int(a, v, 1, 4096);
        else if (!strcmp(a, "--temperature")) c->temperature = (float)flag_number(a, v, &R_NONNEG);
        else if (!strcmp(a, "--top-k")) c->top_k = flag_int(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--top-p")) c->top_p = (float)flag_number(a, v, &R_TOP_P);
        else if (!strcmp(a, "--kv-cache")) c->kv_cache = flag_int(a, v, 0, 1);
        else if (!strcmp(a, "--tokenizer")) copy_str_or_die(c->tokenizer_path, sizeof(c->tokenizer_path), a, v);
        else if (!strcmp(a, "--quiet")) c->quiet = flag_int(a, v, 0, 1);
        else if (!strcmp(a, "--fp16")) { c->fp16 = flag_int(a, v, 0, 1); c->from[FROM_FP16] = "--fp16"; }
        else if (!strcmp(a, "--max-skips")) c->max_skips = flag_int(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--inject-nonfinite")) copy_str_or_die(c->inject_nonfinite, sizeof(c->inject_nonfinite), a, v);
        else if (!strcmp(a, "--zero-stage")) { c->zero_stage = (int)flag_number(a, v, &R_STAGE); c->from[FROM_STAGE] = "--zero-stage"; }
        else if (!strcmp(a, "--persistence-threshold")) c->persistence_threshold = (long long)flag_number(a, v, &R_COUNT);
        else if (!strcmp(a, "--max-live")) c->max_live_elems = (long long)flag_number(a, v, &R_COUNT);
        else if (!strcmp(a, "--prefetch")) c->prefetch = flag_int(a, v, 0, 1);
        else if (!strcmp(a, "--offload")) {   // the device: "cpu" or "none", not "nvme"
            c->offload = flag_int(a, v, 0, 1); c->from[FROM_OFFLOAD] = "--offload";
            c->nvme_optim_dir[0] = 0; c->from[FROM_NVME_OPTIM] = NULL;
        }
        else if (!strcmp(a, "--offload-param")) {
            c->offload_param = flag_int(a, v, 0, 1); c->from[FROM_OFFLOAD_PARAM] = "--offload-param";
            c->nvme_param_dir[0] = 0; c->from[FROM_NVME_PARAM] = NULL;
        }
        else if (!strcmp(a, "--offload-nvme")) { copy_str_or_die(c->nvme_optim_dir, sizeof(c->nvme_optim_dir), a, v); c->from[FROM_NVME_OPTIM] = "--offload-nvme"; }
        else if (!strcmp(a, "--offload-param-nvme")) {
            copy_str_or_die(c->nvme_param_dir, sizeof(c->nvme_param_dir), a, v); c->from[FROM_NVME_PARAM] = "--offload-param-nvme";
            c->offload_param = 0;
        }
        else if (!strcmp(a, "--nvme-tile")) { c->nvme_tile = (long long)flag_number(a, v, &R_TILE); c->from[FROM_NVME_TILE] = "--nvme-tile"; }
        else if (!strcmp(a, "--estimate-memory")) c->estimate_world = flag_int(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--memory-budget")) c->memory_budget = flag_number(a, v, &R_BUDGET);
        else if (!strcmp(a, "--recompute")) { c->recompute = flag_int(a, v, 0, 1); c->from[FROM_RECOMPUTE] = "--recompute"; }
        else if (!strcmp(a, "--cpu-checkpointing")) { c->cpu_checkpointing = flag_int(a, v, 0, 1); c->from[FROM_CPU_CKPT] = "--cpu-checkpointing"; }
        else if (!strcmp(a, "--comm")) {
            if (strcmp(v, "auto") && strcmp(v, "nccl") && strcmp(v, "mpi")) fatal("%s: expected auto, nccl or mpi, got '%s'", a, v);
            strcpy(c->comm, v);
        }
        else if (!strcmp(a, "--attention")) {
            if (strcmp(v, "cublas") && strcmp(v, "flash") && strcmp(v, "auto"))
                fatal("%s: expected cublas, flash or auto, got '%s'", a, v);
            strcpy(c->attention, v);
            gpu_only_flags |= 1;
        }
        else if (!strcmp(a, "--gpu-baseline")) { c->gpu_baseline = flag_int(a, v, 0, 1); gpu_only_flags |= 2; }
        else fatal("unknown flag '%s' (see --help)", a);
    }
    if (!ffn_set) m->d_ff = default_ffn(arch, m->d_model);
    hf_config_for_init(c, argc, argv);
    arch = m->arch;
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
#if !TRAINER_IS_GPU
    if (gpu_only_flags & 1) report_at(&rep, MSG_NOTE, "--attention", "picks the GPU trainer's attention kernels (train_gpt); the CPU trainer has one");
    if (gpu_only_flags & 2) report_at(&rep, MSG_NOTE, "--gpu-baseline", "picks the GPU trainer's step kernels (train_gpt); the CPU trainer has one path");
#endif
    (void)gpu_only_flags;
    config_check(c, &rep);
    sample_flags_check(c, &rep, argc, argv);
    report_finish(&rep, print_rank);
    c->zero_stage = ZERO_STAGE;
}

#include "hf_config.h"
