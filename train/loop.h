// train/loop.h: what both trainers share above the model: start-up, validation,
// sampling and the training loop. A trainer's main() calls train_startup, builds
// its model, then calls train, or sample_run for --sample 1.
//
// The optimizer step is train_step, between TRAINING SECTION BEGIN and END: for
// each micro-step a forward and a backward, then reduce, guard, update. The guard
// (train/step_guard.h) does fp16 loss scaling and skips non-finite steps. The loop
// around it reports, validates, samples, saves and answers signals.
//
// Include this file after the trainer has defined:
//   GPT, its model, with: ModelConfig cfg; ModelLayout layout; Zero zero; Comm *comm;
//       int B, T; int *inputs, *targets (host, B*T each);
//       double peak_flops (one device's, for the step line's MFU; 0 when unknown)
//   gpt_forward, gpt_backward, gpt_decode (train/passes.h) and what train/sample.h lists
//   void gpt_set_dloss(GPT *m, float dloss)   the dloss the coming backwards take. The GPU's
//                                             fused classifier already uses it in the forward.
//   float gpt_step_loss(GPT *m)               the mean loss of the training forwards since the
//                                             last call: each micro-batch's mean (a float), summed
//                                             in double in micro-step order, divided by their number.
//                                             The GPU sums on the device and reads once per step.
// train_gpt.c (CPU, fp32) and train_gpt.cu (GPU, bf16 or fp16) differ only in those.
#pragma once
#include "train/jsonl.h"
#include "train/zero_report.h"
#include "train/sample.h"
#include "train/savedir.h"
#include "train/preempt.h"
#include "train/monitor.h"

// A hash of everything the ranks must agree on: the model and the batch shape.
static long long config_hash(const TrainConfig *c) {
    const ModelConfig *m = &c->model;
    int v[] = {m->arch, m->n_layer, m->n_head, m->n_kv_head, m->d_model, m->d_ff, m->vocab_size, m->max_seq, c->B, c->T, c->accum, c->steps};
    return (long long)crc32_update(0, v, sizeof(v));
}

// The model's sizes and where they came from, for an out-of-memory message (util/common.h)
static void model_alloc_context(const TrainConfig *tc) {
    const ModelConfig *m = &tc->model;
    char from[600];
    if (strcmp(tc->preset, "config.json") == 0) hf_config_path(tc->init_path, from, sizeof(from));
    else if (strcmp(tc->preset, "(checkpoint)") == 0) snprintf(from, sizeof(from), "the checkpoint of --resume %.500s", tc->resume_dir);
    else if (strcmp(tc->preset, "(model file)") == 0) snprintf(from, sizeof(from), "%.500s", tc->init_path);
    else snprintf(from, sizeof(from), "--preset %s and the flags", tc->preset);
    snprintf(g_alloc_context, sizeof(g_alloc_context), "the model: %s, %d layers, width %d, MLP %d, vocabulary %d, %d positions, from %.500s",
             arch_name(m->arch), m->n_layer, m->d_model, m->d_ff, m->vocab_size, m->max_seq, from);
}

// MPI, the flags, the batch over the world, the collective backend, and a check
// that every rank was given the same model. Returns 0 when there is nothing to
// train: --estimate-memory prints each stage's memory per rank from the plan's
// arithmetic alone, allocates nothing, and ends the run.
static int train_startup(Comm *comm, TrainConfig *tc, int *argc, char ***argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);   // progress lines reach a redirected file as they are printed
    // armed before MPI_Init, which waits for every rank: one stopped before joining must not hang the job
    comm_watchdog_start(NULL, -1, flags_prescan_timeout(*argc, *argv));
    comm_init_world(comm, argc, argv);
    parse_args(tc, *argc, *argv, comm->rank == 0);
    // the model of --resume's checkpoint or --init's model file (and what else the checkpoint's run sets)
    config_from_run_files(tc, tc->estimate_world > 0 ? tc->estimate_world : comm->world, *argc, *argv, comm->rank == 0);
    model_alloc_context(tc);
    test_stop_point("start-up");
    comm_phase("start-up", 0);
    comm_watchdog_start(comm, comm->rank, tc->timeout);   // from here to MPI_Finalize every collective is watched
    comm_init_node(comm);
    if (tc->estimate_world > 0) {
        config_resolve_batch(tc, tc->estimate_world);   // the micro batch the activations are estimated for
        ModelLayout L;
        model_layout_build(&L, &tc->model);
        model_set_recompute(&L, tc->recompute);
        JsonLog log = jsonl_open(tc->log_path, comm->rank == 0, 0);
        cJSON *rec = zero_estimate(&L, tc, tc->estimate_world, comm->rank == 0);
        jsonl_record(&log, rec);
        jsonl_close(&log);
        model_layout_free(&L);
        comm_finalize(comm);
        return 0;
    }
    comm_attach_device(comm);   // the GPU trainer's device: not needed above
    config_resolve_batch(tc, comm->world);
    if (tc->sample) {
        // Sampling builds no training batch. The KV cache has its own buffers (sampler_init);
        // --kv-cache 0 runs its full forwards on num_samples x max_seq activations.
        tc->B = tc->kv_cache ? 1 : tc->num_samples;
        tc->T = tc->kv_cache ? 1 : tc->model.max_seq;
        tc->accum = 1;
    } else if (comm->rank == 0 && !tc->quiet) config_print_resolved(tc, stdout);
    comm_setup_backend(comm, tc->comm);
    comm_check_same(comm, config_hash(tc), "the model and batch configuration (--arch/--preset/sizes/--batch/--seq/--accum/--steps)");
    if (tc->save_dir[0] && !tc->sample) savedir_open(comm, tc->save_dir);   // created, locked, test-written before any training
    return 1;
}

