/*
test_gpt.cu: the GPU trainer (bf16) against the PyTorch reference (fp32), llm.c
style (its test_gpt2.cu).

    ./test_gpt --state DEBUG_STATE --init MODEL_FILE [trainer flags for the model]
               [--tol-logits X --tol-loss X --tol-grad X --tol-step X]

The debug state (docs/model.md) holds one batch, the reference's logits, loss,
every parameter's gradient, and the losses of n AdamW steps on that batch. We
start from the same model file and compare all of it, per tensor, reporting
the max absolute error, the scale-aware relative error max|a - b| / max|b|
(the check) and the normwise relative error ||a - b|| / ||b|| (information).
Then the n steps run a second time from the same start: their losses must be
bitwise identical (every kernel is deterministic; resume relies on it).

Tolerances (bf16 storage has an 8-bit mantissa: one rounding is 2^-9 = 2e-3
relative, and activations pass through a few dozen roundings):
  logits   2e-2   scale-aware, over the V real columns
  loss     1e-2   relative (the loss is an fp32 mean of fp32 per-position losses)
  grads    5e-2   scale-aware per tensor: bf16 activations feed every weight
                  gradient, and small tensors (biases, norm weights) are sums of
                  many bf16 terms. A wrong index or a missing term gives O(1).
  steps    2e-2   relative loss of each of the n AdamW steps (the updates move
                  bf16 weights: the trajectories separate slowly)
Exit 0 if everything is within them, 1 if not, 77 (and "SKIP: ...") without a GPU.
*/
#define TESTING
#include "train_gpt.cu"

#include "tests/debug_state.h"

// the gradients of the last backward, per unit, as the trainer handed them to zero_grads_end
static float **g_unit_grads;
static int *g_hook_calls;
static uint16_t *g_hook_tmp;

static void grads_hook(void *ctx, int u, const floatX *g) {
    GPT *m = (GPT *)ctx;
    size_t n = m->layout.units[u].numel;
    cudaCheck(cudaMemcpyAsync(g_hook_tmp, g, n * sizeof(uint16_t), cudaMemcpyDeviceToHost, m->stream));
    cudaCheck(cudaStreamSynchronize(m->stream));
    for (size_t i = 0; i < n; i++) g_unit_grads[u][i] = floatX_bits_to_float(g_hook_tmp[i]);
    g_hook_calls[u]++;
}

// n_steps AdamW steps on one batch from the flat parameters, on a freshly built model
static void run_steps(GPT *m, const TrainConfig *tc, Comm *comm, const float *flat, const int *inputs,
                      const int *targets, int n_steps, float *losses) {
    gpt_build(m, tc, comm);
    ParamSource from_flat = params_from_flat(&m->layout, flat);
    zero_load_params(&m->zero, &from_flat);
    int N = tc->B * tc->T;
    for (int s = 0; s < n_steps; s++) {
        memcpy(m->inputs, inputs, sizeof(int) * N);
        zero_step_begin(&m->zero);
        gpt_forward(m, targets, 1);
        losses[s] = gpt_step_loss(m);
        gpt_backward(m, targets, 1.0f);
        zero_micro_step_end(&m->zero);
        ZeroOptim o = {tc->lr, tc->beta1, tc->beta2, tc->eps, tc->weight_decay, tc->grad_clip, s + 1};
        zero_step_end(&m->zero, &o);
    }
    cudaCheck(cudaDeviceSynchronize());
    gpt_free(m);
}

