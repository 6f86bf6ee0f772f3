// config/flags.h: the command line of train_gpt_cpu and train_gpt, which
// scripts/train_gpt.py mirrors flag for flag: --help, the flags, the checks of the
// whole configuration, and parse_args. parse_args applies a preset, then the
// DeepSpeed JSON file (--config, config/ds_config.h), then the flags.
#pragma once
#include "config/lr_schedule.h"
#include "config/ds_config.h"
#include "config/hf_config.h"

// ----------------------------------------------------------------------------
// command line

static void print_help(FILE *f, const char *prog) {
    fprintf(f, "usage: %s [flags]\n\n", prog);
    fprintf(f, "model\n"
           "  --arch gpt2|llama        architecture (default gpt2)\n"
           "  --preset NAME            model size preset (default tiny):\n");
    for (int i = 0; i < N_PRESETS; i++) fprintf(f, "                             %-10s %s\n", PRESETS[i].name, PRESETS[i].what);
    fprintf(f, "  --layers N --heads N --kv-heads N --dim N --ffn N --vocab N --max-seq N\n"
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
           "  --lr-total-steps N       the decay's horizon (DeepSpeed's total_num_steps): default --steps; with --resume\n"
           "                           the checkpoint's, whatever --steps says (0: re-plan it to this run's --steps)\n"
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
           "  --tensorboard DIR        TensorBoard event files in DIR/JOB (DeepSpeed's tensorboard block; docs/monitoring.md)\n"
           "  --csv-monitor DIR        one CSV file per metric in DIR/JOB (DeepSpeed's csv_monitor block)\n"
           "  --job-name JOB           the monitors' job name (default DeepSpeedJobName, as in DeepSpeed)\n"
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
           "  --sample-len N           tokens generated per sample (default 64, or fewer when the model's\n"
           "                           positions end first: a note says so)\n"
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
           "  --overlap-reduce 0|1     stages 0-1: start each unit's gradient reduction when its backward ends\n"
           "                           (default 1 on the CPU, 0 on the GPU until a device run validates it)\n"
           "  --zero-quantized-weights 0|1     ZeRO++ qwZ, stage 3: parameters all-gathered as int8 blocks\n"
           "  --zero-hpz-partition-size N      ZeRO++ hpZ, stage 3: a secondary partition over groups of N ranks, a divisor\n"
           "                           of the world, serves a unit's later gathers in each step (default 1: off)\n"
           "  --zero-quantized-gradients 0|1   ZeRO++ qgZ, stage 3: gradients averaged by int4 all-to-alls, in the node,\n"
           "                           then across nodes; plain on one node (docs/zero.md)\n"
           "  --offload 0|1            optimizer state on the CPU (GPU trainer)\n"
           "  --offload-param 0|1      stage 3: parameter shards in host memory (GPU trainer)\n"
           "  --offload-nvme DIR       ZeRO-Infinity: the optimizer state (m, v; the fp32 master where separate) in each\n"
           "                           rank's file under DIR, streamed through the step in tiles (both trainers)\n"
           "  --offload-param-nvme DIR stage 3: the parameter shard in each rank's file under DIR, read one unit ahead\n"
           "  --offload-dpu 0|1        ZeRO-Offload's delayed parameter update: step t's AdamW on its own thread while\n"
           "                           step t+1's forward and backward run on the parameters of step t-1 (zero/dpu.h)\n"
           "  --dpu-warmup N           applied steps updated in place before the delay starts (default 40)\n"
           "  --offload-ratio R        Twin-Flow, stage 3: the fraction of the optimizer partition CPU-Adam updates,\n"
           "                           the last sub-groups (default 1: all; the CPU trainer counts the split only)\n"
           "  --sub-group-size N       Twin-Flow's sub-groups of the optimizer partition, elements (default 1e9)\n"
           "  --nvme-tile N            elements per tile of the streamed optimizer step (default 1048576)\n"
           "  --estimate-memory N      print the per-rank memory of every stage at N ranks (model states, activations\n"
           "                           for --batch/--seq, working buffers), allocate nothing, exit\n"
           "  --memory-budget GIB      with --estimate-memory: the largest micro batch per rank within GIB, per stage,\n"
           "                           with and without --recompute\n"
           "activations\n"
           "  --recompute 0|1          activation checkpointing: keep each layer's input only, recompute in the backward\n"
           "  --cpu-checkpointing 0|1  with --recompute (GPU trainer): the layer inputs in pinned host memory\n"
           "  --comm auto|nccl|mpi     GPU collective backend (auto: NCCL with one GPU per rank; one rank: none;\n"
           "                           ranks sharing a GPU: host-staged MPI, with a notice; nccl there needs\n"
           "                           NCCL 2.30+ and NCCL_MULTI_RANK_GPU_ENABLE=1, experimental)\n"
           "GPU step paths (train_gpt; the defaults have run on a GPU, the others not yet: docs/gpu.md)\n"
           "  --attention cublas|flash|auto\n"
           "                           cuBLAS with the scores materialized (default), the fused flash attention\n"
           "                           (cuda/flash_attention.cuh: bf16, head size 64 or 128), or auto: flash where\n"
           "                           it applies, else cuBLAS\n"
           "  --lean-step 0|1          1: the global norm and AdamW in one launch each over the partition (default 0)\n"
           "  --fuse-residual 0|1      1: a layer's last residual add inside the next norm's kernel (default 0)\n"
           "  --device-loss 0|1        1: the loss summed on the device, read once per step (default 0: per micro-step)\n"
           "  --plan-cache 0|1         1: cuBLASLt plans cached per call shape (default 0: the heuristic per call)\n"
           "  --bias-grad-epilogue 0|1 1: the bias gradients from the weight-gradient GEMMs' cuBLASLt epilogue (BGRADB)\n"
           "                           (default 0: a separate pass over each layer's output gradient)\n",
           ZERO_STAGE);
}

