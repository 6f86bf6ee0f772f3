// train/zero_report.h: what zero.h's plan and allocations mean in bytes, beside
// zero/theory.h's formulas: the plan as a table, printed by rank 0 at start-up; the
// measured memory of every model state; a step's communication beside what the
// communicator counted; and the estimator (--estimate-memory), which answers for
// any world size from the plan's arithmetic alone.
#pragma once
#include "zero.h"
#include "zero/theory.h"
#include "train/activations.h"

// the plan, as a table (rank 0 at start-up)

static void zero_plan_print(const Zero *z) {
    const ZeroPlan *p = &z->plan;
    printf("ZeRO plan: %d units, %d partition%s, slices aligned to %d elements; each unit is one reduce bucket\n",
           p->n_units, p->P, p->P > 1 ? "s" : "", ZERO_ALIGN);
    printf("| %-8s | %12s | %12s | %12s | %s\n", "unit", "elements", "padded", "slice/rank", ZERO_STAGE == 3 ? "stage 3" : "");
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        printf("| %-8s | %12zu | %12zu | %12zu | %s\n", z->layout->units[i].name, U->numel, U->padded, U->shard,
               ZERO_STAGE == 3 ? (U->persistent ? "persistent (kept whole)" : "gathered per use") : "");
    }
#if ZERO_STAGE == 3
    if (z->place.whole) printf("stage 3 at one rank: the shard is the whole model, every unit is used in place (nothing gathered)\n");
    else printf("stage 3: live cap %zu gathered elements, arena %zu, prefetch %s\n", p->live_cap, p->arena_elems,
                z->cfg->prefetch ? "one unit ahead" : "off");
    if (z->place.twin_groups)
        printf("Twin-Flow, ratio %g: %d sub-group%s, each closed at %lld elements; this rank's shard [0, %zu) on the device side, "
               "[%zu, %zu) on CPU-Adam's%s\n", z->cfg->offload_ratio, z->place.twin_groups, z->place.twin_groups > 1 ? "s" : "",
               z->cfg->sub_group_size, z->place.twin_host_off, z->place.twin_host_off, p->shard_elems,
               TRAINER_IS_GPU ? "" : " (the CPU trainer updates both with CPU-Adam: the split is counted only)");
#endif
}

// ----------------------------------------------------------------------------
// reports: measured memory and communication beside the paper's formulas

static double zero_formula_bytes(int kind, double psi, int world, ZeroBytesPerParam b) {
    return zero_state_bytes(ZERO_STAGE, kind, psi, world, b);
}

// ----------------------------------------------------------------------------
// the whole per-rank footprint: model states, ZeRO's working buffers, the
// activations and scratch of the run's micro batch

enum { TRAINER_CPU = 0, TRAINER_GPU = 1 };
static const char *const TRAINER_NAMES[2] = {"train_gpt_cpu", "train_gpt"};
static const char *const STAGE_KEYS[4] = {"stage0", "stage1", "stage2", "stage3"};   // the estimator's JSON keys

typedef struct { double work[N_MEM], host[N_MEM], nvme[N_MEM]; int fits; size_t gather_need; } Footprint;

