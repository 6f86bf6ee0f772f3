// train/loop.h: what both trainers share above the model: start-up (MPI, the
// flags, the memory estimator), validation, sampling and the training loop.
// A trainer's main() calls train_startup, builds its model and calls train (or,
// with --sample 1, sample_run):
//
//   GPT (its model) has: ModelConfig cfg; ModelLayout layout; Zero zero; Comm *comm;
//                        int B, T; int *inputs, *targets (host, B*T);
//                        double peak_flops (per device, for the step line's MFU; 0: unknown)
//   gpt_forward, gpt_backward, gpt_decode (train/passes.h), what train/sample.h lists, and
//   void gpt_set_dloss(GPT *m, float dloss)        the dloss the coming training backwards take (the
//                                                  GPU's fused classifier uses it in the forward already)
//   float gpt_step_loss(GPT *m)                    the mean loss of the training forwards since the last
//                                                  call: each micro-batch's mean loss (float), summed in
//                                                  double in micro-step order, over their number (the GPU
//                                                  sums on the device: one read per step, not per micro-step)
//
// train_gpt.c (CPU, fp32) and train_gpt.cu (GPU, bf16 or fp16) differ only in those.
// The optimizer step goes through train/step_guard.h: fp16 loss scaling, skipped steps.
// Include this file after the trainer's GPT and its functions above are defined.
#pragma once
#include "train/jsonl.h"
#include "train/zero_report.h"
#include "train/sample.h"
#include "train/savedir.h"
#include "train/preempt.h"

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
    else snprintf(from, sizeof(from), "--preset %s and the flags", tc->preset);
    snprintf(g_alloc_context, sizeof(g_alloc_context), "the model: %s, %d layers, width %d, MLP %d, vocabulary %d, %d positions, from %.500s",
             arch_name(m->arch), m->n_layer, m->d_model, m->d_ff, m->vocab_size, m->max_seq, from);
}

// MPI, the flags, the batch over the world, the collective backend, and a check
// that every rank was given the same model. Returns 0 when there is nothing to
// train: --estimate-memory prints the per-rank memory of every stage (plan
// arithmetic only, nothing allocated) and the run ends.
static int train_startup(Comm *comm, TrainConfig *tc, int *argc, char ***argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);   // progress lines reach a redirected file as they are printed
    comm_init_world(comm, argc, argv);
    parse_args(tc, *argc, *argv, comm->rank == 0);
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
        // sampling builds no training batch: the KV cache has its own buffers (sampler_init);
        // --kv-cache 0 runs its full forwards on num_samples x max_seq activations
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

