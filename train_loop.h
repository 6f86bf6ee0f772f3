// train_loop.h: what both trainers share above the model: start-up (MPI, the
// flags, the memory estimator), validation, sampling and the training loop.
// A trainer's main() calls train_startup, builds its model and calls train:
//
//   GPT (its model) has: ModelConfig cfg; ModelLayout layout; Zero zero; Comm *comm;
//                        int B, T; int *inputs, *targets (host, B*T)
//   gpt_forward, gpt_backward (passes.h), and
//   const float *gpt_logits_host(GPT *m, int t)   logits of position t of sequence 0, on the host
//
// train_gpt.c (CPU, fp32) and train_gpt.cu (GPU, bf16) differ only in those.
#pragma once
#include "jsonl.h"
#include "zero_report.h"
#include "savedir.h"
#include "preempt.h"

// A hash of everything the ranks must agree on: the model and the batch shape.
static long long config_hash(const TrainConfig *c) {
    const ModelConfig *m = &c->model;
    int v[] = {m->arch, m->n_layer, m->n_head, m->n_kv_head, m->d_model, m->d_ff, m->vocab_size, m->max_seq, c->B, c->T, c->accum, c->steps};
    return (long long)crc32_update(0, v, sizeof(v));
}

// MPI, the flags, the batch over the world, the collective backend, and a check
// that every rank was given the same model. Returns 0 when there is nothing to
// train: --estimate-memory prints the per-rank memory of every stage (plan
// arithmetic only, nothing allocated) and the run ends.
static int train_startup(Comm *comm, TrainConfig *tc, int *argc, char ***argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);   // progress lines reach a redirected file as they are printed
    comm_init(comm, argc, argv);
    parse_args(tc, *argc, *argv, comm->rank == 0);
    if (tc->estimate_world > 0) {
        ModelLayout L;
        model_layout_build(&L, &tc->model);
        JsonLog log = jsonl_open(tc->log_path, comm->rank == 0, 0);
        cJSON *rec = zero_estimate(&L, tc->estimate_world, comm->rank == 0);
        jsonl_record(&log, rec);
        jsonl_close(&log);
        model_layout_free(&L);
        comm_finalize(comm);
        return 0;
    }
    config_resolve_batch(tc, comm->world);
    if (comm->rank == 0 && !tc->quiet) config_print_resolved(tc, stdout);
    comm_setup_backend(comm, tc->comm);
    comm_check_same(comm, config_hash(tc), "the model and batch configuration (--arch/--preset/sizes/--batch/--seq/--accum/--steps)");
    if (tc->save_dir[0]) savedir_open(comm, tc->save_dir);   // created, locked, test-written before any training
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

// Sampling from position 0 after an end-of-text token, one full forward per
// token (simple, not fast). Every rank runs it in lockstep with the same RNG
// (under stage 3 the forward needs every rank); rank 0 prints.
static void gpt_sample(GPT *m, Tokenizer *tok, Rng *rng, int len, FILE *out) {
    const ModelConfig *c = &m->cfg;
    int T = m->T, V = c->vocab_size;
    if (len > T - 1) len = T - 1;
    for (int i = 0; i < m->B * T; i++) m->inputs[i] = GPT2_EOT < V ? GPT2_EOT : 0;
    if (out) fprintf(out, "sample: ");
    for (int t = 1; t <= len; t++) {
        comm_phase("sampling", g_wd.step);
        gpt_forward(m, NULL, 0);
        const float *l = gpt_logits_host(m, t - 1);
        float mx = -INFINITY;
        for (int i = 0; i < V; i++) if (l[i] > mx) mx = l[i];
        double sum = 0;
        for (int i = 0; i < V; i++) sum += exp(l[i] - mx);
        double r = rng_uniform(rng) * sum, acc = 0;
        int next = V - 1;
        for (int i = 0; i < V; i++) { acc += exp(l[i] - mx); if (acc > r) { next = i; break; } }
        m->inputs[t] = next;
        if (out && tok) {
            size_t n;
            const unsigned char *b = tokenizer_decode(tok, next, &n);
            fwrite(b, 1, n, out);
        }
    }
    if (out) { fprintf(out, "\n"); fflush(out); }
}