// What one trainer allocates per rank at a stage and world size, by kind, in three
// places: its working memory (the GPU's, or the host's for the CPU trainer), pinned
// host memory for offload, and ZeRO-Infinity's NVMe files, which are not memory at
// all. It is the same arithmetic as the allocations themselves (zero_buffers,
// train/activations.h), so it equals what a run measures.
static Footprint zero_footprint(const ModelLayout *L, const TrainConfig *cfg, int trainer, int stage, int world) {
    Footprint f;
    memset(&f, 0, sizeof(f));
    ZeroPlan p;
    zero_plan_build(&p, L, stage, world, 0, cfg);
    int gpu = trainer == TRAINER_GPU;
    size_t x = gpu ? 2 : 4;   // bytes of floatX: bf16 (or fp16) on the GPU, fp32 on the CPU
    ZeroBuffer b[N_ZBUF];
    ZeroPlacement pl = zero_placement(&p, cfg, gpu, x);   // the CPU's fp16 mode has a separate master too
    zero_buffers(b, &p, x, &pl);
    for (int i = 0; i < N_ZBUF; i++) (b[i].where == ZMEM_NVME ? f.nvme : b[i].where == ZMEM_HOST ? f.host : f.work)[b[i].kind] += b[i].bytes;
    const ModelConfig *c = &L->cfg;
    int cpu_ckpt = gpu && cfg->recompute && cfg->cpu_checkpointing, flash = gpu && gpu_flash_attention(cfg);
    size_t saved[N_ACT_SAVED], cs[N_CPU_SCRATCH], gs[N_GPU_SCRATCH];
    saved_activation_sizes(saved, c, cfg->B, cfg->T, cfg->recompute, cpu_ckpt, flash, x);
    f.work[MEM_ACTIVATIONS] = act_total(saved, N_ACT_SAVED, gpu ? GPU_ACT_ALIGN : CPU_ACT_ALIGN);
    if (cpu_ckpt) f.host[MEM_ACTIVATIONS] = cpu_checkpoint_host_bytes(c, cfg->B, cfg->T, x);
    if (gpu) {
        gpu_scratch_sizes(gs, c, cfg->B, cfg->T, flash, x);
        f.work[MEM_SCRATCH] += act_total(gs, N_GPU_SCRATCH, GPU_ACT_ALIGN) + gpu_kernel_workspace_bytes(cfg->B, cfg->T);
    } else {
        cpu_scratch_sizes(cs, c, cfg->B, cfg->T);
        f.work[MEM_SCRATCH] += act_total(cs, N_CPU_SCRATCH, CPU_ACT_ALIGN);
    }
    f.gather_need = p.gather_need;
    f.fits = stage < 3 || (long long)p.gather_need <= cfg->max_live_elems;
    zero_plan_free(&p);
    return f;
}

static double footprint_sum(const double *kinds, int from, int to) {
    double s = 0;
    for (int k = from; k <= to; k++) s += kinds[k];
    return s;
}

static double footprint_total(const ModelLayout *L, const TrainConfig *cfg, int trainer, int stage, int world) {
    Footprint f = zero_footprint(L, cfg, trainer, stage, world);
    return footprint_sum(f.work, 0, N_MEM - 1);
}

// The largest micro batch, in sequences of cfg->T tokens per rank, whose working
// memory fits `budget` bytes; 0 when not even one does. The footprint grows with
// the micro batch, so a doubling search finds a bound, then bisection the value.
static int zero_max_micro_batch(const ModelLayout *L, const TrainConfig *cfg, int trainer, int stage, int world, double budget) {
    TrainConfig c = *cfg;
    int lo = 0, hi = 1;   // lo fits or is 0; hi does not fit
    for (;;) {
        c.B = hi;
        if (footprint_total(L, &c, trainer, stage, world) > budget) break;
        lo = hi;
        if (hi >= (1 << 20)) return lo;
        hi *= 2;
    }
    while (hi - lo > 1) {
        c.B = lo + (hi - lo) / 2;
        if (footprint_total(L, &c, trainer, stage, world) <= budget) lo = c.B; else hi = c.B;
    }
    return lo;
}