// mean loss over the first val_batches micro-batches of the val shard, averaged over ranks
static float gpt_validate(GPT *m, DataLoader *val, int batches) {
    dataloader_reset(val);
    double s = 0;
    for (int i = 0; i < batches; i++) {
        comm_phase("validation", g_wd.step);
        dataloader_next(val, m->inputs, m->targets);
        s += gpt_forward(m, m->targets, 0);
    }
    float loss = batches ? (float)(s / batches) : 0.0f;
    comm_all_reduce_host(m->comm, &loss, 1, DT_F32, OP_AVG);
    return loss;
}

// The starting parameters: from --resume, from --init, or a seeded initialization.
// Each rank reads or generates only what its ZeRO stage holds (zero_load_params).
// `train` is the train data, which a checkpoint records and a resume must share;
// it is NULL when sampling.
static TrainState load_start(GPT *m, const TrainConfig *tc, const DataLoader *train, FILE *say) {
    TrainState st = {.step = 0, .rng = tc->seed ^ 0x5DEECE66DULL, .guard = step_guard_init(tc, m->comm)};
    if (train) { st.data_tokens = train->n_tokens; st.data_crc = dataloader_fingerprint(train); }
    if (tc->resume_dir[0]) {
        checkpoint_load(&m->zero, tc, &st, say != NULL);
        return st;
    }
    char err[1300] = {0};
    ParamSource src = params_from_init(&m->layout, tc->seed);
    int ok = !tc->init_path[0] || params_from_file(&src, &m->layout, tc->init_path, err, sizeof(err));
    if (ok && !zero_load_params(&m->zero, &src)) { ok = 0; snprintf(err, sizeof(err), "%s", src.err); }
    params_close(&src);
    if (!comm_agree(m->comm, ok, err, sizeof(err))) fatal("%s", err);
    return st;
}

static void print_model(GPT *m, const TrainConfig *tc, const char *name) {
    const ModelConfig *mc = &m->cfg;
    printf("zeroc %s | %s %s: %d layers, %d heads (%d kv), C=%d, F=%d, V=%d, %zu parameters\n", name, arch_name(mc->arch),
           tc->preset, mc->n_layer, mc->n_head, mc->n_kv_head, mc->d_model, mc->d_ff, mc->vocab_size, m->layout.num_params);
}

