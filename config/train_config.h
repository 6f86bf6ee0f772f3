// config/train_config.h: everything a run is configured with (TrainConfig), its
// defaults, and the ranges every numeric setting is checked against, whether it
// comes from a flag or a config key. config/flags.h fills it in: first
// config/ds_config.h's DeepSpeed JSON, then the command line. scripts/train_gpt.py
// mirrors it.
//
// Precedence: preset < --config FILE (DeepSpeed JSON) < explicit flags.
#pragma once
#include "config/model_config.h"
#include <cjson/cJSON.h>
#include <float.h>

#ifndef ZERO_STAGE
#define ZERO_STAGE 0
#endif

// the Brown corpus that make data prepares: what trains and validates when no --train / --val says
#define DEFAULT_TRAIN_PATH "data/brown/train.bin"
#define DEFAULT_VAL_PATH "data/brown/val.bin"

#ifndef OFFLOAD
#define OFFLOAD 0       // make train_gpt OFFLOAD=1 turns optimizer offload on by default; --offload 0 turns it off
#endif
#ifdef __CUDACC__
#define TRAINER_IS_GPU 1   // train_gpt: bf16 on the GPU, fp16 in the FP16=1 build
#else
#define TRAINER_IS_GPU 0   // train_gpt_cpu: fp32; --fp16 1 rounds parameters and gradients to fp16
#endif

// ----------------------------------------------------------------------------
// ranges: every numeric setting has one, checked the same way whether the value
// comes from a flag or from a config key, and each message names where it came from

typedef struct { double lo, hi; char lo_open, hi_open, integer; } Range;

#define FLT_BIG FLT_MAX   // a float setting's top: the largest 32-bit float, 3.4028235e38
static const Range R_BATCH = {1, 1 << 20, 0, 0, 1}, R_ACCUM = {1, 1 << 20, 0, 0, 1}, R_TOTAL = {1, 1 << 30, 0, 0, 1},
                   R_STEPS = {0, 1 << 30, 0, 0, 1}, R_STAGE = {0, 3, 0, 0, 1}, R_COUNT = {0, 9e18, 0, 0, 1}, R_HPZ = {1, 1 << 20, 0, 0, 1},
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

// v as the 32-bit float a setting is stored in: within the range as a float too, and not a
// non-zero value that rounds to 0 (eps 1e-46 would become 0; 1e39 would become inf).
// 3.4028235e38 is a little above FLT_MAX as a double but reads as FLT_MAX, so it is taken.
static int range_ok_f32(const Range *r, double v) {
    float f = (float)v;
    if (!isfinite(f) || (v != 0 && f == 0) || !range_ok(r, f)) return 0;
    return range_ok(r, v) || r->hi == FLT_BIG;
}

// "a number >= 0", "an integer in [1, 1048576]", "a number in [0, 1)"; for v beyond a float's
// top, the top too: a float setting's "no upper limit" is the largest 32-bit float
static const char *range_text(const Range *r, double v, char *buf, size_t n) {
    const char *what = r->integer ? "an integer" : "a number";
    int top = r->hi == FLT_BIG && fabs(v) > FLT_BIG;
    if (r->hi == FLT_BIG && r->lo < 0) snprintf(buf, n, "%s%s", what, top ? " at most 3.4028235e38 in magnitude (the largest 32-bit float)" : "");
    else if (r->hi >= 9e18 || r->hi == FLT_BIG)
        snprintf(buf, n, "%s %s %g%s", what, r->lo_open ? ">" : ">=", r->lo, top ? ", at most 3.4028235e38 (the largest 32-bit float)" : "");
    else snprintf(buf, n, "%s in %c%.10g, %.10g%c", what, r->lo_open ? '(' : '[', r->lo, r->hi, r->hi_open ? ')' : ']');
    return buf;
}

// Why v, in range as a double, is refused as the 32-bit float it is stored in (what follows the
// value in the message); 0 when the plain "expected <range>" says it.
static int range_f32_why(const Range *r, double v, char *buf, size_t n) {
    char rt[128];
    if (!range_ok(r, v) || range_ok_f32(r, v)) return 0;
    float f = (float)v;
    if (v != 0 && f == 0)
        snprintf(buf, n, "is below the smallest 32-bit float, 1.4e-45, so it would be read as 0: %s%s",
                 range_ok(r, 0) ? "write 0 if 0 is meant" : "expected ", range_ok(r, 0) ? "" : range_text(r, v, rt, sizeof(rt)));
    else snprintf(buf, n, "is %g as the 32-bit float it is used as: expected %s as a float", (double)f, range_text(r, v, rt, sizeof(rt)));
    return 1;
}