// The known flag closest to an unknown one, if close enough to be a likely misspelling
// (likely_misspelling, on the names without their dashes): the flags are those --help lists,
// so that the suggestions never drift from the help. Returns 1 with the flag in out.
static int flag_did_you_mean(const char *unknown, char *out, size_t n) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return 0;
    print_help(f, "train_gpt");
    fclose(f);
    int best = 4;
    for (const char *p = text; (p = strstr(p, "--")) != NULL;) {
        size_t k = 2;
        while (isalnum((unsigned char)p[k]) || p[k] == '-') k++;
        char flag[64];
        if (k > 2 && k < sizeof(flag)) {
            snprintf(flag, sizeof(flag), "%.*s", (int)k, p);
            int d = edit_distance(unknown, flag);
            if (d < best && likely_misspelling(unknown + 2, flag + 2, d)) { best = d; snprintf(out, n, "%s", flag); }
        }
        p += k;
    }
    free(text);
    return best < 4;
}

// The one line for a flag this program does not know.
static void flag_unknown(const char *a) {
    char name[64], dym[64], hint[160] = "";
    const char *eq = strchr(a, '=');
    snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);   // --lr=0.1: the flag is --lr
    if (!strcmp(name, "--help") || !strcmp(name, "--config-keys")) fatal("%s takes no value, got '%s'", name, a);
    if (eq && flag_did_you_mean(name, dym, sizeof(dym)) && !strcmp(dym, name))
        snprintf(hint, sizeof(hint), ": flags take their value after a space, as in %s %s", dym, eq + 1);
    else if (flag_did_you_mean(name, dym, sizeof(dym)))
        snprintf(hint, sizeof(hint), " (did you mean %s?)", dym);
    // the launchers' flags a DeepSpeed or Hugging Face user brings: what zeroc takes instead
    else if (!strcmp(name, "--deepspeed") || !strcmp(name, "--deepspeed_config") || !strcmp(name, "--ds_config") ||
             !strcmp(name, "--ds-config"))
        snprintf(hint, sizeof(hint), ": the DeepSpeed config is --config FILE here");
    else if (!strcmp(name, "--local_rank") || !strcmp(name, "--local-rank"))
        snprintf(hint, sizeof(hint), ": each rank learns its rank from mpirun (or srun), not from a flag");
    fatal("unknown flag '%s'%s (see --help)", a, hint[0] ? hint : "");
}