// --memory-budget GIB: for each trainer and stage the largest micro batch per
// rank within the budget, without and with activation checkpointing. With
// --cpu-checkpointing the GPU trainer's "on" column offloads the checkpoints.
static void zero_estimate_budget(cJSON *rec, const ModelLayout *L, const TrainConfig *cfg, int world, int print) {
    double budget = cfg->memory_budget * 1073741824.0;
    cJSON *out = cJSON_AddObjectToObject(rec, "max_micro_batch");
    cJSON_AddNumberToObject(out, "budget_bytes", budget);
    if (print) printf("\nlargest micro batch per rank (sequences of %d tokens) within %g GiB of working memory at %d rank%s\n"
                      "| %-13s | %-5s | %13s | %13s |\n", cfg->T, cfg->memory_budget, world, world > 1 ? "s" : "",
                      "trainer", "stage", "recompute off", "recompute on");
    for (int tr = 0; tr < 2; tr++) {
        cJSON *t = cJSON_AddObjectToObject(out, TRAINER_NAMES[tr]);
        for (int s = 0; s <= 3; s++) {
            int best[2];
            for (int r = 0; r < 2; r++) {
                TrainConfig c = *cfg;
                c.recompute = r;
                c.cpu_checkpointing = r && cfg->cpu_checkpointing;
                best[r] = zero_max_micro_batch(L, &c, tr, s, world, budget);
            }
            cJSON *e = cJSON_AddObjectToObject(t, STAGE_KEYS[s]);
            cJSON_AddNumberToObject(e, "recompute_off", best[0]);
            cJSON_AddNumberToObject(e, "recompute_on", best[1]);
            if (print) printf("| %-13s | %5d | %13d | %13d |\n", TRAINER_NAMES[tr], s, best[0], best[1]);
        }
    }
    if (print) printf("0: not even one sequence fits. Not counted: the libraries' own memory (CUDA context, NCCL, MPI, OpenBLAS).\n");
}

// The memory estimator (--estimate-memory N): the per-rank footprint of every
// stage at world size N for both trainers, for the run's micro batch, sequence
// length and flags such as recompute, offload and the stage-3 settings. It uses the
// plan's arithmetic alone and allocates nothing, so it answers for models that
// would not fit. It leaves out the libraries' own memory (the CUDA context, NCCL and
// MPI buffers, OpenBLAS), the memory-mapped data and the GPU's CUB sort storage.
static cJSON *zero_estimate(const ModelLayout *L, const TrainConfig *cfg, int world, int print) {
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "type", "estimate");
    cJSON_AddNumberToObject(rec, "world", world);
    cJSON_AddNumberToObject(rec, "params", (double)L->num_params);
    cJSON_AddNumberToObject(rec, "batch", cfg->B);
    cJSON_AddNumberToObject(rec, "seq", cfg->T);
    cJSON_AddBoolToObject(rec, "recompute", cfg->recompute);
    const char *attention = gpu_flash_attention(cfg) ? "flash" : "cublas";   // train_gpt's (train/activations.h)
    cJSON_AddStringToObject(rec, "attention", attention);
    int nvme = cfg->nvme_optim_dir[0] || cfg->nvme_param_dir[0];
    if (print) printf("per-rank memory at %d rank%s, %zu parameters, micro batch %d x %d, recompute %s, offload %s%s, "
                      "train_gpt attention %s (bytes)\n"
                      "| %-13s | %-5s | %13s | %13s | %13s | %13s | %13s | %13s | %13s | %13s | %13s |\n",
                      world, world > 1 ? "s" : "", L->num_params, cfg->B, cfg->T, cfg->recompute ? "on" : "off",
                      cfg->offload || cfg->nvme_optim_dir[0] ? "on (train_gpt)" : "off", nvme ? ", NVMe offload on" : "", attention,
                      "trainer", "stage", "params",
                      "grads", "optimizer", "ZeRO working", "activations", "scratch", "total", "host (pinned)", "nvme (files)");
    for (int tr = 0; tr < 2; tr++) {
        cJSON *t = cJSON_AddObjectToObject(rec, TRAINER_NAMES[tr]);
        for (int s = 0; s <= 3; s++) {
            Footprint f = zero_footprint(L, cfg, tr, s, world);
            cJSON *e = cJSON_AddObjectToObject(t, STAGE_KEYS[s]), *h = cJSON_AddObjectToObject(e, "host"), *nv = cJSON_AddObjectToObject(e, "nvme");
            for (int k = 0; k < N_MEM; k++) {
                cJSON_AddNumberToObject(e, MEM_NAMES[k], f.work[k] + f.host[k] + f.nvme[k]);
                cJSON_AddNumberToObject(h, MEM_NAMES[k], f.host[k]);
                cJSON_AddNumberToObject(nv, MEM_NAMES[k], f.nvme[k]);
            }
            double states = footprint_sum(f.work, MEM_PARAMS, MEM_OPTIM) + footprint_sum(f.host, MEM_PARAMS, MEM_OPTIM) +
                            footprint_sum(f.nvme, MEM_PARAMS, MEM_OPTIM);
            double total = footprint_sum(f.work, 0, N_MEM - 1), host = footprint_sum(f.host, 0, N_MEM - 1);
            double in_files = footprint_sum(f.nvme, 0, N_MEM - 1);
            cJSON_AddNumberToObject(e, "model_states", states);
            cJSON_AddNumberToObject(e, "total", total);
            cJSON_AddNumberToObject(e, "host_total", host);
            cJSON_AddNumberToObject(e, "nvme_total", in_files);
            if (!f.fits) cJSON_AddNumberToObject(e, "needs_max_live", (double)f.gather_need);
            if (print) {   // params, grads, optimizer: wherever they are (the last columns say where)
                printf("| %-13s | %5d | %13.0f | %13.0f | %13.0f | %13.0f | %13.0f | %13.0f | %13.0f | %13.0f | %13.0f |  %.2f GiB",
                       TRAINER_NAMES[tr], s, f.work[MEM_PARAMS] + f.host[MEM_PARAMS] + f.nvme[MEM_PARAMS],
                       f.work[MEM_GRADS] + f.host[MEM_GRADS], f.work[MEM_OPTIM] + f.host[MEM_OPTIM] + f.nvme[MEM_OPTIM],
                       footprint_sum(f.work, MEM_GATHER, MEM_GRAD_BUCKETS) + f.work[MEM_NVME_BUFFERS] + f.work[MEM_DPU],
                       f.work[MEM_ACTIVATIONS] + f.host[MEM_ACTIVATIONS], f.work[MEM_SCRATCH], total, host, in_files,
                       total / 1073741824.0);
                if (!f.fits) printf("  (needs --max-live >= %zu)", f.gather_need);
                printf("\n");
            }
        }
    }
    if (print) printf("total: in the trainer's working memory (the GPU's for train_gpt); host (pinned): what offload keeps on the host;\n"
                      "nvme (files): what NVMe offload keeps in each rank's files (not memory; its tiles are in \"ZeRO working\", train_gpt's on the host).\n"
                      "Model states and ZeRO's buffers from the plan; activations and scratch for the micro batch (--batch, --seq).\n");
    if (print && cfg->offload && cfg->offload_ratio < 1)
        printf("Twin-Flow, offload ratio %g: stage 3's train_gpt row counts the device side's optimizer state in total, CPU-Adam's "
               "in host (pinned), as DeepSpeed places them and train_gpt allocates them\n", cfg->offload_ratio);
    if (cfg->memory_budget > 0) zero_estimate_budget(rec, L, cfg, world, print);
    return rec;
}