// parameters: resume, --init, or a seeded initialization
// (st.data_tokens and data_crc identify the train data: a checkpoint records them)
static TrainState load_start(GPT *m, const TrainConfig *tc, const DataLoader *train, FILE *say) {
    TrainState st = {0, 0, tc->seed ^ 0x5DEECE66DULL, train->n_tokens, crc32_update(0, train->tokens, 2 * (size_t)train->n_tokens)};
    float *flat = (float *)xmalloc(m->layout.num_params * sizeof(float), "parameters (load)");
    if (tc->resume_dir[0]) {
        checkpoint_load(&m->zero, tc, &st, flat, say != NULL);
    } else if (tc->init_path[0]) {
        char err[1200];
        if (!model_file_read(tc->init_path, &m->cfg, m->layout.num_params, flat, err, sizeof(err))) fatal("%s", err);
        zero_load_params(&m->zero, flat);
    } else {
        model_init_params(&m->layout, flat, tc->seed);
        zero_load_params(&m->zero, flat);
    }
    free(flat);
    return st;
}

static void print_step(const StepStats *s, int steps, double gflops) {
    printf("step %4d/%d | loss %.6f | lr %.2e | norm %.4f | %.1f ms | %.0f tok/s | %.2f GFLOP/s\n",
           s->step, steps, s->loss, s->lr, s->grad_norm, s->ms, s->tokens_per_sec, gflops);
}

// a checkpoint of the state after `step` steps (collective)
static void train_save(GPT *m, const TrainConfig *tc, const TrainState *st, int step, long long data_pos, uint64_t rng, FILE *say) {
    TrainState now = *st;
    now.step = step; now.data_pos = data_pos; now.rng = rng;
    comm_phase("checkpoint save", step);
    checkpoint_save(&m->zero, tc->save_dir, &now, tc);
    if (say) printf("saved %s/ckpt_%08d\n", tc->save_dir, step);
}

