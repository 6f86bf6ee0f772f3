// train_loop.h: what both trainers share above the model: validation,
// sampling, the JSONL log and the training loop (main). A trainer defines,
// before including this file:
//   GPT (with cfg, layout, zero, comm, B, T, host int *inputs, *targets),
//   gpt_build, gpt_free, gpt_forward, gpt_backward, gpt_logits_host,
//   trainer_setup (threads or device), TRAINER_NAME, TRAINER_WIRE_BYTES,
//   TRAINER_BYTES_PER_PARAM.
// train_gpt.c (CPU, fp32) and train_gpt.cu (GPU, bf16) differ only in those.
#pragma once

// mean loss over the first val_batches micro-batches of the val shard, averaged over ranks
static float gpt_validate(GPT *m, DataLoader *val, int batches) {
    dataloader_reset(val);
    double s = 0;
    for (int i = 0; i < batches; i++) {
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

static void log_record(FILE *log, cJSON *rec) {
    if (log) {
        char *s = cJSON_PrintUnformatted(rec);
        fprintf(log, "%s\n", s);
        fflush(log);
        free(s);
    }
    cJSON_Delete(rec);
}

// A hash of everything the ranks must agree on: the model and the batch shape.
static long long config_hash(const TrainConfig *c) {
    const ModelConfig *m = &c->model;
    int v[] = {m->arch, m->n_layer, m->n_head, m->n_kv_head, m->d_model, m->d_ff, m->vocab_size, m->max_seq, c->B, c->T, c->accum, c->steps};
    return (long long)crc32_update(0, v, sizeof(v));
}

// ----------------------------------------------------------------------------
// training

#ifndef TESTING
int main(int argc, char **argv) {
    Comm comm;
    comm_init(&comm, &argc, &argv);
    TrainConfig tc;
    parse_args(&tc, argc, argv, comm.rank == 0);
    if (tc.estimate_world > 0) {   // the memory estimator: arithmetic only, nothing allocated
        ModelLayout L;
        model_layout_build(&L, &tc.model);
        if (comm.rank == 0) {
            FILE *log = tc.log_path[0] ? fopen_or_die(tc.log_path, "wb") : NULL;
            log_record(log, zero_estimate(&L, tc.estimate_world, 1));
            if (log) fclose(log);
        }
        model_layout_free(&L);
        comm_finalize(&comm);
        return 0;
    }
    config_resolve_batch(&tc, comm.world);
    comm_setup_backend(&comm, tc.comm);
    comm_check_same(&comm, config_hash(&tc), "the model and batch configuration (--arch/--preset/sizes/--batch/--seq/--accum/--steps)");
    char workers[384];
    trainer_setup(&tc, &comm, workers, sizeof(workers));
    char nodes[1024];
    launch_describe(&comm, nodes, sizeof(nodes));   // which ranks share a node (launch.h)
    int root = comm.rank == 0;
    FILE *say = root && !tc.quiet ? stdout : NULL;

    GPT m;
    gpt_build(&m, &tc, &comm);
    const ModelConfig *mc = &m.cfg;
    if (say) printf("zeroc " TRAINER_NAME " | %s %s: %d layers, %d heads (%d kv), C=%d, F=%d, V=%d, %zu parameters\n"
                    "       ZeRO stage %d | %d rank%s x %s | micro batch %d x %d tokens, accumulation %d, global batch %d sequences\n",
                    arch_name(mc->arch), tc.preset, mc->n_layer, mc->n_head, mc->n_kv_head, mc->d_model, mc->d_ff, mc->vocab_size,
                    m.layout.num_params, ZERO_STAGE, comm.world, comm.world > 1 ? "s" : "", workers,
                    tc.B, tc.T, tc.accum, tc.total_batch);
    if (say) printf("       %s\n", nodes);

    // data first: a bad file fails before anything expensive
    DataLoader train, val;
    dataloader_init(&train, tc.train_path, tc.B, tc.T, comm.rank, comm.world, mc->vocab_size, tc.shuffle, tc.seed);
    int do_val = tc.val_every > 0 && tc.val_batches > 0;
    if (do_val) dataloader_init(&val, tc.val_path, tc.B, tc.T, comm.rank, comm.world, mc->vocab_size, 0, 0);
    Tokenizer tok;
    int have_tok = 0;
    if (tc.sample_every > 0) { tokenizer_init(&tok, tc.tokenizer_path); have_tok = 1; }

    // parameters: resume, --init, or a seeded initialization
    TrainState st = {0, {0}, tc.seed ^ 0x5DEECE66DULL};
    float *flat = (float *)xmalloc(m.layout.num_params * sizeof(float), "parameters (load)");
    if (tc.resume_dir[0]) {
        checkpoint_load(&m.zero, tc.resume_dir, &st, flat);
        dataloader_seek(&train, &st.data, tc.resume_dir);
        if (say) printf("resumed from %s at step %d\n", tc.resume_dir, st.step);
    } else if (tc.init_path[0]) {
        char err[1200];
        int ok = model_file_read(tc.init_path, mc, m.layout.num_params, flat, err, sizeof(err));
        if (!ok) fatal("%s", err);
        zero_load_params(&m.zero, flat);
    } else {
        model_init_params(&m.layout, flat, tc.seed);
        zero_load_params(&m.zero, flat);
    }
    free(flat);

    ZeroBytesPerParam bpp = TRAINER_BYTES_PER_PARAM;
    FILE *log = NULL;
    if (root && tc.log_path[0]) log = fopen_or_die(tc.log_path, st.step > 0 ? "ab" : "wb");
    if (say) zero_plan_print(&m.zero);
    cJSON *memrec = zero_memory_report(&m.zero, bpp, say != NULL);
    cJSON_AddNumberToObject(memrec, "rank", comm.rank);
    log_record(log, memrec);

    Rng sample_rng = {st.rng};
    long long comm_bytes[N_COLL] = {0}, comm_calls[N_COLL] = {0};   // the last step's communication
    long long tokens_per_step = (long long)tc.total_batch * tc.T;
    double flops_per_step = model_flops_per_token(mc, tc.T) * tokens_per_step;
    for (int step = st.step; step < tc.steps; step++) {
        double t0 = wall_time();
        zero_step_begin(&m.zero);
        comm_reset_counters(&comm);
        double loss = 0;
        for (int k = 0; k < tc.accum; k++) {
            dataloader_next(&train, m.inputs, m.targets);
            loss += gpt_forward(&m, m.targets, 1);
            gpt_backward(&m, m.targets, 1.0f / tc.accum);
            zero_micro_step_end(&m.zero);
        }
        float step_loss = (float)(loss / tc.accum);
        comm_all_reduce_host(&comm, &step_loss, 1, DT_F32, OP_AVG);
        ZeroOptim opt = {lr_at(&tc, step, tc.steps), tc.beta1, tc.beta2, tc.eps, tc.weight_decay, tc.grad_clip, step + 1};
        float norm = zero_step_end(&m.zero, &opt);
        double dt = wall_time() - t0;
        memcpy(comm_bytes, comm.bytes, sizeof(comm_bytes));
        memcpy(comm_calls, comm.calls, sizeof(comm_calls));
        if (say) printf("step %4d/%d | loss %.6f | lr %.2e | norm %.4f | %.1f ms | %.0f tok/s | %.2f GFLOP/s\n",
                        step + 1, tc.steps, step_loss, opt.lr, norm, dt * 1e3, tokens_per_step / dt, flops_per_step / dt * 1e-9);
        cJSON *rec = cJSON_CreateObject();
        cJSON_AddStringToObject(rec, "type", "train");
        cJSON_AddNumberToObject(rec, "step", step + 1);
        cJSON_AddNumberToObject(rec, "loss", step_loss);
        cJSON_AddNumberToObject(rec, "lr", opt.lr);
        cJSON_AddNumberToObject(rec, "grad_norm", norm);
        cJSON_AddNumberToObject(rec, "tokens_per_sec", tokens_per_step / dt);
        cJSON_AddNumberToObject(rec, "ms", dt * 1e3);
#if ZERO_STAGE == 3
        cJSON_AddNumberToObject(rec, "peak_live_elems", (double)m.zero.peak_live);
#endif
        log_record(log, rec);

        int last = step + 1 == tc.steps;
        if (do_val && ((step + 1) % tc.val_every == 0 || last)) {
            float vl = gpt_validate(&m, &val, tc.val_batches);
            if (say) printf("step %4d/%d | val loss %.6f\n", step + 1, tc.steps, vl);
            cJSON *vr = cJSON_CreateObject();
            cJSON_AddStringToObject(vr, "type", "val");
            cJSON_AddNumberToObject(vr, "step", step + 1);
            cJSON_AddNumberToObject(vr, "val_loss", vl);
            log_record(log, vr);
        }
        if (have_tok && ((step + 1) % tc.sample_every == 0 || last)) gpt_sample(&m, &tok, &sample_rng, tc.sample_len, say);
        if (tc.save_dir[0] && ((tc.save_every > 0 && (step + 1) % tc.save_every == 0) || last)) {
            TrainState now = {step + 1, dataloader_tell(&train), sample_rng.state};
            checkpoint_save(&m.zero, tc.save_dir, &now, &tc);
            if (say) printf("saved %s/ckpt_%08d\n", tc.save_dir, step + 1);
        }
    }
    if (tc.steps == st.step && tc.save_dir[0]) {   // --steps 0 --save DIR: write the initial weights
        TrainState now = {st.step, dataloader_tell(&train), sample_rng.state};
        checkpoint_save(&m.zero, tc.save_dir, &now, &tc);
        if (say) printf("saved %s/ckpt_%08d\n", tc.save_dir, st.step);
    }
    if (tc.steps > st.step) {
        memcpy(comm.bytes, comm_bytes, sizeof(comm_bytes));
        memcpy(comm.calls, comm_calls, sizeof(comm_calls));
        log_record(log, zero_comm_report(&m.zero, tc.accum, TRAINER_WIRE_BYTES, say != NULL));
    }
#if ZERO_STAGE == 3
    if (say) printf("stage 3: peak gathered parameters %zu elements (cap %zu, --max-live %lld)\n",
                    m.zero.peak_live, m.zero.plan.live_cap, tc.max_live_elems);
#endif
    if (log) fclose(log);
    if (have_tok) tokenizer_free(&tok);
    dataloader_free(&train);
    if (do_val) dataloader_free(&val);
    gpt_free(&m);
    comm_finalize(&comm);
    return 0;
}
#endif
