/*
test_gpt.c: the CPU trainer against the PyTorch reference, llm.c style.

    ./test_gpt_cpu --state DEBUG_STATE --init MODEL_FILE [trainer flags for the model]

The debug state (docs/model.md) holds one batch, the reference's logits, loss,
every parameter's gradient, and the losses of 10 AdamW steps on that batch.
We start from the same model file and compare all of it, per tensor, reporting
the max absolute and relative error. Exit 0 only if everything is within the
fp32 tolerances below.
*/
#define TESTING
#include "train_gpt.c"

// relative error of a tensor: max |a - b| / max |b| (elementwise relative error
// is meaningless for values near zero; this is scale-aware per tensor)
typedef struct { double max_abs, max_ref, rel; } Err;

static Err compare(const float *a, const float *b, size_t n, size_t stride_rows, size_t row_len, size_t row_stride) {
    Err e = {0, 0, 0};
    if (stride_rows == 0) { stride_rows = 1; row_len = n; row_stride = n; }
    for (size_t r = 0; r < stride_rows; r++)
        for (size_t i = 0; i < row_len; i++) {
            double x = a[r * row_stride + i], y = b[r * row_stride + i];
            double d = fabs(x - y);
            if (!(d <= e.max_abs)) e.max_abs = d;   // NaN propagates as a failure
            if (fabs(y) > e.max_ref) e.max_ref = fabs(y);
        }
    e.rel = e.max_abs / (e.max_ref > 0 ? e.max_ref : 1);
    return e;
}