// A number for `flag` within its range, or a one-line error naming the flag.
// Integers below 2^31 are read as decimal integers; counts and numbers with strtod, so 5e8 works.
static double flag_number(const char *flag, const char *s, const Range *r) {
    char *end;
    errno = 0;
    double v = r->integer && r->hi < 9e18 ? (double)strtoll(s, &end, 10) : strtod(s, &end);
    if (!r->integer && errno == ERANGE && fabs(v) <= DBL_MIN) {   // 1e-400: not zero, below even a double
        errno = 0;
        if (v == 0) v = copysign(DBL_TRUE_MIN, s[0] == '-' ? -1 : 1);
    }
    if (!errno && *end == 0 && end != s && (r->integer ? range_ok(r, v) : range_ok_f32(r, v))) return v;
    char want[192];
    if (!errno && *end == 0 && end != s && !r->integer && range_f32_why(r, v, want, sizeof(want))) fatal("%s: '%s' %s", flag, s, want);
    fatal("%s: expected %s, got '%s'", flag, range_text(r, end == s ? 0 : v, want, sizeof(want)), s);
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
    case FROM_SCHED_TOTAL: return 1u << SCHED_COSINE | 1u << SCHED_WARMUP_DECAY_LR | 1u << SCHED_WARMUP_COSINE_LR;
    default: return 0;
    }
}

// An optimizer block without lr, betas or weight_decay trains here with zeroc's defaults,
// where DeepSpeed's Adam/AdamW would take their constructor's: one note names both.
// A config without gradient_clipping gets its own.
static void optimizer_defaults_note(const TrainConfig *c, ConfigReport *r, int absent, int argc, char **argv) {
    if ((absent & DS_ABSENT_LR) && flag_given(argc, argv, "--lr")) absent &= ~DS_ABSENT_LR;
    if ((absent & DS_ABSENT_BETAS) && (flag_given(argc, argv, "--beta1") || flag_given(argc, argv, "--beta2"))) absent &= ~DS_ABSENT_BETAS;
    if ((absent & DS_ABSENT_WD) && flag_given(argc, argv, "--weight-decay")) absent &= ~DS_ABSENT_WD;
    if ((absent & DS_ABSENT_CLIP) && !flag_given(argc, argv, "--clip") && c->grad_clip > 0)
        report_at(r, MSG_NOTE, "gradient_clipping", "absent: zeroc clips the gradient norm at %g, DeepSpeed does not clip (0): "
                  "give gradient_clipping to train as DeepSpeed does", c->grad_clip);
    absent &= ~DS_ABSENT_CLIP;
    if (!absent) return;
    char names[64] = "", ours[96] = "", theirs[64] = "";
    if (absent & DS_ABSENT_LR) { strcat(names, ", lr"); snprintf(ours, sizeof(ours), ", %g", c->lr); strcat(theirs, ", 0.001"); }
    if (absent & DS_ABSENT_BETAS) {
        strcat(names, ", betas");
        snprintf(ours + strlen(ours), sizeof(ours) - strlen(ours), ", [%g, %g]", c->beta1, c->beta2);
        strcat(theirs, ", [0.9, 0.999]");
    }
    if (absent & DS_ABSENT_WD) {
        strcat(names, ", weight_decay");
        snprintf(ours + strlen(ours), sizeof(ours) - strlen(ours), ", %g", c->weight_decay);
        strcat(theirs, ", 0");
    }
    report_at(r, MSG_NOTE, "optimizer.params", "%s absent: zeroc trains with %s, DeepSpeed's Adam/AdamW (FusedAdam, CPU-Adam) "
              "with %s: give %s to train as DeepSpeed does", names + 2, ours + 2, theirs + 2, names + 2);
}

