/*
test_gpt.c: the CPU trainer against the PyTorch reference, llm.c style.

    ./test_gpt_cpu --state DEBUG_STATE --init MODEL_FILE [trainer flags for the model]

The debug state (docs/model.md) holds one batch, the reference's logits, loss,
every parameter's gradient, and the losses of 10 AdamW steps on that batch;
beside it, DEBUG_STATE.params holds the parameters after those steps and
DEBUG_STATE.decay which tensors the reference decayed (nanoGPT's groups: every
tensor of 2 or more dimensions). We start from the same model file and compare
all of it, per tensor, reporting the max absolute and relative error: a tensor
decayed by mistake, or not, shows in its own final parameters long before the
loss moves. Exit 0 only if everything is within the fp32 tolerances below.
*/
#define TESTING
#include "train_gpt.c"

#include "tests/debug_state.h"

// The gradient norm's sum of squares (zero/host.h: blocks of interleaved lanes) against a
// plain sum, for every length up to three lanes and across a block boundary: a slice whose
// length is not a multiple of the lanes must count its tail. Returns the failed lengths.
static int check_sumsq(void) {
    size_t n_max = SUMSQ_BLOCK + 2 * SUMSQ_LANES + 3;
    float *g = (float *)xmalloc(sizeof(float) * n_max, "sumsq test");
    for (size_t i = 0; i < n_max; i++) g[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    ZeroBackend b = {0};
    int fails = 0;
    double worst = 0;
    for (size_t n = 1; n <= n_max; n = n < 3 * SUMSQ_LANES ? n + 1 : n == 3 * SUMSQ_LANES ? SUMSQ_BLOCK - 1 : n + 1) {
        double plain = 0;
        for (size_t i = 0; i < n; i++) plain += (double)g[i] * g[i];
        zb_sumsq_add(&b, g, n);
        double d = fabs(zb_sumsq_take(&b) - plain) / plain;
        if (d > worst) worst = d;
        fails += d > 1e-12;
    }
    printf("  gradient norm's sum of squares = a plain sum for lengths 1-%d and %d-%zu: worst rel error %.1e  %s\n",
           3 * SUMSQ_LANES, (int)SUMSQ_BLOCK - 1, n_max, worst, fails ? "FAIL" : "ok");
    free(g);
    return fails;
}

// After the steps: every tensor's parameters against the reference's, and its decay flag
// against the reference's group. Returns the failed checks.
static int compare_final(GPT *m, const char *state_path, double tol) {
    const ModelLayout *L = &m->layout;
    char path[1100], name[64];
    snprintf(path, sizeof(path), "%s.params", state_path);
    FILE *f = fopen_or_die(path, "rb");
    float *ref = (float *)xmalloc(4 * L->num_params, "final parameters");
    fread_or_die(ref, 4, L->num_params, f, path, "parameters");
    fclose(f);
    snprintf(path, sizeof(path), "%s.decay", state_path);
    f = fopen_or_die(path, "r");
    int fails = 0, n_decay = 0;
    double worst = 0;
    for (int ui = 0; ui < L->n_units; ui++) {
        const UnitSpec *u = &L->units[ui];
        const float *p = m->zero.params + m->zero.plan.u[ui].full_off;
        for (int k = 0; k < u->n_tensors; k++) {
            const TensorSpec *t = &u->t[k];
            char ref_name[64];
            int ref_decay;
            snprintf(name, sizeof(name), "%s.%s", u->name, t->name);
            if (fscanf(f, "%63s %d", ref_name, &ref_decay) != 2 || strcmp(ref_name, name) != 0)
                fatal("%s: expected the line of tensor %s", path, name);
            n_decay += ref_decay;
            if (t->decay != ref_decay) {
                printf("  decay %-16s zeroc %d, the reference's group %d  FAIL\n", name, t->decay, ref_decay);
                fails++;
            }
            Err e = compare(p + t->offset, ref + u->flat_offset + t->offset, t->numel, 0, 0, 0);
            int ok = e.rel <= tol;
            fails += !ok;
            if (e.rel > worst) worst = e.rel;
            printf("  final %-16s max abs %.3e  rel %.3e  %s\n", name, e.max_abs, e.rel, ok ? "ok" : "FAIL");
        }
    }
    fclose(f);
    free(ref);
    printf("  final parameters: worst rel error %.3e (tolerance %.0e); %d tensors decayed, as in the reference's groups%s\n",
           worst, tol, n_decay, fails ? " (see FAIL)" : "");
    return fails;
}

int main(int argc, char **argv) {
    const char *state_path = NULL;
    const char *tol_names[] = {"logits", "loss", "grad", "param"};
    double tols[] = {1e-5, 1e-5, 1e-5, 1e-5};   // fp32 against fp32: float rounding
    int nrest;
    char **rest = test_split_args(argc, argv, &state_path, tol_names, tols, 4, &nrest);
    double tol_logits = tols[0], tol_loss = tols[1], tol_grad = tols[2], tol_param = tols[3];
    if (!state_path) fatal("usage: test_gpt_cpu --state FILE --init MODEL [model flags]");
    Comm comm;
    comm_init(&comm, &argc, &argv);
    TrainConfig tc;
    parse_args(&tc, nrest, rest, 1);
    if (!tc.init_path[0]) fatal("test_gpt_cpu needs --init MODEL (the model file the reference started from)");

    DebugState ds;
    debug_state_read(&ds, state_path);
    debug_state_apply(&ds, &tc);
    omp_set_num_threads(tc.threads > 0 ? tc.threads : omp_get_num_procs());
    openblas_set_num_threads(tc.threads > 0 ? tc.threads : omp_get_num_procs());
    GPT m;
    gpt_build(&m, &tc, &comm);
    const ModelLayout *L = &m.layout;
    debug_state_check(&ds, state_path, L->num_params, m.cfg.padded_vocab);
    int B = ds.B, T = ds.T, Vp = ds.Vp, n_steps = ds.n_steps, N = B * T, V = m.cfg.vocab_size;
    size_t np = ds.num_params;
    const int *inputs = ds.inputs, *targets = ds.targets;
    const float *ref_logits = ds.logits, ref_loss = ds.loss, *ref_grads = ds.grads, *ref_losses = ds.losses;

    float *flat = (float *)xmalloc(4 * np, "params");
    char err[1200];
    if (!model_file_read(tc.init_path, L, flat, err, sizeof(err))) fatal("%s", err);
    ParamSource from_flat = params_from_flat(L, flat);
    zero_load_params(&m.zero, &from_flat);
    memcpy(m.inputs, inputs, 4 * N);

    int fails = 0;
    printf("test_gpt_cpu: %s, B=%d T=%d, %zu parameters, against %s\n", arch_name(m.cfg.arch), B, T, np, state_path);
    // one batch: logits (an evaluation forward keeps them), loss, gradients
    gpt_forward(&m, targets, 0);
    Err el = compare(m.a.logits, ref_logits, 0, N, V, Vp);
    zero_step_begin(&m.zero);
    gpt_forward(&m, targets, 1);
    float loss = gpt_step_loss(&m);
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
    zero_load_params(&m.zero, &from_flat);
    memset(m.zero.opt_m, 0, 4 * m.zero.plan.shard_elems);
    memset(m.zero.opt_v, 0, 4 * m.zero.plan.shard_elems);
    double worst_step = 0;
    for (int s = 0; s < n_steps; s++) {
        zero_step_begin(&m.zero);
        gpt_forward(&m, targets, 1);
        float l = gpt_step_loss(&m);
        gpt_backward(&m, targets, 1.0f);
        ZeroOptim o = {tc.lr, tc.beta1, tc.beta2, tc.eps, tc.weight_decay, s + 1};
        zero_step_reduce(&m.zero);   // the step as train/loop.h makes it, without the guard
        float norm = zero_global_norm(&m.zero), coef = zero_clip_coef(tc.grad_clip, norm);
        zero_step_update(&m.zero, &o, coef);
        double d = fabs(l - ref_losses[s]) / fabs(ref_losses[s]);
        if (d > worst_step) worst_step = d;
        ok = d <= tol_loss; fails += !ok;
        printf("  step %2d loss %.7f vs %.7f  rel %.3e  norm %.4f%s  %s\n", s + 1, l, ref_losses[s], d, norm,
               coef < 1 ? " clipped" : "", ok ? "ok" : "FAIL");
    }
    fails += compare_final(&m, state_path, tol_param);
    fails += check_sumsq();
    printf("%s: %d check%s failed (worst step-loss rel error %.3e)\n", fails ? "FAIL" : "PASS", fails, fails == 1 ? "" : "s", worst_step);
    gpt_free(&m);
    comm_finalize(&comm);
    return fails ? 1 : 0;
}