// Prints the per-rank memory table (rank 0) and returns it as a JSONL record.
static cJSON *zero_memory_report(Zero *z, int print) {
    const ZeroPlan *p = &z->plan;
    ZeroBytesPerParam b = zero_bytes_per_param(z->place.separate_master);
    double psi = (double)p->num_params, psi_pad = (double)p->full_elems;
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "type", "memory");
    cJSON_AddNumberToObject(rec, "stage", ZERO_STAGE);
    cJSON_AddNumberToObject(rec, "world", p->world);
    cJSON_AddNumberToObject(rec, "params", psi);
    cJSON_AddNumberToObject(rec, "params_padded", psi_pad);
    cJSON *meas = cJSON_AddObjectToObject(rec, "measured_bytes");
    cJSON *form = cJSON_AddObjectToObject(rec, "formula_bytes");
    cJSON *padb = cJSON_AddObjectToObject(rec, "padding_bytes");
    if (print) {
        printf("ZeRO stage %d, %d rank%s: per-rank bytes, measured from the allocations\n", ZERO_STAGE, p->world, p->world > 1 ? "s" : "");
        printf("| %-16s | %14s | %14s | %10s | %s (Ψ = %.0f parameters, N = %d ranks)\n", "memory", "measured", "expected", "padding",
               "the paper's formula, or what it is", psi, p->world);
    }
    static const char *FORMULA_TEXT[4][3] = {
        {"%gΨ", "%gΨ", "%gΨ"}, {"%gΨ", "%gΨ", "%gΨ/N"}, {"%gΨ", "%gΨ/N", "%gΨ/N"}, {"%gΨ/N", "%gΨ/N", "%gΨ/N"}};
    double total_m = 0, total_f = 0;
    for (int k = MEM_PARAMS; k <= MEM_OPTIM; k++) {
        double measured = (double)(z->mem[k] + z->host_mem[k] + z->nvme_mem[k]);   // offload moves the state, not away
        double formula = zero_formula_bytes(k, psi, p->world, b);
        double padding = zero_formula_bytes(k, psi_pad, p->world, b) - formula;
        total_m += measured; total_f += formula;
        cJSON_AddNumberToObject(meas, MEM_NAMES[k], measured);
        cJSON_AddNumberToObject(form, MEM_NAMES[k], formula);
        cJSON_AddNumberToObject(padb, MEM_NAMES[k], padding);
        if (print) {
            char ftxt[32];
            double per = k == MEM_PARAMS ? b.param : k == MEM_GRADS ? b.grad : b.optim;
            snprintf(ftxt, sizeof(ftxt), FORMULA_TEXT[ZERO_STAGE][k], per);
            printf("| %-16s | %14.0f | %14.0f | %10.0f | %s\n", MEM_NAMES[k], measured, formula, padding, ftxt);
        }
    }
    double per_param = (b.param + b.grad + b.optim);
    double paper = ZERO_STAGE == 0 ? per_param * psi : ZERO_STAGE == 1 ? (b.param + b.grad) * psi + b.optim * psi / p->world
                 : ZERO_STAGE == 2 ? b.param * psi + (b.grad + b.optim) * psi / p->world : per_param * psi / p->world;
    // the rest of the footprint: ZeRO's working buffers from the plan, the activations and
    // scratch of this micro batch (train/activations.h), beside what was allocated
    Footprint fp = zero_footprint(z->layout, z->cfg, TRAINER_IS_GPU ? TRAINER_GPU : TRAINER_CPU, ZERO_STAGE, p->world);
    static const char *WHAT[N_MEM] = {"", "", "", "stage 3: gather arena + persistent units (plan; + hpZ's secondary partition)",
        "stages 2-3: gradient slots + reduce-scatter landing (+ offload staging)", "saved for the backward (train/activations.h)",
        "backward and kernel scratch (train/activations.h)", "sampling's KV cache (train/sample.h)",
        "NVMe offload: the step's tiles, stage 3's unit reads, staging (zero/infinity.h)",
        "DPU: the delayed update's gradient and parameters (zero/dpu.h; with offload in pinned host memory)"};
    if (print) printf("| %-16s | %14.0f | %14.0f |            | paper: %.0f bytes\n", "model states", total_m, total_f, paper);
    for (int k = MEM_GATHER; k < N_MEM; k++) {
        double measured = (double)(z->mem[k] + z->host_mem[k]), formula = fp.work[k] + fp.host[k];
        cJSON_AddNumberToObject(meas, MEM_NAMES[k], measured);
        cJSON_AddNumberToObject(form, MEM_NAMES[k], formula);
        if (print && formula)
            printf("| %-16s | %14.0f | %14.0f |            | %s\n", MEM_NAMES[k], measured, formula, WHAT[k]);
        else if (print && measured)   // the KV cache: sized by the sampling flags, outside the plan's estimate
            printf("| %-16s | %14.0f | %14s |            | %s, not in the estimate\n", MEM_NAMES[k], measured, "-", WHAT[k]);
    }
    if (print && z->cfg->recompute) printf("(recompute: one layer's activations are kept at a time, plus every layer's input)\n");
    if (z->place.twin_groups) {   // Twin-Flow's two sides of the optimizer state
        double dev = (double)z->place.twin_host_off * zero_optim_elem_bytes(z->place.separate_master);
        double all = (double)(z->mem[MEM_OPTIM] + z->host_mem[MEM_OPTIM]);
        cJSON *tw = cJSON_AddObjectToObject(rec, "twin_flow");
        cJSON_AddNumberToObject(tw, "ratio", z->cfg->offload_ratio);
        cJSON_AddNumberToObject(tw, "sub_groups", z->place.twin_groups);
        cJSON_AddNumberToObject(tw, "device_side_optimizer_bytes", dev);
        cJSON_AddNumberToObject(tw, "cpu_adam_side_optimizer_bytes", all - dev);
        if (print) printf("| %-16s | %14.0f | %14.0f |            | Twin-Flow: optimizer state on the device side, on CPU-Adam's%s\n",
                          "optimizer split", dev, all - dev, TRAINER_IS_GPU ? "" : " (both in host memory here)");
    }
    // ZeRO-Infinity: the states in this rank's NVMe files instead of memory
    double in_files = 0;
    cJSON *nv = cJSON_AddObjectToObject(rec, "nvme_bytes");
    for (int k = 0; k < N_MEM; k++) { cJSON_AddNumberToObject(nv, MEM_NAMES[k], (double)z->nvme_mem[k]); in_files += (double)z->nvme_mem[k]; }
    if (print && in_files)
        printf("| %-16s | %14.0f | NVMe offload: %s%s%s in this rank's files, not in memory (counted above)\n", "nvme (files)", in_files,
               z->nvme_mem[MEM_PARAMS] ? "the parameter shard" : "", z->nvme_mem[MEM_PARAMS] && z->nvme_mem[MEM_OPTIM] ? " and " : "",
               z->nvme_mem[MEM_OPTIM] ? (z->place.separate_master ? "the fp32 master, m and v" : "m and v") : "");
    // the accelerator as a whole, and what offload keeps in pinned host memory
    size_t used_b = 0, total_b = 0;
    if (zb_device_memory(&z->be, &used_b, &total_b)) {
        cJSON_AddNumberToObject(rec, "device_used_bytes", (double)used_b);
        cJSON_AddNumberToObject(rec, "device_total_bytes", (double)total_b);
        cJSON *host = cJSON_AddObjectToObject(rec, "host_pinned_bytes");
        size_t host_total = 0;
        for (int k = 0; k < N_MEM; k++) { cJSON_AddNumberToObject(host, MEM_NAMES[k], (double)z->host_mem[k]); host_total += z->host_mem[k]; }
        cJSON_AddBoolToObject(rec, "offload", z->place.offload);
        if (print) {
            printf("| %-16s | %14zu | cudaMemGetInfo: used of %.1f GiB (all allocations, CUDA context included)\n",
                   "device in use", used_b, total_b / 1073741824.0);
            if (host_total) printf("| %-16s | %14zu | offload: model states and staging in pinned host memory\n",
                                   "host (pinned)", host_total);
        }
    }
    cJSON_AddNumberToObject(rec, "model_states_measured", total_m);
    cJSON_AddNumberToObject(rec, "model_states_formula", total_f);