// ZeRO-Offload's delayed parameter update, DPU (zero/dpu.h), and Twin-Flow's ratio.
// DPU runs the host's update beside the next step: on the GPU it needs the optimizer
// offloaded, and neither NVMe's streamed step nor Twin-Flow's device side joins it.
// DeepSpeed reads the ratio at stage 3 with offload only; the estimator keeps both.
static void offload_flow_check(TrainConfig *c, ConfigReport *r) {
    const char *dpu = c->from[FROM_DPU] ? c->from[FROM_DPU] : "--offload-dpu";
    const char *ratio = c->from[FROM_RATIO] ? c->from[FROM_RATIO] : "--offload-ratio";
    if (c->offload_dpu && TRAINER_IS_GPU && !c->offload)
        report_at(r, MSG_ERROR, dpu, "the delayed update runs CPU-Adam beside the next step: it needs the optimizer offloaded "
                  "(--offload 1, offload_optimizer device \"cpu\")");
    else if (c->offload_dpu && (c->nvme_optim_dir[0] || c->nvme_param_dir[0]))
        report_at(r, MSG_ERROR, dpu, "is not combined with NVMe offload: the streamed step would share the NVMe files with the "
                  "next step's reads");
    if (!c->offload_dpu && c->from[FROM_DPU_WARMUP])
        report_at(r, MSG_NOTE, c->from[FROM_DPU_WARMUP], "no effect without the delayed update (--offload-dpu 1)");
    // a resume's steps and its updates so far come from the checkpoint, later
    if (c->offload_dpu && c->steps <= c->dpu_warmup && !c->resume_dir[0] && !c->sample && !c->estimate_world)
        report_at(r, MSG_NOTE, dpu, "no effect in this run: the delay starts after %d applied update%s (--dpu-warmup) and the "
                  "run has %d step%s", c->dpu_warmup, c->dpu_warmup == 1 ? "" : "s", c->steps, c->steps == 1 ? "" : "s");
    if (c->offload_ratio >= 1 && c->from[FROM_SUB_GROUP])
        report_at(r, MSG_NOTE, c->from[FROM_SUB_GROUP], "no effect without Twin-Flow's split (offload_optimizer.ratio or "
                  "--offload-ratio below 1): CPU-Adam steps the partition in fixed tiles");
    if (c->offload_ratio >= 1 || c->estimate_world) return;
    if (ZERO_STAGE != 3)
        report_at(r, MSG_NOTE, ratio, "%g: no effect: DeepSpeed splits the optimizer partition at stage 3 only, and this binary "
                  "is stage %d", c->offload_ratio, ZERO_STAGE);
    else if (TRAINER_IS_GPU && !c->offload)
        report_at(r, MSG_NOTE, ratio, "%g: no effect without the optimizer offloaded (--offload 1): the whole partition is on "
                  "the device", c->offload_ratio);
    else if (c->offload_dpu)
        report_at(r, MSG_ERROR, ratio, "%g: Twin-Flow's device side updates in the step, the delayed update after it: use one "
                  "of the two", c->offload_ratio);
    else if (c->nvme_optim_dir[0])
        report_at(r, MSG_ERROR, ratio, "%g: partial offload with the optimizer on NVMe is not supported", c->offload_ratio);
    else if (TRAINER_IS_GPU && c->nvme_param_dir[0])
        report_at(r, MSG_ERROR, ratio, "%g: Twin-Flow's device side writes the parameter shard on the device, and here it is "
                  "on NVMe: use 1, or the shard in memory", c->offload_ratio);
    else if (!TRAINER_IS_GPU)
        report_at(r, MSG_NOTE, ratio, "%g: the CPU trainer updates both sides on its CPU: the split is counted, the numbers "
                  "are those of 1", c->offload_ratio);
    else
        report_at(r, MSG_NOTE, ratio, "%g: Twin-Flow's device side in train_gpt (the GPU AdamW beside CPU-Adam) has not run "
                  "on a GPU yet", c->offload_ratio);
    if (ZERO_STAGE != 3 || (TRAINER_IS_GPU && !c->offload)) c->offload_ratio = 1;
}