// The training loop: tc->steps optimizer steps of tc->accum micro-steps each,
// with validation, samples and checkpoints as asked. `name` and `workers` (the
// threads or the device of each rank) go into the start-up line. Returns the exit
// status: 0, or EXIT_PREEMPTED when a signal stopped the run (preempt.h).
static int train(GPT *m, const TrainConfig *tc, const char *name, const char *workers) {
    Comm *comm = m->comm;
    const ModelConfig *mc = &m->cfg;
    FILE *say = comm->rank == 0 && !tc->quiet ? stdout : NULL;
    if (say) printf("zeroc %s | %s %s: %d layers, %d heads (%d kv), C=%d, F=%d, V=%d, %zu parameters\n"
                    "       ZeRO stage %d | %d rank%s x %s | micro batch %d x %d tokens, accumulation %d, global batch %d sequences\n",
                    name, arch_name(mc->arch), tc->preset, mc->n_layer, mc->n_head, mc->n_kv_head, mc->d_model, mc->d_ff,
                    mc->vocab_size, m->layout.num_params, ZERO_STAGE, comm->world, comm->world > 1 ? "s" : "", workers,
                    tc->B, tc->T, tc->accum, tc->total_batch);

    // data first: a bad file fails before anything expensive
    DataLoader train, val;
    dataloader_init(&train, tc->train_path, tc->B, tc->T, comm->rank, comm->world, mc->vocab_size);
    int do_val = tc->val_every > 0 && tc->val_batches > 0;
    if (do_val) dataloader_init(&val, tc->val_path, tc->B, tc->T, comm->rank, comm->world, mc->vocab_size);
    Tokenizer tok;
    int have_tok = tc->sample_every > 0;
    if (have_tok) tokenizer_init(&tok, tc->tokenizer_path);

    TrainState st = load_start(m, tc, &train, say);
    train.pos = st.data_pos;
    JsonLog log = jsonl_open(tc->log_path, comm->rank == 0, st.step > 0);
    jsonl_record(&log, config_json_record(tc));   // {"type":"config"}: the resolved configuration
    if (say) zero_plan_print(&m->zero);
    cJSON *memrec = zero_memory_report(&m->zero, say != NULL);
    cJSON_AddNumberToObject(memrec, "rank", comm->rank);
    jsonl_record(&log, memrec);

    Rng sample_rng = {st.rng};
    long long comm_bytes[N_COLL] = {0}, comm_calls[N_COLL] = {0};   // the last step's communication
    long long tokens_per_step = (long long)tc->total_batch * tc->T;
    double flops_per_step = model_flops_per_token(mc, tc->T) * tokens_per_step;
    int status = 0;
    preempt_install();
    comm_watchdog_start(comm, comm->rank, tc->timeout);
    for (int step = st.step; step < tc->steps; step++) {
        double t0 = wall_time();
        zero_step_begin(&m->zero);
        comm_reset_counters(comm);
        double loss = 0;
        for (int k = 0; k < tc->accum; k++) {
            comm_phase("forward/backward", step + 1);
            dataloader_next(&train, m->inputs, m->targets);
            loss += gpt_forward(m, m->targets, 1);
            gpt_backward(m, m->targets, 1.0f / tc->accum);
            zero_micro_step_end(&m->zero);
        }
        float step_loss = (float)(loss / tc->accum);
        comm_all_reduce_host(comm, &step_loss, 1, DT_F32, OP_AVG);
        comm_phase("the optimizer step", step + 1);
        ZeroOptim opt = {lr_at(tc, step, tc->steps), tc->beta1, tc->beta2, tc->eps, tc->weight_decay, tc->grad_clip, step + 1};
        float norm = zero_step_end(&m->zero, &opt);
        double dt = wall_time() - t0;
        memcpy(comm_bytes, comm->bytes, sizeof(comm_bytes));
        memcpy(comm_calls, comm->calls, sizeof(comm_calls));
        StepStats s = {step + 1, step_loss, opt.lr, norm, dt * 1e3, tokens_per_step / dt,
                       ZERO_STAGE == 3 ? (long long)m->zero.peak_live : -1};
        if (say) print_step(&s, tc->steps, flops_per_step / dt * 1e-9);
        jsonl_train(&log, &s);

        int last = step + 1 == tc->steps;
        if (do_val && ((step + 1) % tc->val_every == 0 || last)) {
            float vl = gpt_validate(m, &val, tc->val_batches);
            if (say) printf("step %4d/%d | val loss %.6f\n", step + 1, tc->steps, vl);
            jsonl_val(&log, step + 1, vl);
        }
        if (have_tok && ((step + 1) % tc->sample_every == 0 || last)) gpt_sample(m, &tok, &sample_rng, tc->sample_len, say);
        int saved = tc->save_dir[0] && ((tc->save_every > 0 && (step + 1) % tc->save_every == 0) || last);
        if (saved) train_save(m, tc, &st, step + 1, train.pos, sample_rng.state, say);
        // SIGTERM / SIGINT / SIGUSR1 on any rank: every rank acts after this same step
        comm_phase("the per-step signal agreement", step + 1);
        int req = preempt_poll(comm);
        if (req && !last) {
            if (tc->save_dir[0] && !saved) train_save(m, tc, &st, step + 1, train.pos, sample_rng.state, say);
            if (req & PREEMPT_STOP) {
                if (comm->rank == 0)
                    diag("note", "stopped by %s after step %d of %d: %s%s; exit status %d", preempt_signal_name(), step + 1, tc->steps,
                         tc->save_dir[0] ? "checkpoint saved, continue with --resume " : "nothing saved (no --save)", tc->save_dir,
                         EXIT_PREEMPTED);
                status = EXIT_PREEMPTED;
                break;
            }
            if (!tc->save_dir[0] && comm->rank == 0) diag("warning", "SIGUSR1 asks for a checkpoint, but there is no --save directory");
        }
    }
    comm_watchdog_stop();
    if (tc->steps == st.step && tc->save_dir[0])   // --steps 0 --save DIR: write the initial weights
        train_save(m, tc, &st, st.step, train.pos, sample_rng.state, say);
    if (tc->steps > st.step) {
        memcpy(comm->bytes, comm_bytes, sizeof(comm_bytes));
        memcpy(comm->calls, comm_calls, sizeof(comm_calls));
        jsonl_record(&log, zero_comm_report(&m->zero, tc->accum, say != NULL));
    }
    if (say && ZERO_STAGE == 3)
        printf("stage 3: peak gathered parameters %zu elements (cap %zu, --max-live %lld)\n",
               m->zero.peak_live, m->zero.plan.live_cap, tc->max_live_elems);
    jsonl_close(&log);
    if (have_tok) tokenizer_free(&tok);
    dataloader_free(&train);
    if (do_val) dataloader_free(&val);
    return status;
}