#if ZERO_STAGE == 3
    cJSON_AddNumberToObject(rec, "live_cap_elems", (double)p->live_cap);
#endif
    return rec;
}

// At the end of a run: the peak resident memory over the ranks, beside the per-rank
// footprint the allocations add up to. The difference is the process itself: code,
// MPI, OpenBLAS, the CUDA context and the memory-mapped data it touched.
static cJSON *zero_peak_memory_report(Zero *z, int print) {
    double hi = peak_rss_bytes(), lo = hi, counted = 0;
    comm_all_reduce_host(z->comm, &hi, 1, DT_F64, OP_MAX);
    comm_all_reduce_host(z->comm, &lo, 1, DT_F64, OP_MIN);
    for (int k = 0; k < N_MEM; k++) counted += (double)(TRAINER_IS_GPU ? z->host_mem[k] : z->mem[k]);
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "type", "peak_rss");
    cJSON_AddNumberToObject(rec, "max_bytes", hi);
    cJSON_AddNumberToObject(rec, "min_bytes", lo);
    cJSON_AddNumberToObject(rec, "host_allocated_bytes", counted);
    double in_files = 0;
    for (int k = 0; k < N_MEM; k++) in_files += (double)z->nvme_mem[k];
    cJSON_AddNumberToObject(rec, "nvme_bytes", in_files);
    if (print) printf("peak resident memory per rank: %.1f MB (max), %.1f MB (min); the allocations counted above in host memory: %.1f MB%s",
                      hi / 1e6, lo / 1e6, counted / 1e6, in_files ? "" : "\n");
    if (print && in_files) printf(" (NVMe offload: %.1f MB more in this rank's files)\n", in_files / 1e6);
    return rec;
}