// ----------------------------------------------------------------------------
// training

enum { SCHED_COSINE = 0, SCHED_CONSTANT, SCHED_WARMUP_LR, SCHED_WARMUP_DECAY_LR, SCHED_WARMUP_COSINE_LR, N_SCHED };
static const char *SCHED_NAMES[] = {"cosine", "constant", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR"};

// DeepSpeed's optimizer.type: not given; "Adam", which is AdamW unless adam_w_mode is false; "AdamW", always decoupled
enum { OPT_DEFAULT = 0, OPT_ADAM, OPT_ADAMW };

// settings whose origin the messages name: a flag ("--batch"), a config key path, or NULL for zeroc's default
enum { FROM_B, FROM_ACCUM, FROM_TOTAL, FROM_STAGE, FROM_OFFLOAD, FROM_OFFLOAD_PARAM, FROM_SCHED, FROM_WARMUP,
       FROM_WARMUP_TYPE, FROM_MIN_LR_FRAC, FROM_WARMUP_MIN_LR, FROM_WARMUP_MAX_LR, FROM_WARMUP_MIN_RATIO,
       FROM_COS_MIN_RATIO, FROM_SCHED_TOTAL, FROM_ADAM_W_MODE, FROM_BF16, FROM_RECOMPUTE, FROM_CPU_CKPT, FROM_FP16,
       FROM_NVME_OPTIM, FROM_NVME_PARAM, FROM_NVME_OPTIM_KEY, FROM_NVME_PARAM_KEY, FROM_NVME_BUFFERS, FROM_NVME_PARAM_BUFFERS,
       FROM_AIO, FROM_NVME_TILE, FROM_SAMPLE_LEN, FROM_ZEROPP, FROM_DPU, FROM_DPU_WARMUP, FROM_RATIO, FROM_SUB_GROUP, N_FROM };

typedef struct {
    ModelConfig model;
    char arch[16], preset[32];
    // data and batch. B, accum and total_batch are 0 until a flag or config key gives them;
    // config_resolve_batch derives the rest from the world size, as DeepSpeed does.
    char train_path[512], val_path[512];   // a shard, a directory of shards or a glob (dataloader.h)
    int shuffle;          // per epoch: shard order and each shard's sequences, seeded by seed
    int B, T, accum;
    int total_batch;      // global sequences per optimizer step
    int world;            // the world size config_resolve_batch resolved with
    int steps;
    // optimizer: DeepSpeed's Adam or AdamW, with PyTorch's semantics
    float lr, beta1, beta2, eps, weight_decay, grad_clip;  // grad_clip 0: off
    int opt_type;         // OPT_*
    int adam_w_mode;      // 1: decoupled weight decay (AdamW); 0: L2, the decay added to the gradient
    // schedule (lr_at)
    int sched, warmup, warmup_log;  // warmup_log: DeepSpeed's warmup_type "log"; 0: "linear"
    float min_lr_frac;              // cosine: the floor as a fraction of lr
    float warmup_min_lr;            // WarmupLR, WarmupDecayLR: the warm-up start and the decay's end
    float warmup_min_ratio;         // WarmupCosineLR: the warm-up start as a fraction of lr
    float cos_min_ratio;            // WarmupCosineLR: the cosine's end as a fraction of lr
    int sched_total;                // --lr-total-steps, total_num_steps: the decay's horizon (0: --steps; lr_total_steps)
    // precision: DeepSpeed's fp16 block (train/step_guard.h, train/loss_scaler.h) and bf16 block (-1: not
    // given). fp16 turns on the CPU trainer's fp16 mode; the GPU trainer's must match its build (FLOATX_FP16).
    int fp16, bf16;
    float loss_scale, min_loss_scale;   // loss_scale 0: dynamic
    int initial_scale_power, loss_scale_window, hysteresis, consecutive_hysteresis;
    // non-finite steps (train/step_guard.h)
    int max_skips;                  // stop after this many consecutive counted skips; 0: never
    char inject_nonfinite[256];     // tests: --inject-nonfinite STEP:RANK[:inf|nan][,...]
    // run
    uint64_t seed;
    char init_path[512], save_dir[512], resume_dir[512], log_path[512], config_path[512];
    int save_every, threads;
    int keep_last;                  // --keep-last K: keep the newest K checkpoints; 0: all
    double timeout;                 // --timeout S: the watchdog's limit on a step or collective without progress; 0: off
    int breakdown;                  // --breakdown 1, or wall_clock_breakdown: per-phase times of each step
    double peak_tflops;             // --peak-tflops X: the device's peak for MFU; 0: the GPU's own, none on the CPU
    int val_every, val_batches, sample_every, sample_len;
    // sampling (train/sample.h): --sample 1 samples instead of training; the rest apply to --sample-every too
    int sample, num_samples, top_k, kv_cache;
    float temperature, top_p;
    const char *prompt;   // argv's text; "": the samples start from <|endoftext|> alone
    int quiet;
    // ZeRO (see zero.h)
    int zero_stage;                 // the stage the flags or config ask for (-1: none); only checked against ZERO_STAGE, the build's
    long long persistence_threshold;// stage3_param_persistence_threshold
    long long max_live_elems;       // stage3_max_live_parameters
    int prefetch;                   // stage-3 prefetch of the next unit (overlap_comm)
    int overlap_reduce;             // stages 0-1: each unit's gradient reduction starts when its backward ends (overlap_comm)
    int offload;                    // optimizer offload to CPU-Adam (GPU trainer)
    int offload_param;              // stage 3: parameter shards in pinned host memory (GPU trainer)
    int offload_dpu, dpu_warmup;    // ZeRO-Offload's delayed parameter update after dpu_warmup applied steps (zero/dpu.h)
    double offload_ratio;           // Twin-Flow, stage 3: the fraction of the optimizer partition CPU-Adam updates
    long long sub_group_size;       // Twin-Flow's sub-groups of the partition, in elements (DeepSpeed's sub_group_size)
    // ZeRO++ (zero.h), stage 3: DeepSpeed's zero_quantized_weights (qwZ), zero_hpz_partition_size
    // (hpZ; 1: off) and zero_quantized_gradients (qgZ)
    int zpp_quantized_weights, zpp_hpz_size, zpp_quantized_gradients;
    // ZeRO-Infinity (zero/infinity.h): state in each rank's file under a directory on NVMe; "": off
    char nvme_optim_dir[512];       // --offload-nvme DIR, offload_optimizer "nvme": m, v and a separate fp32 master
    char nvme_param_dir[512];       // --offload-param-nvme DIR, offload_param "nvme", stage 3: the parameter shard
    long long nvme_tile;            // --nvme-tile: elements per tile of the streamed optimizer step
    int nvme_buffers;               // offload_optimizer.buffer_count: tiles in memory at once
    int nvme_pipeline_read, nvme_pipeline_write, nvme_fast_init;   // offload_optimizer's pipeline_read/_write, fast_init
    int nvme_param_buffers;         // offload_param.buffer_count; 2 are used
    long long nvme_param_buffer_size; // offload_param.buffer_size; 0: not given
    long long aio_block_size;       // DeepSpeed's "aio" block (zero/nvme_store.h)
    int aio_queue_depth, aio_thread_count, aio_single_submit, aio_overlap_events;
    int estimate_world;             // --estimate-memory N: print the per-rank memory of every stage at N ranks, exit
    double memory_budget;           // --memory-budget GIB, with --estimate-memory: the largest micro batch that fits
    // activations (train/activations.h)
    int recompute;                  // activation checkpointing: the backward recomputes each layer's forward
    int cpu_checkpointing;          // GPU trainer, with recompute: the layer inputs in pinned host memory
    char comm[8];                   // "auto", "nccl" or "mpi" (GPU trainer; comm_setup_backend)
    // GPU trainer: which paths a step runs (train_gpt.cu). The defaults are the paths a GPU run has validated
    // (docs/gpu.md, "Validated and opt-in paths"); each of these turns on one that has not run on a GPU yet
    char attention[8];              // --attention cublas|flash|auto: the cuBLAS path (scores materialized), fused flash
                                    // attention, or flash where its kernels apply (train/activations.h: gpu_flash_attention)
    int lean_step;                  // --lean-step 1: the global norm and AdamW in one launch each over the partition
                                    // (zero/device.cuh's zb_lean_*); 0: segment by segment
    int fuse_residual;              // --fuse-residual 1: a layer's last residual add inside the next norm's kernel
    int device_loss;                // --device-loss 1: the step's loss summed on the device, read once per step;
                                    // 0: each micro-step's B*T losses copied to the host and summed there
    int plan_cache;                 // --plan-cache 1: cuBLASLt plans cached per call shape; 0: the heuristic on every call
    int bias_grad_epilogue;         // --bias-grad-epilogue 1: the bias gradients from the dweight GEMMs' cuBLASLt BGRADB
                                    // epilogue (cuda/matmul.cuh); 0: the column-sum kernel
    char tokenizer_path[512];
    // monitors (train/monitor.h): DeepSpeed's tensorboard, csv_monitor and wandb blocks; --tensorboard, --csv-monitor
    int tensorboard, csv_monitor, wandb;      // on
    char tb_path[512], csv_path[512];         // output_path: the job's directory goes in it ("": here)
    char tb_job[128], csv_job[128];           // job_name: the files go in output_path/job_name
    char wandb_group[128], wandb_team[128], wandb_project[128];   // for the note naming the upload line
    // where settings came from (FROM_*), and the config keys that said "auto"
    const char *from[N_FROM];
    char config_auto[4096];
} TrainConfig;

// Where setting k came from, for a message printed outside the config report: its flag, or its
// config key after the file's name, as the report names them; `flag` when nothing set it.
static const char *from_text(const TrainConfig *c, int k, const char *flag, char *buf, size_t n) {
    const char *f = c->from[k];
    if (!f) return flag;
    if (f[0] == '-' || !c->config_path[0]) return f;
    snprintf(buf, n, "%s: %s", c->config_path, f);
    return buf;
}

// The schedule's horizon: --lr-total-steps or total_num_steps, else the run's --steps.
// A resumed run keeps its checkpoint's (train/checkpoint.h config_from_run_files).
static int lr_total_steps(const TrainConfig *c) { return c->sched_total > 0 ? c->sched_total : c->steps; }

// a monitor's directory: output_path/job_name, joined as DeepSpeed's os.path.join joins them
static void monitor_job_dir(char *out, size_t n, const char *output_path, const char *job) {
    snprintf(out, n, "%s%s%s", output_path, output_path[0] && output_path[strlen(output_path) - 1] != '/' ? "/" : "", job);
}

#define DEFAULT_TIMEOUT 600   // --timeout's seconds

static void train_config_defaults(TrainConfig *c) {
    memset(c, 0, sizeof(*c));
    strcpy(c->arch, "gpt2");
    strcpy(c->preset, "tiny");
    strcpy(c->train_path, DEFAULT_TRAIN_PATH);
    strcpy(c->val_path, DEFAULT_VAL_PATH);
    strcpy(c->tokenizer_path, "data/gpt2_tokenizer.bin");
    c->T = 64; c->steps = 50;   // B (4) and accum (1) come from config_resolve_batch
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
    c->keep_last = 0; c->timeout = DEFAULT_TIMEOUT;
    c->val_every = 0; c->val_batches = 8; c->sample_every = 0; c->sample_len = 64;
    c->sample = 0; c->num_samples = 1; c->top_k = 0; c->kv_cache = 1; c->temperature = 1.0f; c->top_p = 1.0f; c->prompt = "";
    c->zero_stage = -1;  // not asked for: the build's stage
    c->persistence_threshold = 100000LL;
    c->max_live_elems = 1000000000LL;
    c->prefetch = 1;
    c->zpp_hpz_size = 1;
    strcpy(c->comm, "auto");
    // The GPU step's paths: each default is what a GPU run has validated. A path becomes the default by
    // changing its one line here, in the commit that records the device run it passed (docs/gpu.md,
    // "Validated and opt-in paths"); attention's becomes "auto" (flash where its kernels apply).
    strcpy(c->attention, "cublas");
    c->lean_step = 0;
    c->fuse_residual = 0;
    c->device_loss = 0;
    c->plan_cache = 0;
    // Stages 0-1 start each unit's gradient reduction inside the backward on the CPU, where it is
    // tested; the GPU's validated step reduces at the boundary until NCCL's overlap has run on a device.
    c->overlap_reduce = !TRAINER_IS_GPU;
    c->bias_grad_epilogue = 0;
    c->offload = OFFLOAD;
    c->dpu_warmup = 40;       // the paper enables DPU after a few tens of steps
    c->offload_ratio = 1.0;   // DeepSpeed's default: all of it
    c->sub_group_size = 1000000000LL;   // DeepSpeed's default
    c->nvme_tile = 1 << 20;   // the GPU's CPU-Adam tile (zero/device.cuh)
    c->nvme_buffers = 4; c->nvme_param_buffers = 5;   // DeepSpeed's defaults
    c->nvme_pipeline_read = c->nvme_pipeline_write = 1;   // zeroc's; DeepSpeed's default is false
    c->aio_block_size = 1 << 20; c->aio_queue_depth = 8; c->aio_thread_count = 1;   // DeepSpeed's aio defaults
    c->aio_single_submit = 0; c->aio_overlap_events = 1;
    strcpy(c->tb_job, "DeepSpeedJobName"); strcpy(c->csv_job, "DeepSpeedJobName");   // DeepSpeed's defaults
    strcpy(c->wandb_project, "deepspeed");
}

// ----------------------------------------------------------------------------
// the model a file holds: config.json beside a Hugging Face --init, a zeroc model
// file's header, a --resume checkpoint. As nanoGPT's resume takes its model_args
// from the checkpoint, the run takes the file's model; an explicit --arch, size flag
// or --preset that disagrees with it is one error naming both values.

static int flag_given(int argc, char **argv, const char *flag) {
    for (int i = 1; i + 1 < argc; i++) if (strcmp(argv[i], flag) == 0) return 1;
    return 0;
}

// whose: "the checkpoint's", "config.json's", ...; path: the file, for the message
static void config_take_model(TrainConfig *c, const ModelConfig *file, const char *whose, const char *path, int argc, char **argv) {
    const ModelConfig *m = &c->model;
    if (flag_given(argc, argv, "--arch") && m->arch != file->arch)
        fatal("--arch %s disagrees with %s %s (%s): the model comes from it; drop or fix the flag", arch_name(m->arch), whose,
              arch_name(file->arch), path);
    int preset = flag_given(argc, argv, "--preset");
    ModelConfig p = *m;   // the preset's sizes in the file's architecture (a llama preset has fewer kv heads)
    if (preset) model_apply_preset(&p, file->arch, c->preset);
    struct { const char *flag, *what; int by_preset, mine, of_preset, theirs; } chk[] = {
        {"--layers", "layers", 1, m->n_layer, p.n_layer, file->n_layer},
        {"--heads", "heads", 1, m->n_head, p.n_head, file->n_head},
        {"--kv-heads", "key/value heads", file->arch == ARCH_LLAMA, m->n_kv_head, p.n_kv_head, file->n_kv_head},
        {"--dim", "width", 1, m->d_model, p.d_model, file->d_model},
        {"--ffn", "MLP width", 0, m->d_ff, p.d_ff, file->d_ff},
        {"--vocab", "vocabulary", 1, m->vocab_size, p.vocab_size, file->vocab_size},
        {"--max-seq", "maximum sequence length", 1, m->max_seq, p.max_seq, file->max_seq},
    };
    for (size_t i = 0; i < sizeof(chk) / sizeof(chk[0]); i++) {
        int given = flag_given(argc, argv, chk[i].flag);
        if (given && chk[i].mine != chk[i].theirs)
            fatal("%s %d disagrees with %s %s %d (%s): the model comes from it; drop or fix the flag", chk[i].flag, chk[i].mine,
                  whose, chk[i].what, chk[i].theirs, path);
        if (!given && preset && chk[i].by_preset && chk[i].of_preset != chk[i].theirs)
            fatal("--preset %s (%s %d) disagrees with %s %s %d (%s): the model comes from it; drop or fix the flag", c->preset,
                  chk[i].what, chk[i].of_preset, whose, chk[i].what, chk[i].theirs, path);
    }
    c->model = *file;
    snprintf(c->arch, sizeof(c->arch), "%s", arch_name(file->arch));
}