// h:mm:ss
static const char *clock_text(double seconds, char *buf, size_t n) {
    long long t = seconds > 0 ? (long long)(seconds + 0.5) : 0;
    snprintf(buf, n, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
    return buf;
}

// The step line: loss, lr, gradient norm, time, tokens/s, MFU (GFLOP/s when the
// peak is unknown), memory in use, elapsed time and time left. With fp16 it adds the
// loss scale, and once a step was skipped the skips. --breakdown adds a line of phases.
static void print_step(const StepStats *s, int steps) {
    char extra[160] = "", perf[48], el[32], eta[32];
    int k = 0;
    if (s->loss_scale > 0) k += snprintf(extra + k, sizeof(extra) - k, " | scale %.10g", s->loss_scale);
    if (s->quant_error[0] >= 0) k += snprintf(extra + k, sizeof(extra) - k, " | qwZ err %.2f%%", 100 * s->quant_error[0]);
    if (s->quant_error[1] >= 0) k += snprintf(extra + k, sizeof(extra) - k, " | qgZ err %.2f%%", 100 * s->quant_error[1]);
    if (s->skipped) snprintf(extra + k, sizeof(extra) - k, " | SKIPPED (%s; %lld so far)", s->skipped, s->skipped_steps);
    else if (s->skipped_steps) snprintf(extra + k, sizeof(extra) - k, " | %lld skipped", s->skipped_steps);
    if (s->mfu >= 0) snprintf(perf, sizeof(perf), "MFU %.1f%%", 100 * s->mfu);
    else snprintf(perf, sizeof(perf), "%.2f GFLOP/s", s->gflops);
    printf("step %4d/%d | loss %.6f | lr %.2e | norm %.4f%s | %.1f ms | %.0f tok/s | %s | mem %.2f GiB | %s, ETA %s\n",
           s->step, steps, s->loss, s->lr, s->grad_norm, extra, s->ms, s->tokens_per_sec, perf, s->mem_bytes / 1073741824.0,
           clock_text(s->elapsed_s, el, sizeof(el)), clock_text(s->eta_s, eta, sizeof(eta)));
    if (s->phase_ms[0] >= 0)
        printf("          forward %.1f ms | backward %.1f ms | communication wait %.1f ms | optimizer %.1f ms\n",
               s->phase_ms[0], s->phase_ms[1], s->phase_ms[2], s->phase_ms[3]);
}

// memory in use now: the GPU's (all of it: cudaMemGetInfo), or this process's resident memory
static double memory_in_use(Zero *z) {
    size_t used = 0, total = 0;
    return zb_device_memory(&z->be, &used, &total) ? (double)used : current_rss_bytes();
}

// A checkpoint of the state after now->step, never of a non-finite model: then
// every rank stops and the checkpoints already in tc->save_dir stay as they are.
static void train_save(GPT *m, const TrainConfig *tc, const TrainState *now, FILE *say) {
    comm_phase("checkpoint save", now->step);
    zero_step_install(&m->zero);   // DPU: a checkpoint holds the pending update applied (zero/dpu.h)
    char where[512] = "";
    if (!step_guard_master_finite(&m->zero, where, sizeof(where)))
        fatal("step %d: not saving a checkpoint to %s: %s (the checkpoints there are left as they were)",
              now->step, tc->save_dir, where);
    checkpoint_save(&m->zero, tc->save_dir, now, tc);
    if (say) printf("saved %s/ckpt_%08d\n", tc->save_dir, now->step);
}

// ----------------------------------------------------------------------------
// the optimizer step

// What one optimizer step hands to the reports.
typedef struct {
    float loss;            // the step's mean loss, averaged over the ranks
    float lr;
    StepVerdict verdict;   // applied, skipped or stop the run (train/step_guard.h)
    int updated;           // the parameters changed and were shared: an update, or DPU's install
    double seconds;        // the whole step
    double end;            // wall_time() when it ended
    double phase_s[4];     // forward, backward, communication wait, optimizer
    float quant_error[2];  // ZeRO++'s relative RMS errors (zero_quant_errors)
} StepResult;

// Phase p of the step (forward 0, backward 1, optimizer 3) ends now. With --breakdown
// that is once the device has finished the work queued so far (otherwise a phase would
// end when its kernels were only queued). The phase gets the time since *t less the
// time this rank was blocked in collectives meanwhile, which goes to the communication
// wait (2): the four phases are disjoint and add up to the step's time.
static void phase_end(GPT *m, const TrainConfig *tc, StepResult *r, int p, double *t) {
    if (tc->breakdown) zb_sync(&m->zero.be);
    double now = wall_time(), wait = comm_blocked_seconds();
    r->phase_s[p] += now - *t - wait;
    r->phase_s[2] += wait;
    *t = now;
}

// AdamW's settings for optimizer step `step` (0-based). A skipped step advances
// neither the learning-rate schedule nor Adam's t, so both count applied steps.
static ZeroOptim step_optim(const TrainConfig *tc, const StepGuard *guard, int step) {
    int applied = step - (int)guard->skipped;
    ZeroOptim o = {.lr = lr_at(tc, applied, lr_total_steps(tc)), .beta1 = tc->beta1, .beta2 = tc->beta2, .eps = tc->eps,
                   .weight_decay = tc->weight_decay, .t = applied + 1};
    return o;
}

// Optimizer step `step` (0-based): tc->accum micro-steps of forward and backward,
// then the gradients reduced, the step guarded and AdamW applied. The guard
// (train/step_guard.h) skips a step whose loss or gradients are not finite on any
// rank. The phases are timed for the step line's --breakdown.
static StepResult train_step(GPT *m, const TrainConfig *tc, DataLoader *train, StepGuard *guard, int step) {
    StepResult r;
    memset(&r, 0, sizeof(r));
    double t0 = wall_time(), t = t0;
    comm_blocked_seconds();          // the step's collective waits and
    comm_reset_counters(m->comm);    // bytes count from here
    // --------------- TRAINING SECTION BEGIN -----------------
    zero_step_begin(&m->zero);
    float dloss = step_guard_dloss(guard, tc->accum);   // 1/accum, times the loss scale with fp16
    gpt_set_dloss(m, dloss);
    for (int k = 0; k < tc->accum; k++) {
        comm_phase("forward/backward", step + 1);
        dataloader_next(train, m->inputs, m->targets);
        gpt_forward(m, m->targets, 1);   // its loss joins the step's (gpt_step_loss)
        phase_end(m, tc, &r, 0, &t);
        gpt_backward(m, m->targets, dloss);
        zero_micro_step_end(&m->zero);
        phase_end(m, tc, &r, 1, &t);
    }
    comm_phase("the optimizer step", step + 1);
    ZeroOptim opt = step_optim(tc, guard, step);
    zero_step_reduce(&m->zero);
    step_guard_inject(guard, &m->zero, step + 1);
    float scaled_norm = zero_global_norm(&m->zero);
    r.loss = gpt_step_loss(m);   // after the norm's synchronization: the GPU reads its loss once per step
    comm_all_reduce_host(m->comm, &r.loss, 1, DT_F32, OP_AVG);
    r.verdict = step_guard_check(guard, m->comm, step + 1, r.loss, scaled_norm, tc->grad_clip);
    r.updated = zero_step_install(&m->zero);   // DPU: the last step's update, whose thread ran beside these passes
    if (r.verdict.apply) r.updated |= zero_step_update(&m->zero, &opt, r.verdict.grad_scale);
    zero_quant_errors(&m->zero, r.quant_error);
    // --------------- TRAINING SECTION END -------------------
    phase_end(m, tc, &r, 3, &t);
    r.end = t;
    r.seconds = r.end - t0;
    r.lr = opt.lr;
    return r;
}

// ----------------------------------------------------------------------------
// the loop around it: reports, validation, samples, checkpoints, signals

// What the loop keeps between steps besides the model.
typedef struct {
    GPT *m;
    const TrainConfig *tc;
    FILE *say;                 // rank 0's stdout; NULL on the other ranks and with --quiet 1
    DataLoader train, val;
    int do_val, do_sample;
    Sampler sampler;
    Rng sample_rng;
    JsonLog log;
    Monitor mon;               // TensorBoard and CSV files (train/monitor.h)
    TrainState st;             // the state the loop started from; st.guard is the live one
    double t0, steps_time;     // the loop's start; the time of the steps after the first
    long long comm_bytes[N_COLL], comm_calls[N_COLL];   // the communication of the last step that updated
    long long comm_intra[N_COLL], comm_cross[N_COLL];   // the same, inside nodes and across them
    int last_applied;          // the last step applied (1-based; 0: none yet, the initial parameters)
    const char *ended_skipped; // why the last step was skipped, when it was a skip --max-skips counts
    char stop_note[1700];      // a signal's stop, said last
} TrainRun;

// The state after optimizer step `done` (1-based), as a checkpoint records it.
static TrainState train_state_now(const TrainRun *R, int done) {
    TrainState now = {.step = done, .data = dataloader_tell(&R->train), .rng = R->sample_rng.state,
                      .guard = R->st.guard, .data_tokens = R->st.data_tokens, .data_crc = R->st.data_crc};
    return now;
}

// What the run reads, said at start-up and added to the log's config record (its
// "data"): the training data's shards, tokens, sequences and steps per epoch; the
// validation data, or that there is none. Validation on the default Brown split while
// training on other data is said in a warning: it is rarely what a run means.
static void train_data_report(const TrainRun *R, cJSON *data) {
    const TrainConfig *tc = R->tc;
    char text[1600];
    double steps_per_epoch = (double)dataloader_micro_steps_per_epoch(&R->train) / tc->accum;
    dataloader_describe(&R->train, text, sizeof(text));
    if (R->say) printf("       train: %s = %.4g steps of %d sequences; --steps %d: %.3g epochs\n", text, steps_per_epoch,
                       tc->total_batch, tc->steps, tc->steps / steps_per_epoch);
    cJSON_AddNumberToObject(data, "train_shards", R->train.n_shards);
    cJSON_AddNumberToObject(data, "train_tokens", (double)R->train.n_tokens);
    cJSON_AddNumberToObject(data, "sequences_per_epoch", (double)R->train.n_seq);
    cJSON_AddNumberToObject(data, "steps_per_epoch", steps_per_epoch);
    int default_val = !strcmp(tc->val_path, DEFAULT_VAL_PATH);
    if (!R->do_val) {
        if (R->say) printf("       val:   none (%s)\n", tc->val_every > 0 ? "--val-batches 0" : "--val-every N validates every N steps");
        return;
    }
    dataloader_describe(&R->val, text, sizeof(text));
    // more batches than the set holds wrap around to its start: the repeats are said, not hidden
    long long per_batch = (long long)tc->B * R->m->comm->world, reads = per_batch * tc->val_batches;
    char repeats[200] = "";
    long long once = R->val.n_seq / per_batch;   // the batches that read each sequence at most once
    if (reads > R->val.n_seq)
        snprintf(repeats, sizeof(repeats), " = %lld reads of the set's %lld sequences, %lld of them repeats (%s%lld%s)", reads,
                 R->val.n_seq, reads - R->val.n_seq, once ? "--val-batches " : "a batch of at most ", once ? once : R->val.n_seq,
                 once ? " reads each once" : " sequences over all ranks reads each once");
    if (R->say) printf("       val:   %s%s | %d batches of %lld sequences every %d steps%s\n", text,
                       default_val ? " (the default, Brown's validation split: --val PATH for another)" : "",
                       tc->val_batches, per_batch, tc->val_every, repeats);
    cJSON_AddNumberToObject(data, "val_shards", R->val.n_shards);
    cJSON_AddNumberToObject(data, "val_tokens", (double)R->val.n_tokens);
    if (default_val && strcmp(tc->train_path, DEFAULT_TRAIN_PATH) && R->m->comm->rank == 0)
        diag("warning", "validation reads %s, the default (Brown), while training reads %s: --val PATH validates on your own data",
             tc->val_path, tc->train_path);
}

// The start-up lines, the data (first, so that a bad file fails before anything
// expensive), the sampler, the parameters, the log, and the plan and memory reports.
static void train_open(TrainRun *R, GPT *m, const TrainConfig *tc, const char *name, const char *workers) {
    memset(R, 0, sizeof(*R));
    R->m = m;
    R->tc = tc;
    Comm *comm = m->comm;
    R->say = comm->rank == 0 && !tc->quiet ? stdout : NULL;
    char nodes[1024];
    launch_describe(comm, nodes, sizeof(nodes));   // which ranks share a node (comm/launch.h)
    if (R->say) print_model(m, tc, name);
    if (R->say) printf("       ZeRO stage %d | %d rank%s x %s | micro batch %d x %d tokens, accumulation %d, global batch %d sequences\n"
                       "       %s\n", ZERO_STAGE, comm->world, comm->world > 1 ? "s" : "", workers, tc->B, tc->T, tc->accum,
                       tc->total_batch, nodes);

    const ModelConfig *mc = &m->cfg;
    dataloader_init(&R->train, tc->train_path, tc->B, tc->T, comm->rank, comm->world, mc->vocab_size, tc->shuffle, tc->seed);
    R->do_val = tc->val_every > 0 && tc->val_batches > 0;
    if (R->do_val) dataloader_init(&R->val, tc->val_path, tc->B, tc->T, comm->rank, comm->world, mc->vocab_size, 0, 0);
    R->do_sample = tc->sample_every > 0;
    if (R->do_sample) sampler_init(&R->sampler, m, tc);   // its KV cache now, so the memory report counts it

    R->st = load_start(m, tc, &R->train, R->say);
    if (tc->resume_dir[0]) dataloader_seek(&R->train, &R->st.data, tc->resume_dir);
    if (tc->save_dir[0]) checkpoint_claim_dir(comm, tc->save_dir, R->st.step);   // another run's newer checkpoints set aside
    R->last_applied = R->st.step - R->st.guard.consecutive;   // a resumed run's skips since its last applied step
    R->sample_rng.state = R->st.rng;
    R->log = jsonl_open(tc->log_path, comm->rank == 0, R->st.step);
    cJSON *config = config_json_record(tc);   // {"type":"config"}: the resolved configuration and what the data holds
    train_data_report(R, cJSON_GetObjectItem(config, "data"));
    jsonl_record(&R->log, config);
    if (R->say) zero_plan_print(&m->zero);
    cJSON *memrec = zero_memory_report(&m->zero, R->say != NULL);
    cJSON_AddNumberToObject(memrec, "rank", comm->rank);
    jsonl_record(&R->log, memrec);
    monitor_open(&R->mon, tc, comm, R->st.step, R->say != NULL);
}

// The step's numbers for the step line and the log, at the run's mean pace so far.
static StepStats step_stats(const TrainRun *R, int step, const StepResult *r) {
    const TrainConfig *tc = R->tc;
    GPT *m = R->m;
    long long tokens_per_step = (long long)tc->total_batch * tc->T;
    double flops_per_step = model_flops_per_token(&m->cfg, tc->T) * tokens_per_step, dt = r->seconds;
    int timed = step > R->st.step ? step - R->st.step : 1;
    double pace = R->steps_time > 0 ? R->steps_time / timed : dt;
    StepStats s = {
        .step = step + 1, .loss = r->loss, .lr = r->lr, .grad_norm = r->verdict.norm,
        .ms = dt * 1e3, .tokens_per_sec = tokens_per_step / dt,
        .peak_live_elems = ZERO_STAGE == 3 ? (long long)m->zero.peak_live : -1,
        .skipped = r->verdict.skipped, .skipped_steps = R->st.guard.skipped,
        .loss_scale = R->st.guard.fp16 ? r->verdict.scale : 0,
        .gflops = flops_per_step / dt * 1e-9,
        .mfu = m->peak_flops > 0 ? flops_per_step / dt / (m->peak_flops * m->comm->world) : -1,
        .mem_bytes = memory_in_use(&m->zero),
        .elapsed_s = r->end - R->t0, .eta_s = pace * (tc->steps - step - 1),
        .phase_ms = {tc->breakdown ? r->phase_s[0] * 1e3 : -1, r->phase_s[1] * 1e3, r->phase_s[2] * 1e3, r->phase_s[3] * 1e3},
        .quant_error = {r->quant_error[0], r->quant_error[1]},
    };
    return s;
}

// The step line, its JSONL record and ZeRO-Infinity's NVMe record for step `step`
// (0-based). Keeps, for the end of the run, the communication of the last step that
// changed the parameters, which step applied last, and whether the run now ends on a skip.
static void report_step(TrainRun *R, int step, const StepResult *r) {
    Comm *comm = R->m->comm;
    int first = step == R->st.step;
    if (r->verdict.apply) R->last_applied = step + 1;
    R->ended_skipped = r->verdict.counted ? r->verdict.skipped : NULL;
    if (!first || R->tc->steps - R->st.step == 1) R->steps_time += r->seconds;   // the mean pace leaves out the first step's warm-up
    if (r->updated || first) {   // a step that changes no parameters shares none: no all-gather
        memcpy(R->comm_bytes, comm->bytes, sizeof(R->comm_bytes));
        memcpy(R->comm_calls, comm->calls, sizeof(R->comm_calls));
        memcpy(R->comm_intra, comm->intra_bytes, sizeof(R->comm_intra));
        memcpy(R->comm_cross, comm->cross_bytes, sizeof(R->comm_cross));
    }
    StepStats s = step_stats(R, step, r);
    if (R->say) print_step(&s, R->tc->steps);
    jsonl_train(&R->log, &s);
    monitor_step(&R->mon, &s);
    cJSON *io = zero_nvme_record(&R->m->zero, step + 1);
    if (io) jsonl_record(&R->log, io);
}

// Whether an every-N action is due after step `done` (1-based): every N steps (N > 0) and after the last.
static int due(int done, int every, int last) { return last || (every > 0 && done % every == 0); }

// the validation loss after step `done`, printed and logged
static void train_validate(TrainRun *R, int done) {
    float vl = gpt_validate(R->m, &R->val, R->tc->val_batches);
    if (R->say) printf("step %4d/%d | val loss %.6f\n", done, R->tc->steps, vl);
    jsonl_val(&R->log, done, vl);
    monitor_val(&R->mon, done, vl);
}

// "the latest checkpoint in DIR stays ckpt_X", or that there is none, for a warning
static const char *latest_text(const char *dir, char *buf, size_t n) {
    char name[256];
    checkpoint_latest_name(dir, name, sizeof(name));
    if (name[0]) snprintf(buf, n, "the latest checkpoint in %.200s stays %.60s", dir, name);
    else snprintf(buf, n, "there is no checkpoint in %.200s", dir);
    return buf;
}

// The checkpoint --save-every (or the last step) asks for. A skipped step leaves
// the last applied step's state, which is saved; a step whose loss is not finite is
// not, since its parameters are known to diverge: the latest checkpoint stays so.
static void train_checkpoint(TrainRun *R, int done, float loss) {
    const TrainConfig *tc = R->tc;
    char latest[300];
    if (isfinite(loss)) {
        TrainState now = train_state_now(R, done);
        train_save(R->m, tc, &now, R->say);
    } else if (R->m->comm->rank == 0)
        diag("warning", "step %d: no checkpoint written: the loss is not finite (%g), so the parameters (those of the "
             "last applied step) diverge; %s", done, loss, latest_text(tc->save_dir, latest, sizeof(latest)));
}

// SIGTERM, SIGINT or SIGUSR1 on any rank (train/preempt.h): every rank polls after
// every step, so all act after the same one. A request saves a checkpoint unless one
// was due at this step anyway; a stop request then ends the loop: returns 1.
static int train_signals(TrainRun *R, int done, int last, int save_due, float loss) {
    const TrainConfig *tc = R->tc;
    Comm *comm = R->m->comm;
    comm_phase("the per-step signal agreement", done);
    int req = preempt_poll(comm);
    if (!req || last) return 0;
    if (tc->save_dir[0] && !save_due && isfinite(loss)) {
        TrainState now = train_state_now(R, done);
        train_save(R->m, tc, &now, R->say);
    }
    if (req & PREEMPT_STOP) {   // the line says what was saved: nothing of a step whose loss is not finite
        char what[1400], name[256];
        checkpoint_latest_name(tc->save_dir, name, sizeof(name));
        if (!tc->save_dir[0]) snprintf(what, sizeof(what), "nothing saved (no --save)");
        else if (isfinite(loss)) snprintf(what, sizeof(what), "checkpoint saved, continue with --resume %s", tc->save_dir);
        else if (name[0]) snprintf(what, sizeof(what), "no checkpoint of that step (its loss is not finite); --resume %s continues from %s",
                                   tc->save_dir, name);
        else snprintf(what, sizeof(what), "no checkpoint of that step (its loss is not finite), and none in %s", tc->save_dir);
        // said after the end-of-run reports (train()), so that it is the run's last line; mpirun turns a
        // Ctrl-C into a SIGTERM to each rank, so under mpirun the note says which keys that may have been
        int by_mpirun = (req & PREEMPT_SIGTERM) && getenv("OMPI_COMM_WORLD_SIZE") && !getenv("SLURM_STEP_ID");
        snprintf(R->stop_note, sizeof(R->stop_note), "stopped by %s after step %d of %d: %s; exit status %d%s",
                 preempt_signal_name(req), done, tc->steps, what, EXIT_PREEMPTED,
                 by_mpirun ? " (mpirun passes a Ctrl-C, or a SIGTERM to itself, to the ranks as SIGTERM)" : "");
        return 1;
    }
    if (!tc->save_dir[0] && comm->rank == 0) diag("warning", "SIGUSR1 asks for a checkpoint, but there is no --save directory");
    return 0;
}

// After the loop: --steps 0 --save DIR writes the initial weights; the reports of
// the communication of the last step that updated the parameters and the peak memory; then frees.
static void train_close(TrainRun *R) {
    GPT *m = R->m;
    const TrainConfig *tc = R->tc;
    Comm *comm = m->comm;
    if (tc->steps == R->st.step && tc->save_dir[0]) {
        TrainState now = train_state_now(R, R->st.step);
        train_save(m, tc, &now, R->say);
    }
    if (tc->steps > R->st.step) {
        memcpy(comm->bytes, R->comm_bytes, sizeof(R->comm_bytes));
        memcpy(comm->calls, R->comm_calls, sizeof(R->comm_calls));
        memcpy(comm->intra_bytes, R->comm_intra, sizeof(R->comm_intra));
        memcpy(comm->cross_bytes, R->comm_cross, sizeof(R->comm_cross));
        jsonl_record(&R->log, zero_comm_report(&m->zero, tc->accum, R->say != NULL));
    }
    if (R->say && ZERO_STAGE == 3)
        printf("stage 3: peak gathered parameters %zu elements (cap %zu, --max-live %lld)\n",
               m->zero.peak_live, m->zero.plan.live_cap, tc->max_live_elems);
    jsonl_record(&R->log, zero_peak_memory_report(&m->zero, R->say != NULL));
    jsonl_close(&R->log);
    monitor_close(&R->mon);
    if (R->do_sample) sampler_free(&R->sampler, m);
    dataloader_free(&R->train);
    if (R->do_val) dataloader_free(&R->val);
}

// A run whose last step was skipped, a skip --max-skips counts (a non-finite loss or
// gradients), did not train to its end: one line on every rank says so, since which
// step, and which checkpoint holds its parameters, those of R->last_applied; `bad`, when
// not NULL, says those parameters are not finite. Returns the exit status, 1.
static int train_ended_skipped(const TrainRun *R, const char *bad) {
    const TrainConfig *tc = R->tc;
    int applied = R->last_applied, n = tc->steps - applied;
    char first[32], held[1400] = "", name[256] = "";
    if (n > 1) snprintf(first, sizeof(first), "steps %d-%d", applied + 1, tc->steps);
    else snprintf(first, sizeof(first), "step %d", tc->steps);
    if (tc->save_dir[0]) checkpoint_latest_name(tc->save_dir, name, sizeof(name));
    if (!name[0]) snprintf(held, sizeof(held), "no checkpoint holds them");
    else if (ckpt_step_of(name) >= applied)   // saved at or after it: a skipped step changes nothing
        snprintf(held, sizeof(held), "the latest checkpoint, %s/%s, holds them", tc->save_dir, name);
    else snprintf(held, sizeof(held), "the latest checkpoint is %s/%s, of step %d", tc->save_dir, name, ckpt_step_of(name));
    char finite[600] = "";
    if (bad) snprintf(finite, sizeof(finite), ", and they are not finite: %s", bad);
    diag("error", "the run ended on %d skipped step%s (%s, %s): its parameters are those of step %d, the last applied one%s; %s",
         n, n > 1 ? "s" : "", first, R->ended_skipped, applied, finite, held);
    return 1;
}

// The end of a run: its parameters checked as a save checks them (an applied step with a
// finite loss can still overflow them, as --lr 3e38 does), so the exit status does not
// depend on --save. Collective. Returns 0, or 1 after one line on every rank.
static int train_ended_nonfinite(GPT *m, const TrainRun *R) {
    char bad[512] = "";
    if (step_guard_master_finite(&m->zero, bad, sizeof(bad))) return R->ended_skipped ? train_ended_skipped(R, NULL) : 0;
    if (R->ended_skipped) return train_ended_skipped(R, bad);
    diag("error", "step %d: the run ended with parameters that are not finite: %s (a checkpoint of them would be refused; "
         "lower the learning rate)", R->tc->steps, bad);
    return 1;
}

// The training loop: tc->steps optimizer steps (train_step), each followed by its
// reports and, as asked, validation, samples, a checkpoint and the signal check.
// `name` and `workers` (each rank's threads or device) go into the start-up line.
// Returns the exit status: 0; EXIT_PREEMPTED when a signal stopped the run; 1 when
// it ended on skipped steps.
static int train(GPT *m, const TrainConfig *tc, const char *name, const char *workers) {
    TrainRun R;
    train_open(&R, m, tc, name, workers);
    int status = 0;
    preempt_install();
    comm_watchdog_steps(1);   // any stall in the steps counts, not only waits
    R.t0 = wall_time();
    int first = R.st.step;
    for (int step = R.st.step; step < tc->steps; step++) {
        StepResult r = train_step(m, tc, &R.train, &R.st.guard, step);
        // everything that follows now is just diagnostics: reports, validation, samples, checkpoints, signals
        report_step(&R, step, &r);
        if (r.verdict.stop[0]) fatal("%s", r.verdict.stop);
        int done = step + 1, last = done == tc->steps;
        if (last) zero_step_install(&m->zero);   // DPU: the run ends with every update applied
        if (R.do_val && due(done, tc->val_every, last)) train_validate(&R, done);
        if (R.do_sample && due(done, tc->sample_every, last)) {
            gpt_generate(m, &R.sampler, &R.sample_rng, R.say, "sample");
            int stride = R.sampler.n_ctx + R.sampler.len;
            jsonl_sample(&R.log, done, R.sampler.seq, R.sampler.n, stride, stride);
        }
        int save_due = tc->save_dir[0] && due(done, tc->save_every, last);
        if (save_due) train_checkpoint(&R, done, r.loss);
        if (train_signals(&R, done, last, save_due, r.loss)) { status = EXIT_PREEMPTED; break; }
    }
    zero_step_install(&m->zero);   // a stop request ends the loop early
    comm_watchdog_steps(0);
    comm_phase("the end-of-run reports", tc->steps);
    test_stop_point("shutdown");
    if (status == 0 && tc->steps > first) status = train_ended_nonfinite(m, &R);
    train_close(&R);
    if (R.stop_note[0] && m->comm->rank == 0) diag("note", "%s", R.stop_note);
    return status;
}

// --sample 1: the weights of --init or --resume, the samples, nothing trained.
// Deterministic for a --seed; rank 0 prints them (also with --quiet 1).
static int sample_run(GPT *m, const TrainConfig *tc, const char *name, const char *workers) {
    Comm *comm = m->comm;
    FILE *say = comm->rank == 0 && !tc->quiet ? stdout : NULL;
    Sampler s;
    sampler_init(&s, m, tc);
    if (say) {
        print_model(m, tc, name);
        printf("       ZeRO stage %d | %d rank%s x %s | %d sample%s x %d tokens after %d context tokens | temperature %g, "
               "top-k %d, top-p %g, seed %llu | %s\n", ZERO_STAGE, comm->world, comm->world > 1 ? "s" : "", workers, s.n,
               s.n > 1 ? "s" : "", s.len, s.n_ctx, s.temperature, s.top_k, s.top_p, (unsigned long long)tc->seed,
               s.kv ? "KV cache" : "a full forward per token (--kv-cache 0)");
        if (s.kv) printf("       KV cache: %.2f MiB per rank\n", s.cache_bytes / 1048576.0);
    }
    load_start(m, tc, NULL, say);
    Rng rng = {tc->seed ^ 0x5DEECE66DULL};   // the training loop's sampling stream for this seed
    double t0 = wall_time();
    gpt_generate(m, &s, &rng, comm->rank == 0 ? stdout : NULL, NULL);
    double dt = wall_time() - t0;
    if (say) printf("sampled %d x %d tokens in %.2f s: %.1f tokens/s (%s)\n", s.n, s.len, dt, s.n * s.len / dt,
                    s.kv ? "KV cache" : "full forward per token");
    sampler_free(&s, m);
    return 0;
}