// This rank's ZeRO-Infinity I/O since the last call, which comes once per step: the
// optimizer step's pass over the NVMe files, and the rest (stage 3's reads,
// checkpoints). NULL without NVMe.
static cJSON *zero_nvme_record(Zero *z, int step) {
    ZeroNvmeStats n;
    if (!zb_nvme_stats(&z->be, &n)) return NULL;
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "type", "nvme");
    cJSON_AddNumberToObject(rec, "step", step);
    cJSON_AddNumberToObject(rec, "rank", z->comm->rank);
    cJSON_AddNumberToObject(rec, "step_read_bytes", n.step.read_bytes);
    cJSON_AddNumberToObject(rec, "step_write_bytes", n.step.write_bytes);
    cJSON_AddNumberToObject(rec, "step_io_s", n.step.busy_s);      // time with I/O in flight during the optimizer step
    cJSON_AddNumberToObject(rec, "step_wait_s", n.step.wait_s);    // of it, the time CPU-Adam waited for the I/O
    cJSON_AddNumberToObject(rec, "step_s", n.step_s);              // the streamed optimizer step, wall time
    cJSON_AddNumberToObject(rec, "other_read_bytes", n.other.read_bytes);
    cJSON_AddNumberToObject(rec, "other_write_bytes", n.other.write_bytes);
    cJSON_AddNumberToObject(rec, "other_io_s", n.other.busy_s);
    cJSON_AddNumberToObject(rec, "other_wait_s", n.other.wait_s);
    return rec;
}