int main(int argc, char **argv) {
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device (%s)\n", ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices found");
        return 77;
    }
    const char *state_path = NULL;
    const char *tol_names[] = {"logits", "loss", "grad", "step"};
    // bf16 against fp32, a small factor above what an H100 measured (bench/gpu_check_20261122-170326_*,
    // docs/gpu.md): logits rel 5.2e-3, loss 2.2e-5, worst gradient 1.16e-2, worst step loss 3.3e-4
    double tols[] = {1.5e-2, 1e-4, 3e-2, 1e-3};
    int nrest;
    char **rest = test_split_args(argc, argv, &state_path, tol_names, tols, 4, &nrest);
    double tol_logits = tols[0], tol_loss = tols[1], tol_grad = tols[2], tol_step = tols[3];
    if (!state_path) fatal("usage: test_gpt --state FILE --init MODEL [model flags]");
    Comm comm;
    comm_init(&comm, &argc, &argv);
    TrainConfig tc;
    parse_args(&tc, nrest, rest, 1);
    comm_attach_device(&comm);
    comm_setup_backend(&comm, tc.comm);
    if (!tc.init_path[0]) fatal("test_gpt needs --init MODEL (the model file the reference started from)");

    DebugState ds;
    debug_state_read(&ds, state_path);
    debug_state_apply(&ds, &tc);
    char dev_desc[384];
    gpu_setup(&tc, &comm, dev_desc, sizeof(dev_desc));
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

    int fails = 0, ok;
    printf("test_gpt: %s, B=%d T=%d, %zu parameters, ZeRO stage %d, on %s, against %s\n", arch_name(m.cfg.arch), B, T, np,
           ZERO_STAGE, dev_desc, state_path);
    printf("  tolerances: logits %.0e, loss %.0e, gradients %.0e (scale-aware: max|a-b| / max|b|), step losses %.0e\n",
           tol_logits, tol_loss, tol_grad, tol_step);

    // logits and loss from a forward without training (the training forward turns logits into dlogits)
    float loss_eval = gpt_forward(&m, targets, 0);
    {
        size_t nl = (size_t)N * Vp;
        uint16_t *lb = (uint16_t *)xmalloc(2 * nl, "logits bf16");
        float *lg = (float *)xmalloc(4 * nl, "logits");
        cudaCheck(cudaMemcpy(lb, m.a.logits, 2 * nl, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < nl; i++) lg[i] = floatX_bits_to_float(lb[i]);
        Err el = compare(lg, ref_logits, 0, N, V, Vp);
        ok = el.rel <= tol_logits; fails += !ok;
        printf("  %-24s max abs %.3e  rel %.3e  normwise %.3e  %s\n", "logits", el.max_abs, el.rel, el.norm_rel, ok ? "ok" : "FAIL");
        free(lb); free(lg);
    }
    double dl = fabs(loss_eval - ref_loss) / fabs(ref_loss);
    ok = dl <= tol_loss; fails += !ok;
    printf("  %-24s %.7f vs %.7f  rel %.3e  %s\n", "loss", loss_eval, ref_loss, dl, ok ? "ok" : "FAIL");

    // one training forward and backward: every gradient
    g_unit_grads = (float **)xcalloc(sizeof(float *) * L->n_units, "grads");
    g_hook_calls = (int *)xcalloc(sizeof(int) * L->n_units, "hook calls");
    size_t max_unit = 0;
    for (int ui = 0; ui < L->n_units; ui++) {
        g_unit_grads[ui] = (float *)xcalloc(4 * L->units[ui].numel, "unit grads");
        if (L->units[ui].numel > max_unit) max_unit = L->units[ui].numel;
    }
    g_hook_tmp = (uint16_t *)xmalloc(2 * max_unit, "hook buffer");
    m.zero.grads_observer = grads_hook;
    m.zero.observer_ctx = &m;
    zero_step_begin(&m.zero);
    gpt_forward(&m, targets, 1);
    float loss_train = gpt_step_loss(&m);   // (read on the device with --device-loss 1)
    ok = loss_train == loss_eval; fails += !ok;
    printf("  %-24s %.7f  %s\n", "loss of training forward", loss_train, ok ? "ok (bitwise the same)" : "FAIL (differs from the eval forward)");
    gpt_backward(&m, targets, 1.0f);
    zero_micro_step_end(&m.zero);
    cudaCheck(cudaDeviceSynchronize());
    m.zero.grads_observer = NULL;
    double worst = 0;
    for (int ui = 0; ui < L->n_units; ui++) {
        const UnitSpec *u = &L->units[ui];
        if (g_hook_calls[ui] != 1) {
            printf("  unit %s: gradient handed to zero_grads_end %d times (expected once)  FAIL\n", u->name, g_hook_calls[ui]);
            fails++;
            continue;
        }
        for (int k = 0; k < u->n_tensors; k++) {
            const TensorSpec *t = &u->t[k];
            Err e = compare(g_unit_grads[ui] + t->offset, ref_grads + u->flat_offset + t->offset, t->numel, 0, 0, 0);
            ok = e.rel <= tol_grad; fails += !ok;
            if (!(e.rel <= worst)) worst = e.rel;
            char name[64];
            snprintf(name, sizeof(name), "grad %s.%s", u->name, t->name);
            printf("  %-24s max abs %.3e  rel %.3e  normwise %.3e  %s\n", name, e.max_abs, e.rel, e.norm_rel, ok ? "ok" : "FAIL");
        }
    }
    printf("  worst gradient rel error %.3e (tolerance %.0e)\n", worst, tol_grad);
    gpt_free(&m);

    // n_steps AdamW steps on the same batch, from the same start, twice
    float *l1 = (float *)xmalloc(4 * (n_steps + 1), "losses"), *l2 = (float *)xmalloc(4 * (n_steps + 1), "losses");
    run_steps(&m, &tc, &comm, flat, inputs, targets, n_steps, l1);
    double worst_step = 0;
    for (int s = 0; s < n_steps; s++) {
        double d = fabs(l1[s] - ref_losses[s]) / fabs(ref_losses[s]);
        if (!(d <= worst_step)) worst_step = d;
        ok = d <= tol_step; fails += !ok;
        printf("  step %2d loss %.7f vs %.7f  rel %.3e  %s\n", s + 1, l1[s], ref_losses[s], d, ok ? "ok" : "FAIL");
    }
    if (n_steps > 1) {
        ok = l1[n_steps - 1] < l1[0]; fails += !ok;
        printf("  %-24s %.7f -> %.7f  %s\n", "the loss goes down", l1[0], l1[n_steps - 1], ok ? "ok" : "FAIL");
    }
    run_steps(&m, &tc, &comm, flat, inputs, targets, n_steps, l2);
    ok = memcmp(l1, l2, 4 * n_steps) == 0; fails += !ok;
    printf("  %-24s %s\n", "rerun of the steps", ok ? "ok (bitwise-identical losses)" : "FAIL (losses differ between two identical runs)");

    printf("%s: %d check%s failed (worst gradient rel error %.3e, worst step-loss rel error %.3e)\n", fails ? "FAIL" : "PASS",
           fails, fails == 1 ? "" : "s", worst, worst_step);
    comm_finalize(&comm);
    return fails ? 1 : 0;
}