// ZeRO-Infinity's settings, from the config's keys and the flags together. A device
// "nvme" needs its directory. A setting only NVMe offload uses says so when nothing
// goes to NVMe. The step's tiles need their buffers. Each trainer can put only some
// states on NVMe.
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
    if (c->aio_block_size % 4096)   // zero/nvme_store.h's NVME_ALIGN
        report_at(r, MSG_ERROR, "aio.block_size", "%lld: a multiple of 4096 bytes (O_DIRECT's alignment)", c->aio_block_size);
}

#define TRAINER_NAME (TRAINER_IS_GPU ? "train_gpt" : "train_gpt_cpu")

// The path of this trainer built with ZeRO stage `stage`, in make's build/ layout (the same
// offload and precision build for train_gpt), when that binary exists: under the working
// directory, or under the repository this binary was run from (./train_gpt_cpu or
// build/z0/train_gpt_cpu alike). Returns 1 with the path in out, else 0.
static int stage_binary(int stage, char *out, size_t n) {
    char rel[128], dir[1024];
#if TRAINER_IS_GPU
    snprintf(rel, sizeof(rel), "build/gpu_z%d_o%d%s/train_gpt", stage, OFFLOAD, FLOATX_FP16 ? "_fp16" : "");
#else
    snprintf(rel, sizeof(rel), "build/z%d/train_gpt_cpu", stage);
#endif
    struct stat sb;
    if (stat(rel, &sb) == 0) { snprintf(out, n, "%s", rel); return 1; }
    ssize_t len = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
    if (len <= 0) return 0;
    dir[len] = 0;
    *strrchr(dir, '/') = 0;                 // the binary's directory
    char *build = strstr(dir, "/build/");   // build/<variant>/: the repository is above it
    if (build) *build = 0;
    snprintf(out, n, "%s/%s", dir, rel);
    return stat(out, &sb) == 0;
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
    int W = c->warmup > 2 ? c->warmup : 2, T = lr_total_steps(c);
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
    char other[1200];
    if (c->zero_stage >= 0 && c->zero_stage != ZERO_STAGE && stage_binary(c->zero_stage, other, sizeof(other)))
        report_at(r, MSG_ERROR, c->from[FROM_STAGE], "asks for ZeRO stage %d but this binary was built with ZERO=%d: run %s, "
                  "built with ZERO=%d (or make %s ZERO=%d)", c->zero_stage, ZERO_STAGE, other, c->zero_stage, TRAINER_NAME, c->zero_stage);
    else if (c->zero_stage >= 0 && c->zero_stage != ZERO_STAGE)
        report_at(r, MSG_ERROR, c->from[FROM_STAGE], "asks for ZeRO stage %d but this binary was built with ZERO=%d (rebuild: make %s ZERO=%d)",
                  c->zero_stage, ZERO_STAGE, TRAINER_NAME, c->zero_stage);
#if !TRAINER_IS_GPU
    // The CPU trainer's model states live in host memory already, so offload has nothing to
    // move. The estimator keeps the settings, since its train_gpt rows use them.
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
    if (c->sample) c->offload_dpu = 0, c->offload_ratio = 1;   // no optimizer runs: --sample's own note names the flags
    else offload_flow_check(c, r);
    // the wandb block writes nothing: W&B can upload the tensorboard block's event files, if that block is on
    if (c->wandb) {
        char dir[700], team[160] = "", group[200] = "";
        monitor_job_dir(dir, sizeof(dir), c->tb_path, c->tb_job);
        if (c->wandb_team[0]) snprintf(team, sizeof(team), " -e %s", c->wandb_team);
        if (c->wandb_group[0]) snprintf(group, sizeof(group), "; group %s: wandb sync takes none, set it in W&B", c->wandb_group);
        if (c->tensorboard)
            report_at(r, MSG_NOTE, "wandb", "no effect here: zeroc does not call W&B; the tensorboard block's event files in %s "
                      "upload with: wandb sync --sync-tensorboard -p %s%s %s%s", dir, c->wandb_project, team, dir, group);
        else report_at(r, MSG_NOTE, "wandb", "no effect here: zeroc does not call W&B and the tensorboard block is off, so "
                       "nothing is written for W&B (enable the tensorboard block and upload its files with wandb sync --sync-tensorboard)");
    }
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
    // ZeRO++ changes stage 3's collectives; DeepSpeed reads its keys only at stage 3
    if ((c->zpp_quantized_weights || c->zpp_hpz_size > 1 || c->zpp_quantized_gradients) && ZERO_STAGE != 3 && !c->estimate_world)
        report_at(r, MSG_NOTE, c->from[FROM_ZEROPP], "no effect: ZeRO++ (qwZ, hpZ, qgZ) changes stage 3's collectives and this "
                  "binary is stage %d (make ... ZERO=3)", ZERO_STAGE);
    if (c->offload_param && ZERO_STAGE != 3)
        report_at(r, MSG_ERROR, c->from[FROM_OFFLOAD_PARAM] ? c->from[FROM_OFFLOAD_PARAM] : "--offload-param",
                  "parameter offload needs ZeRO stage 3: parameters are partitioned only there");
}