static void comm_bytes_object(cJSON *rec, const char *key, const long long *counted, const double *theory, int is_theory) {
    cJSON *o = cJSON_AddObjectToObject(rec, key);
    for (int k = 0; k < N_COLL; k++) cJSON_AddNumberToObject(o, COLL_NAMES[k], is_theory ? theory[k] : (double)counted[k]);
}

static cJSON *zero_comm_report(const Zero *z, int K, int print) {
    double elem_bytes = sizeof(floatX);
    CommTheory theory = zero_comm_theory(&z->plan, &z->place, z->comm, K);
    const Comm *c = z->comm;
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "type", "comm");
    cJSON_AddNumberToObject(rec, "stage", ZERO_STAGE);
    cJSON_AddNumberToObject(rec, "world", c->world);
    cJSON_AddNumberToObject(rec, "accum", K);
    cJSON_AddNumberToObject(rec, "nodes", c->n_nodes);
    cJSON_AddNumberToObject(rec, "ranks_per_node", c->node_size);
    cJSON *zpp = cJSON_AddObjectToObject(rec, "zeropp");
    cJSON_AddBoolToObject(zpp, "quantized_weights", z->place.qw);
    cJSON_AddNumberToObject(zpp, "hpz_partition_size", z->place.hpz ? z->place.hpz : 1);
    cJSON_AddBoolToObject(zpp, "quantized_gradients", z->place.qg);
    cJSON_AddNumberToObject(zpp, "block", ZQ_BLOCK);
    comm_bytes_object(rec, "bytes_per_step", c->bytes, NULL, 0);
    comm_bytes_object(rec, "theory_bytes_per_step", NULL, theory.total, 1);
    comm_bytes_object(rec, "intra_node_bytes_per_step", c->intra_bytes, NULL, 0);
    comm_bytes_object(rec, "cross_node_bytes_per_step", c->cross_bytes, NULL, 0);
    comm_bytes_object(rec, "theory_intra_node_bytes_per_step", NULL, theory.intra, 1);
    comm_bytes_object(rec, "theory_cross_node_bytes_per_step", NULL, theory.cross, 1);
    double total = 0, intra = 0, cross = 0, theory_cross = 0, psi_b = (double)z->plan.num_params * elem_bytes;
    if (print) {
        printf("communication per step, per rank (counted by the communicator), %d node%s of %d rank%s\n", c->n_nodes,
               c->n_nodes == 1 ? "" : "s", c->node_size, c->node_size == 1 ? "" : "s");
        printf("| %-15s | %14s | %14s | %6s | %14s | %14s | %14s |\n", "collective", "counted", "theory", "calls",
               "intra-node", "cross-node", "cross theory");
    }
    for (int k = 0; k < N_COLL; k++) {
        total += (double)c->bytes[k]; intra += (double)c->intra_bytes[k]; cross += (double)c->cross_bytes[k];
        theory_cross += theory.cross[k];
        if (print) printf("| %-15s | %14lld | %14.0f | %6lld | %14lld | %14lld | %14.0f |\n", COLL_NAMES[k], c->bytes[k], theory.total[k],
                          c->calls[k], c->intra_bytes[k], c->cross_bytes[k], theory.cross[k]);
    }
    double paper = (ZERO_STAGE == 3 ? 3.0 : 2.0) * psi_b, paper_m = 2.0 * z->plan.num_params;   // the paper's M: fp16
    double paper_cross_m = ZERO_STAGE == 3 && c->n_nodes > 1 ? zero_paper_cross_m(&z->place) : 0;
    cJSON_AddNumberToObject(rec, "total_bytes", total);
    cJSON_AddNumberToObject(rec, "intra_node_total_bytes", intra);
    cJSON_AddNumberToObject(rec, "cross_node_total_bytes", cross);
    cJSON_AddNumberToObject(rec, "theory_cross_node_total_bytes", theory_cross);
    cJSON_AddNumberToObject(rec, "paper_bytes", paper);
    cJSON_AddNumberToObject(rec, "paper_m_bytes", paper_m);
    cJSON_AddNumberToObject(rec, "paper_cross_node_m", paper_cross_m);   // per iteration, in M
    cJSON_AddNumberToObject(rec, "cross_node_m", cross / paper_m);
    cJSON_AddNumberToObject(rec, "psi_bytes", psi_b);
    // overlap: the units whose boundary reduction started inside the backward; all of them with DDP-style buckets
    cJSON_AddNumberToObject(rec, "units", z->plan.n_units);
    cJSON_AddNumberToObject(rec, "reduced_in_backward", z->reduced_in_backward);
    if (print) printf("| %-15s | %14.0f | %.2fΨ of %d-byte values (paper: %dΨ; Ψ = %lld parameters; padding and K = %d micro-steps "
                      "included)\n", "total", total, total / psi_b, (int)elem_bytes, ZERO_STAGE == 3 ? 3 : 2, (long long)z->plan.num_params, K);
    // stage 3 below the paper's 3Ψ: the paper gathers every parameter twice, for the forward and the backward
    double gathered = (double)c->bytes[COLL_ALL_GATHER] / psi_b;
    if (print && ZERO_STAGE == 3 && K == 1 && gathered < 1.95)
        printf("  below 3Ψ: the paper gathers every parameter for the forward and again for the backward; here the all-gather moved "
               "%.2fΨ: persistent units are gathered once, after the step, and a backward step that reuses the forward's gather or "
               "reads no weights gathers nothing (zero_fetch_order, zero/plan.h)\n", gathered);
    if (print && c->n_nodes > 1 && ZERO_STAGE == 3)
        printf("cross-node: %.0f bytes counted, %.0f by the plan: %.3gM per step of %d micro-steps, where the ZeRO++ paper counts "
               "%.3gM per iteration, M = 2Ψ = %.0f bytes, the model in fp16 (docs/zero.md)\n", cross, theory_cross, cross / paper_m, K,
               paper_cross_m, paper_m);
    if (print) printf("gradient reductions started inside the backward, as each unit's gradient was complete: %d of %d units\n",
                      z->reduced_in_backward, z->plan.n_units);
    return rec;
}