int main(int argc, char **argv) {
    const char *state_path = NULL;
    double tol_logits = 1e-5, tol_grad = 1e-5, tol_loss = 1e-5;
    // our flags out, the rest to the trainer's parser
    char **rest = (char **)xmalloc(sizeof(char *) * (argc + 1), "argv");
    int nrest = 0;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--state") && i + 1 < argc) state_path = argv[++i];
        else if (!strcmp(argv[i], "--tol-grad") && i + 1 < argc) tol_grad = atof(argv[++i]);
        else rest[nrest++] = argv[i];
    }
    if (!state_path) fatal("usage: test_gpt_cpu --state FILE --init MODEL [model flags]");
    Comm comm;
    comm_init(&comm, &argc, &argv);
    TrainConfig tc;
    parse_args(&tc, nrest, rest, 1);
    if (!tc.init_path[0]) fatal("test_gpt_cpu needs --init MODEL (the model file the reference started from)");

    // the debug state
    FILE *f = fopen_or_die(state_path, "rb");
    int32_t h[256];
    fread_or_die(h, 4, 256, f, state_path, "header");
    if (h[0] != 20251122 || h[1] != 1) fatal("%s: not a debug state (magic %d, version %d)", state_path, h[0], h[1]);
    int B = h[2], T = h[3], Vp = h[4], n_steps = h[5];
    size_t np = (size_t)(uint32_t)h[6] | ((size_t)(uint32_t)h[7] << 32);
    float hp[6];
    memcpy(hp, &h[8], sizeof(hp));
    tc.B = B; tc.T = T; tc.accum = 1;
    tc.lr = hp[0]; tc.beta1 = hp[1]; tc.beta2 = hp[2]; tc.eps = hp[3]; tc.weight_decay = hp[4]; tc.grad_clip = hp[5];
    config_resolve_batch(&tc, 1);
    omp_set_num_threads(tc.threads > 0 ? tc.threads : omp_get_num_procs());
    openblas_set_num_threads(tc.threads > 0 ? tc.threads : omp_get_num_procs());
    GPT m;
    gpt_build(&m, &tc, &comm);
    const ModelLayout *L = &m.layout;
    if (np != L->num_params) fatal("%s: %zu parameters, the model has %zu", state_path, np, L->num_params);
    if (Vp != m.cfg.padded_vocab) fatal("%s: padded vocab %d, the model has %d", state_path, Vp, m.cfg.padded_vocab);
    int N = B * T, V = m.cfg.vocab_size;
    int *inputs = (int *)xmalloc(4 * N, "inputs"), *targets = (int *)xmalloc(4 * N, "targets");
    float *ref_logits = (float *)xmalloc(4 * (size_t)N * Vp, "logits"), ref_loss;
    float *ref_grads = (float *)xmalloc(4 * np, "grads"), *ref_losses = (float *)xmalloc(4 * (n_steps + 1), "losses");
    fread_or_die(inputs, 4, N, f, state_path, "inputs");
    fread_or_die(targets, 4, N, f, state_path, "targets");
    fread_or_die(ref_logits, 4, (size_t)N * Vp, f, state_path, "logits");
    fread_or_die(&ref_loss, 4, 1, f, state_path, "loss");
    fread_or_die(ref_grads, 4, np, f, state_path, "grads");
    fread_or_die(ref_losses, 4, n_steps, f, state_path, "losses");
    fclose(f);

    float *flat = (float *)xmalloc(4 * np, "params");
    char err[1200];
    if (!model_file_read(tc.init_path, &m.cfg, np, flat, err, sizeof(err))) fatal("%s", err);
    zero_load_params(&m.zero, flat);
    memcpy(m.inputs, inputs, 4 * N);

    int fails = 0;
    printf("test_gpt_cpu: %s, B=%d T=%d, %zu parameters, against %s\n", arch_name(m.cfg.arch), B, T, np, state_path);
    // one batch: logits (an evaluation forward keeps them), loss, gradients
    gpt_forward(&m, targets, 0);
    Err el = compare(m.a.logits, ref_logits, 0, N, V, Vp);
    zero_step_begin(&m.zero);
    float loss = gpt_forward(&m, targets, 1);
    int ok = el.rel <= tol_logits;
    fails += !ok;
    printf("  %-22s max abs %.3e  rel %.3e  %s\n", "logits", el.max_abs, el.rel, ok ? "ok" : "FAIL");
    double dl = fabs(loss - ref_loss) / fabs(ref_loss);
    ok = dl <= tol_loss; fails += !ok;
    printf("  %-22s %.7f vs %.7f  rel %.3e  %s\n", "loss", loss, ref_loss, dl, ok ? "ok" : "FAIL");
    gpt_backward(&m, targets, 1.0f);
    double worst = 0;
    for (int ui = 0; ui < L->n_units; ui++) {
        const UnitSpec *u = &L->units[ui];
        const float *g = m.zero.grads + m.zero.plan.u[ui].full_off;
        for (int k = 0; k < u->n_tensors; k++) {
            const TensorSpec *t = &u->t[k];
            Err e = compare(g + t->offset, ref_grads + u->flat_offset + t->offset, t->numel, 0, 0, 0);
            ok = e.rel <= tol_grad;
            fails += !ok;
            if (e.rel > worst) worst = e.rel;
            char name[64];
            snprintf(name, sizeof(name), "grad %s.%s", u->name, t->name);
            printf("  %-22s max abs %.3e  rel %.3e  %s\n", name, e.max_abs, e.rel, ok ? "ok" : "FAIL");
        }
    }
    printf("  worst gradient rel error %.3e (tolerance %.0e)\n", worst, tol_grad);

    // n_steps AdamW steps on the same batch, from the same start
    zero_load_params(&m.zero, flat);
    memset(m.zero.opt_m, 0, 4 * m.zero.plan.shard_elems);
    memset(m.zero.opt_v, 0, 4 * m.zero.plan.shard_elems);
    double worst_step = 0;
    for (int s = 0; s < n_steps; s++) {
        zero_step_begin(&m.zero);
        float l = gpt_forward(&m, targets, 1);
        gpt_backward(&m, targets, 1.0f);
        ZeroOptim o = {tc.lr, tc.beta1, tc.beta2, tc.eps, tc.weight_decay, tc.grad_clip, s + 1};
        zero_step_end(&m.zero, &o);
        double d = fabs(l - ref_losses[s]) / fabs(ref_losses[s]);
        if (d > worst_step) worst_step = d;
        ok = d <= tol_loss; fails += !ok;
        printf("  step %2d loss %.7f vs %.7f  rel %.3e  %s\n", s + 1, l, ref_losses[s], d, ok ? "ok" : "FAIL");
    }
    printf("%s: %d check%s failed (worst step-loss rel error %.3e)\n", fails ? "FAIL" : "PASS", fails, fails == 1 ? "" : "s", worst_step);
    gpt_free(&m);
    comm_finalize(&comm);
    return fails ? 1 : 0;
}