// Sampling against the mode: --sample 1 needs weights to sample from, and the flags
// of the other mode have no effect, which one note says, naming them. The sampling
// flags also shape the samples of --sample-every.
static void sample_flags_check(const TrainConfig *c, ConfigReport *r, int argc, char **argv) {
    static const char *TRAINING[] = {"--steps", "--lr", "--beta1", "--beta2", "--eps", "--weight-decay", "--clip", "--adam-w-mode",
        "--lr-schedule", "--lr-total-steps", "--warmup", "--warmup-type", "--min-lr-frac", "--warmup-min-lr", "--warmup-min-ratio", "--cos-min-ratio",
        "--train", "--val", "--batch", "--accum", "--total-batch", "--seq", "--save", "--save-every", "--val-every",
        "--val-batches", "--sample-every", "--log", "--tensorboard", "--csv-monitor", "--job-name", "--offload-dpu", "--dpu-warmup",
        "--offload-ratio", "--sub-group-size", NULL};
    static const char *SAMPLING[] = {"--prompt", "--num-samples", "--temperature", "--top-k", "--top-p", "--kv-cache", NULL};
    if (c->sample && !c->init_path[0] && !c->resume_dir[0])
        report_at(r, MSG_ERROR, "--sample", "1 needs weights to sample from: --init FILE (a model file or a model.safetensors) or --resume DIR");
    if (c->init_path[0] && c->resume_dir[0])
        report_at(r, MSG_ERROR, "--init", "%s and --resume %s both give the model: a resume takes it from the checkpoint, so --init would "
                  "be ignored; drop one of them", c->init_path, c->resume_dir);
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

// The model's shape and the sequence length: each error names the flag.
static void model_config_check(const TrainConfig *c) {
    const ModelConfig *m = &c->model;
    if (m->d_model % m->n_head) fatal("--dim %d is not divisible by --heads %d", m->d_model, m->n_head);
    if (m->n_head % m->n_kv_head) fatal("--heads %d is not divisible by --kv-heads %d", m->n_head, m->n_kv_head);
    if (m->arch == ARCH_LLAMA && (m->d_model / m->n_head) % 2) fatal("llama: head dimension %d must be even for RoPE", m->d_model / m->n_head);
    if (c->T > m->max_seq) fatal("--seq %d exceeds the model's maximum sequence length %d (--max-seq)", c->T, m->max_seq);
}

// Whether the model comes from a zeroc file read after parse_args: --resume's checkpoint, or
// --init's model file (a Hugging Face --init is read here, hf_config_for_init).
static int config_model_from_run_file(const TrainConfig *c) {
    return c->resume_dir[0] || (c->init_path[0] && !st_sniff(c->init_path));
}

// --timeout as the command line gives it, read before MPI_Init and the full parse for the
// start-up limit (comm/watchdog.h); a value the parse will refuse counts as the default.
static double flags_prescan_timeout(int argc, char **argv) {
    double timeout = DEFAULT_TIMEOUT;
    for (int i = 1; i + 1 < argc; i++) {
        char *end;
        double v = strcmp(argv[i], "--timeout") ? -1 : strtod(argv[i + 1], &end);
        if (v >= 0 && *end == 0 && range_ok(&R_TIMEOUT, v)) timeout = v;
    }
    return timeout;
}

// Parses argv into c. Returns, or exits with the errors, one line each. --help and
// --config-keys print and exit 0.


static void parse_args(TrainConfig *c, int argc, char **argv, int print_rank) {
    train_config_defaults(c);
    // pass 1: arch, preset and config file come first so that flags override them
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { if (print_rank) print_help(stdout, argv[0]); exit(0); }
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
    if (!model_apply_preset(&c->model, arch, c->preset)) {
        const char *dym = NULL;
        for (int i = 0, best = 4; i < N_PRESETS; i++) {
            int d = edit_distance(c->preset, PRESETS[i].name);
            if (d < best && likely_misspelling(c->preset, PRESETS[i].name, d)) { best = d; dym = PRESETS[i].name; }
        }
        char hint[64] = "";
        if (dym) snprintf(hint, sizeof(hint), " (did you mean %s?)", dym);
        fatal("--preset: unknown preset '%s'%s (see --help)", c->preset, hint);
    }
    ConfigReport rep = {c->config_path, NULL, 0, 0, 0};
    int ds_absent = c->config_path[0] ? ds_config_apply(c, c->config_path, &rep) : 0;
    int ffn_set = 0, job_flag = 0;
    const char *overlap_flag = NULL;
    const char *gpu_path_given[6] = {0};   // --attention, --lean-step, --fuse-residual, --device-loss, --plan-cache,
                                           // --bias-grad-epilogue (as given)
    ModelConfig *m = &c->model;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) fatal("unexpected argument '%s' (see --help)", a);
        char listed[64];
        if (i + 1 >= argc && !(flag_did_you_mean(a, listed, sizeof(listed)) && !strcmp(listed, a))) flag_unknown(a);
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
        else if (!strcmp(a, "--lr-total-steps")) { c->sched_total = (int)flag_number(a, v, &R_STEPS); c->from[FROM_SCHED_TOTAL] = "--lr-total-steps"; }
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
        else if (!strcmp(a, "--tensorboard")) { copy_str_or_die(c->tb_path, sizeof(c->tb_path), a, v); c->tensorboard = 1; }
        else if (!strcmp(a, "--csv-monitor")) { copy_str_or_die(c->csv_path, sizeof(c->csv_path), a, v); c->csv_monitor = 1; }
        else if (!strcmp(a, "--job-name")) {
            copy_str_or_die(c->tb_job, sizeof(c->tb_job), a, v);
            copy_str_or_die(c->csv_job, sizeof(c->csv_job), a, v);
            job_flag = 1;
        }
        else if (!strcmp(a, "--threads")) c->threads = flag_int(a, v, 0, 4096);
        else if (!strcmp(a, "--val-every")) c->val_every = flag_int(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--val-batches")) c->val_batches = flag_int(a, v, 0, 1 << 20);
        else if (!strcmp(a, "--sample-every")) c->sample_every = flag_int(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--sample-len")) { c->sample_len = flag_int(a, v, 1, 1 << 20); c->from[FROM_SAMPLE_LEN] = "--sample-len"; }
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
        else if (!strcmp(a, "--overlap-reduce")) { c->overlap_reduce = flag_int(a, v, 0, 1); overlap_flag = a; }
        else if (!strcmp(a, "--zero-quantized-weights")) { c->zpp_quantized_weights = flag_int(a, v, 0, 1); c->from[FROM_ZEROPP] = a; }
        else if (!strcmp(a, "--zero-hpz-partition-size")) { c->zpp_hpz_size = (int)flag_number(a, v, &R_HPZ); c->from[FROM_ZEROPP] = a; }
        else if (!strcmp(a, "--zero-quantized-gradients")) { c->zpp_quantized_gradients = flag_int(a, v, 0, 1); c->from[FROM_ZEROPP] = a; }
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
        else if (!strcmp(a, "--offload-dpu")) { c->offload_dpu = flag_int(a, v, 0, 1); c->from[FROM_DPU] = "--offload-dpu"; }
        else if (!strcmp(a, "--dpu-warmup")) { c->dpu_warmup = (int)flag_number(a, v, &R_STEPS); c->from[FROM_DPU_WARMUP] = a; }
        else if (!strcmp(a, "--offload-ratio")) { c->offload_ratio = flag_number(a, v, &R_FRAC); c->from[FROM_RATIO] = "--offload-ratio"; }
        else if (!strcmp(a, "--sub-group-size")) { c->sub_group_size = (long long)flag_number(a, v, &R_TILE); c->from[FROM_SUB_GROUP] = a; }
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
            gpu_path_given[0] = a;
        }
        else if (!strcmp(a, "--lean-step")) { c->lean_step = flag_int(a, v, 0, 1); gpu_path_given[1] = a; }
        else if (!strcmp(a, "--fuse-residual")) { c->fuse_residual = flag_int(a, v, 0, 1); gpu_path_given[2] = a; }
        else if (!strcmp(a, "--device-loss")) { c->device_loss = flag_int(a, v, 0, 1); gpu_path_given[3] = a; }
        else if (!strcmp(a, "--plan-cache")) { c->plan_cache = flag_int(a, v, 0, 1); gpu_path_given[4] = a; }
        else if (!strcmp(a, "--bias-grad-epilogue")) { c->bias_grad_epilogue = flag_int(a, v, 0, 1); gpu_path_given[5] = a; }
        else flag_unknown(a);
    }
    if (!ffn_set) m->d_ff = default_ffn(arch, m->d_model);
    hf_config_for_init(c, argc, argv);
    arch = m->arch;
    // without --arch, a model from a run file is judged by its own architecture (config_take_model)
    int arch_from_file = config_model_from_run_file(c) && !flag_given(argc, argv, "--arch");
    if (arch == ARCH_GPT2 && m->n_kv_head != m->n_head && !arch_from_file) {
        // gpt2 has no grouped-query attention; a preset's llama kv heads do not apply
        for (int i = 1; i + 1 < argc; i++) if (!strcmp(argv[i], "--kv-heads")) fatal("--kv-heads: gpt2 uses n_kv_heads == n_heads");
        m->n_kv_head = m->n_head;
    }
    // a model that --resume's checkpoint or --init's model file holds replaces this one, and is
    // checked once taken (train/checkpoint.h's config_from_run_files)
    if (!config_model_from_run_file(c)) model_config_check(c);
#if !TRAINER_IS_GPU
    // the GPU step's path flags: accepted (a command line works for both trainers), and said to do nothing here
    for (int i = 0; i < 6; i++)
        if (gpu_path_given[i]) report_at(&rep, MSG_NOTE, gpu_path_given[i], "picks one of the GPU trainer's step paths (train_gpt); the CPU trainer has one");
#endif
    (void)gpu_path_given;
    if (overlap_flag && ZERO_STAGE >= 2)
        report_at(&rep, MSG_NOTE, overlap_flag, "no effect at stage %d: each unit's gradient is reduced in the backward", ZERO_STAGE);
    if (job_flag && !c->tensorboard && !c->csv_monitor && !c->wandb)
        report_at(&rep, MSG_NOTE, "--job-name", "no effect without --tensorboard DIR or --csv-monitor DIR (or their config blocks)");
    optimizer_defaults_note(c, &rep, ds_absent, argc, argv);
    config_check(c, &rep);
    sample_flags_check(c, &rep, argc, argv);
    report_finish(&rep, print_rank);
}