// parameters: resume, --init, or a seeded initialization. Each rank reads or
// generates only what its ZeRO stage holds (zero_load_params). train (NULL when
// sampling): the train data, which a checkpoint records and a resume must share.
static TrainState load_start(GPT *m, const TrainConfig *tc, const DataLoader *train, FILE *say) {
    TrainState st = {0, {0}, tc->seed ^ 0x5DEECE66DULL, step_guard_init(tc, m->comm), 0, 0};
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

// The step line: loss, lr, gradient norm (with fp16 the loss scale; once a step was
// skipped, the skips), time, tokens/s, MFU (or GFLOP/s without a known peak), memory
// in use, elapsed time and the time left; with --breakdown a second line of phases.
static void print_step(const StepStats *s, int steps) {
    char extra[160] = "", perf[48], el[32], eta[32];
    int k = 0;
    if (s->loss_scale > 0) k += snprintf(extra + k, sizeof(extra) - k, " | scale %.10g", s->loss_scale);
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
    char where[512] = "";
    if (!step_guard_master_finite(&m->zero, where, sizeof(where)))
        fatal("step %d: not saving a checkpoint to %s: %s (the checkpoints there are left as they were)",
              now->step, tc->save_dir, where);
    checkpoint_save(&m->zero, tc->save_dir, now, tc);
    if (say) printf("saved %s/ckpt_%08d\n", tc->save_dir, now->step);
}

// "the latest checkpoint in DIR stays ckpt_X", or that there is none, for a warning
static const char *latest_text(const char *dir, char *buf, size_t n) {
    char name[256];
    checkpoint_latest_name(dir, name, sizeof(name));
    if (name[0]) snprintf(buf, n, "the latest checkpoint in %.200s stays %.60s", dir, name);
    else snprintf(buf, n, "there is no checkpoint in %.200s", dir);
    return buf;
}

// A run whose last step was skipped (a skip --max-skips counts: a non-finite loss or
// gradients) did not train to its end: one line on every rank saying so, since which
// step, and which checkpoint holds its parameters (those of step `applied`, the last
// applied one). Returns the exit status, 1.
static int train_ended_skipped(const TrainConfig *tc, int applied, const char *reason) {
    int n = tc->steps - applied;
    char first[32], held[1400] = "", name[256] = "";
    if (n > 1) snprintf(first, sizeof(first), "steps %d-%d", applied + 1, tc->steps);
    else snprintf(first, sizeof(first), "step %d", tc->steps);
    if (tc->save_dir[0]) checkpoint_latest_name(tc->save_dir, name, sizeof(name));
    if (!name[0]) snprintf(held, sizeof(held), "no checkpoint holds them");
    else if (ckpt_step_of(name) >= applied)   // saved at or after it: a skipped step changes nothing
        snprintf(held, sizeof(held), "the latest checkpoint, %s/%s, holds them", tc->save_dir, name);
    else snprintf(held, sizeof(held), "the latest checkpoint is %s/%s, of step %d", tc->save_dir, name, ckpt_step_of(name));
    diag("error", "the run ended on %d skipped step%s (%s, %s): its parameters are those of step %d, the last applied one; %s",
         n, n > 1 ? "s" : "", first, reason, applied, held);
    return 1;
}

// The training loop: tc->steps optimizer steps of tc->accum micro-steps each,
// with validation, samples and checkpoints as asked. `name` and `workers` (the
// threads or the device of each rank) go into the start-up line. Returns the exit
// status: 0, or EXIT_PREEMPTED when a signal stopped the run (train/preempt.h).
static int train(GPT *m, const TrainConfig *tc, const char *name, const char *workers) {
    Comm *comm = m->comm;
    const ModelConfig *mc = &m->cfg;
    FILE *say = comm->rank == 0 && !tc->quiet ? stdout : NULL;
    char nodes[1024];
    launch_describe(comm, nodes, sizeof(nodes));   // which ranks share a node (comm/launch.h)
    if (say) print_model(m, tc, name);
    if (say) printf("       ZeRO stage %d | %d rank%s x %s | micro batch %d x %d tokens, accumulation %d, global batch %d sequences\n"
                    "       %s\n", ZERO_STAGE, comm->world, comm->world > 1 ? "s" : "", workers, tc->B, tc->T, tc->accum,
                    tc->total_batch, nodes);

    // data first: a bad file fails before anything expensive
    DataLoader train, val;
    dataloader_init(&train, tc->train_path, tc->B, tc->T, comm->rank, comm->world, mc->vocab_size, tc->shuffle, tc->seed);
    int do_val = tc->val_every > 0 && tc->val_batches > 0;
    if (do_val) dataloader_init(&val, tc->val_path, tc->B, tc->T, comm->rank, comm->world, mc->vocab_size, 0, 0);
    Sampler sampler;   // its KV cache allocated now (the memory report's kv_cache line)
    int do_sample = tc->sample_every > 0;
    if (do_sample) sampler_init(&sampler, m, tc);

    TrainState st = load_start(m, tc, &train, say);
    if (tc->resume_dir[0]) dataloader_seek(&train, &st.data, tc->resume_dir);
    if (tc->save_dir[0]) checkpoint_claim_dir(comm, tc->save_dir, st.step);   // another run's newer checkpoints set aside
    JsonLog log = jsonl_open(tc->log_path, comm->rank == 0, st.step > 0);
    jsonl_record(&log, config_json_record(tc));   // {"type":"config"}: the resolved configuration
    if (say) zero_plan_print(&m->zero);
    cJSON *memrec = zero_memory_report(&m->zero, say != NULL);
    cJSON_AddNumberToObject(memrec, "rank", comm->rank);
    jsonl_record(&log, memrec);

    Rng sample_rng = {st.rng};
    long long comm_bytes[N_COLL] = {0}, comm_calls[N_COLL] = {0};   // the last applied step's communication
    long long tokens_per_step = (long long)tc->total_batch * tc->T;
    double flops_per_step = model_flops_per_token(mc, tc->T) * tokens_per_step;
    StepGuard *guard = &st.guard;
    int status = 0, last_applied = st.step - guard->consecutive;   // (a resumed run's skips since its last applied step)
    const char *ended_skipped = NULL;   // why the last step was skipped, if it was a skip --max-skips counts
    preempt_install();
    comm_watchdog_steps(1);
    double loop_t0 = wall_time(), steps_time = 0;
    for (int step = st.step; step < tc->steps; step++) {
        double t0 = wall_time(), phase[4] = {0, 0, 0, 0}, tp;   // --breakdown: forward, backward, comm wait, optimizer
        comm_blocked_seconds();
        zero_step_begin(&m->zero);
        comm_reset_counters(comm);
        float dloss = step_guard_dloss(guard, tc->accum);   // times the loss scale with fp16
        gpt_set_dloss(m, dloss);
        for (int k = 0; k < tc->accum; k++) {
            comm_phase("forward/backward", step + 1);
            dataloader_next(&train, m->inputs, m->targets);
            tp = wall_time();
            gpt_forward(m, m->targets, 1);   // its loss joins the step's (gpt_step_loss)
            if (tc->breakdown) zb_sync(&m->zero.be);
            phase[0] += wall_time() - tp;
            tp = wall_time();
            gpt_backward(m, m->targets, dloss);
            if (tc->breakdown) zb_sync(&m->zero.be);
            phase[1] += wall_time() - tp;
            zero_micro_step_end(&m->zero);
        }
        // the step (train/step_guard.h): reduce, check for Inf/NaN on every rank, update unless skipped;
        // a skipped step does not advance the schedule or Adam's step count
        comm_phase("the optimizer step", step + 1);
        tp = wall_time();
        int applied = step - (int)guard->skipped;
        ZeroOptim opt = {lr_at(tc, applied, tc->steps), tc->beta1, tc->beta2, tc->eps, tc->weight_decay, tc->grad_clip, applied + 1};
        zero_step_reduce(&m->zero);
        step_guard_inject(guard, &m->zero, step + 1);
        float scaled_norm = zero_global_norm(&m->zero);
        // the step's loss, read after the norm's synchronization (the GPU's one read of it per step)
        float step_loss = gpt_step_loss(m);
        comm_all_reduce_host(comm, &step_loss, 1, DT_F32, OP_AVG);
        StepVerdict v = step_guard_check(guard, comm, step + 1, step_loss, scaled_norm, tc->grad_clip);
        if (v.apply) zero_step_update(&m->zero, &opt, v.grad_scale);
        if (v.apply) last_applied = step + 1;
        ended_skipped = v.counted ? v.skipped : NULL;
        if (tc->breakdown) zb_sync(&m->zero.be);
        double t1 = wall_time(), dt = t1 - t0;
        phase[3] = t1 - tp;
        phase[2] = comm_blocked_seconds();   // (inside the phases above: each includes its own waits)
        if (step > st.step || tc->steps - st.step == 1) steps_time += dt;   // the mean pace leaves out the first step's warm-up
        if (v.apply || step == st.step) {   // (a skipped step has no parameter all-gather)
            memcpy(comm_bytes, comm->bytes, sizeof(comm_bytes));
            memcpy(comm_calls, comm->calls, sizeof(comm_calls));
        }
        int timed = step > st.step ? step - st.step : 1;
        StepStats s = {step + 1, step_loss, opt.lr, v.norm, dt * 1e3, tokens_per_step / dt,
                       ZERO_STAGE == 3 ? (long long)m->zero.peak_live : -1, v.skipped, guard->skipped,
                       guard->fp16 ? v.scale : 0, flops_per_step / dt * 1e-9,
                       m->peak_flops > 0 ? flops_per_step / dt / (m->peak_flops * comm->world) : -1, memory_in_use(&m->zero),
                       t1 - loop_t0, (steps_time > 0 ? steps_time / timed : dt) * (tc->steps - step - 1),
                       {tc->breakdown ? phase[0] * 1e3 : -1, phase[1] * 1e3, phase[2] * 1e3, phase[3] * 1e3}};
        if (say) print_step(&s, tc->steps);
        jsonl_train(&log, &s);
        cJSON *io = zero_nvme_record(&m->zero, step + 1);   // ZeRO-Infinity: the step's NVMe I/O
        if (io) jsonl_record(&log, io);
        if (v.stop[0]) fatal("%s", v.stop);

        int last = step + 1 == tc->steps;
        if (do_val && ((step + 1) % tc->val_every == 0 || last)) {
            float vl = gpt_validate(m, &val, tc->val_batches);
            if (say) printf("step %4d/%d | val loss %.6f\n", step + 1, tc->steps, vl);
            jsonl_val(&log, step + 1, vl);
        }
        if (do_sample && ((step + 1) % tc->sample_every == 0 || last)) gpt_generate(m, &sampler, &sample_rng, say, "sample");
        // a skipped step leaves the last applied step's state, which is saved; but not when the
        // loss was not finite: those parameters are known to diverge, the last checkpoint stays latest
        TrainState now = {step + 1, dataloader_tell(&train), sample_rng.state, *guard, st.data_tokens, st.data_crc};
        int saved = tc->save_dir[0] && ((tc->save_every > 0 && (step + 1) % tc->save_every == 0) || last);
        char latest[300];
        if (saved && isfinite(step_loss)) train_save(m, tc, &now, say);
        else if (saved && comm->rank == 0) diag("warning", "step %d: no checkpoint written: the loss is not finite (%g), so the "
                                                "parameters (those of the last applied step) diverge; %s", step + 1, step_loss,
                                                latest_text(tc->save_dir, latest, sizeof(latest)));
        // SIGTERM / SIGINT / SIGUSR1 on any rank: every rank acts after this same step
        comm_phase("the per-step signal agreement", step + 1);
        int req = preempt_poll(comm);
        if (req && !last) {
            if (tc->save_dir[0] && !saved && isfinite(step_loss)) train_save(m, tc, &now, say);
            if (req & PREEMPT_STOP) {
                char what[1400], name[256];
                checkpoint_latest_name(tc->save_dir, name, sizeof(name));
                if (!tc->save_dir[0]) snprintf(what, sizeof(what), "nothing saved (no --save)");
                else if (isfinite(step_loss)) snprintf(what, sizeof(what), "checkpoint saved, continue with --resume %s", tc->save_dir);
                else if (name[0]) snprintf(what, sizeof(what), "no checkpoint of that step (its loss is not finite); --resume %s continues from %s",
                                           tc->save_dir, name);
                else snprintf(what, sizeof(what), "no checkpoint of that step (its loss is not finite), and none in %s", tc->save_dir);
                if (comm->rank == 0)
                    diag("note", "stopped by %s after step %d of %d: %s; exit status %d", preempt_signal_name(req), step + 1, tc->steps,
                         what, EXIT_PREEMPTED);
                status = EXIT_PREEMPTED;
                break;
            }
            if (!tc->save_dir[0] && comm->rank == 0) diag("warning", "SIGUSR1 asks for a checkpoint, but there is no --save directory");
        }
    }
    comm_watchdog_steps(0);
    comm_phase("the end-of-run reports", tc->steps);
    test_stop_point("shutdown");
    if (status == 0 && ended_skipped) status = train_ended_skipped(tc, last_applied, ended_skipped);
    if (tc->steps == st.step && tc->save_dir[0]) {   // --steps 0 --save DIR: write the initial weights
        TrainState now = {st.step, dataloader_tell(&train), sample_rng.state, *guard, st.data_tokens, st.data_crc};
        train_save(m, tc, &now, say);
    }
    if (tc->steps > st.step) {
        memcpy(comm->bytes, comm_bytes, sizeof(comm_bytes));
        memcpy(comm->calls, comm_calls, sizeof(comm_calls));
        jsonl_record(&log, zero_comm_report(&m->zero, tc->accum, say != NULL));
    }
    if (say && ZERO_STAGE == 3)
        printf("stage 3: peak gathered parameters %zu elements (cap %zu, --max-live %lld)\n",
               m->zero.peak_live, m->zero.plan.live_cap, tc->max_live_elems);
    jsonl_record(&log, zero_peak_memory_report(&m->zero, say != NULL));
    jsonl_close(&log);
    if (do_sample) sampler_free(&sampler, m);
    dataloader_free(&train);
    if (do_val) dataloader_free(&val);
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
