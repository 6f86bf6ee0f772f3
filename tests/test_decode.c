/*
tests/test_decode.c: the KV-cache decode step against the full forward, and the sampler's
filters on a known distribution. One source for both trainers: built as C with
train_gpt.c (make test_decode_cpu, any ZERO=k) and as CUDA with train_gpt.cu
(nvcc -x cu: build/gpu_test/test_decode).

    [mpirun -np N] test_decode [model and weight flags] --batch B --seq T [--tol-logits X]

B sequences of T random tokens (from --seed): one forward without training over all of
them (gpt_forward, the training forward) gives the logits of every position; T decode
steps (gpt_decode: one position per step, keys and values from the KV cache) give them
again. Printed: the max absolute difference over the V real logits of every position
and sequence, the same relative to the largest |logit| of its position (the check), the
worst position, and how many positions are bitwise equal. Tolerance: 1e-5 (fp32, float
rounding), 2e-2 on the GPU (bf16: the two paths round in different places; a wrong
position or cache row is O(1)).
The sampler: on four tokens of known probabilities, the frequencies of 20000 draws with
temperature, top-k and top-p against the distribution each should leave (0.02 absolute:
six standard errors), and the greedy cases exactly.
Exit 0 if everything passes; the GPU build exits 77 ("SKIP: ...") without a GPU.
*/
#define TESTING
#ifdef __CUDACC__
#include "train_gpt.cu"
#else
#include "train_gpt.c"
#endif
#include "tests/debug_state.h"

static int g_fails = 0;

// Draws n tokens from logits[4] with the given filters and compares their frequencies with want[4].
static void check_draws(const char *name, const float *logits, float temperature, int top_k, float top_p, const double *want) {
    Sampler s;
    memset(&s, 0, sizeof(s));
    int order[4];
    double prob[4];
    s.order = order; s.prob = prob;
    s.temperature = temperature; s.top_k = top_k; s.top_p = top_p;
    Rng rng = {42};
    int n = 20000, count[4] = {0};
    for (int i = 0; i < n; i++) count[sample_pick(&s, logits, 4, &rng)]++;
    double worst = 0;
    for (int k = 0; k < 4; k++) {
        double d = fabs((double)count[k] / n - want[k]);
        if (d > worst || (want[k] == 0 && count[k])) worst = want[k] == 0 && count[k] ? 1 : d;
    }
    int ok = worst <= 0.02;
    g_fails += !ok;
    printf("  %-44s freq %.3f %.3f %.3f %.3f  want %.3f %.3f %.3f %.3f  max diff %.4f  %s\n", name, (double)count[0] / n,
           (double)count[1] / n, (double)count[2] / n, (double)count[3] / n, want[0], want[1], want[2], want[3], worst, ok ? "ok" : "FAIL");
}

static void sampler_checks(void) {
    printf("sampler on p = (0.15, 0.5, 0.05, 0.3): frequencies of 20000 draws\n");
    double p[4] = {0.15, 0.5, 0.05, 0.3};
    float logits[4];
    for (int k = 0; k < 4; k++) logits[k] = (float)log(p[k]) + 3.0f;   // any shift: the softmax removes it
    double argmax[4] = {0, 1, 0, 0};
    check_draws("temperature 1", logits, 1.0f, 0, 1.0f, p);
    double t05[4], z = 0;
    for (int k = 0; k < 4; k++) { t05[k] = p[k] * p[k]; z += t05[k]; }
    for (int k = 0; k < 4; k++) t05[k] /= z;
    check_draws("temperature 0.5 (p^2, renormalized)", logits, 0.5f, 0, 1.0f, t05);
    double k2[4] = {0, 0.5 / 0.8, 0, 0.3 / 0.8};
    check_draws("top-k 2", logits, 1.0f, 2, 1.0f, k2);
    check_draws("top-p 0.6 (0.5 < 0.6: the 0.3 token stays)", logits, 1.0f, 0, 0.6f, k2);
    double p3[4] = {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95};
    check_draws("top-p 0.9", logits, 1.0f, 0, 0.9f, p3);
    check_draws("top-k 3 then top-p 0.6", logits, 1.0f, 3, 0.6f, k2);
    check_draws("top-k 1 (greedy)", logits, 1.0f, 1, 1.0f, argmax);
    check_draws("top-p 1e-6 (greedy)", logits, 1.0f, 0, 1e-6f, argmax);
    check_draws("temperature 0 (greedy)", logits, 0.0f, 0, 1.0f, argmax);
    // top-k's heap selection against a full sort, on 1000 logits with many ties
    enum { NV = 1000 };
    static float many[NV];
    static int sorted[NV], picked[NV];
    Rng r = {3};
    for (int i = 0; i < NV; i++) { many[i] = (float)(rng_u64(&r) % 50) * 0.25f; sorted[i] = i; }
    qsort_r(sorted, NV, sizeof(int), sample_by_logit, many);
    int same = 1;
    for (int k = 1; k <= NV; k += 37) { top_k_ids(picked, k, many, NV); same &= !memcmp(picked, sorted, sizeof(int) * k); }
    g_fails += !same;
    printf("  %-44s %s\n", "top-k ids (heap) = the first k of a sort", same ? "ok" : "FAIL");
    float tie[4] = {1.0f, 2.0f, 0.5f, 2.0f};
    check_draws("temperature 0, tied logits: the lower id", tie, 0.0f, 0, 1.0f, argmax);
    check_draws("top-k 1, tied logits: the lower id", tie, 1.0f, 1, 1.0f, argmax);
}

int main(int argc, char **argv) {
#ifdef __CUDACC__
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device (%s)\n", ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices found");
        return 77;
    }
    double tol = 2e-2;
#else
    double tol = 1e-5;
#endif
    const char *unused = NULL, *tol_names[] = {"logits"};
    int nrest;
    char **rest = test_split_args(argc, argv, &unused, tol_names, &tol, 1, &nrest);
    Comm comm;
    TrainConfig tc;
    if (!train_startup(&comm, &tc, &nrest, &rest)) return 0;
    int root = comm.rank == 0;
    char workers[384];
#ifdef __CUDACC__
    gpu_setup(&tc, &comm, workers, sizeof(workers));
#else
    cpu_threads_setup(&tc, &comm, workers, sizeof(workers));
#endif
    GPT m;
    gpt_build(&m, &tc, &comm);
    load_start(&m, &tc, NULL, NULL);
    int B = m.B, T = m.T, V = m.cfg.vocab_size, Vp = m.cfg.padded_vocab;
    if (root) printf("test_decode: %s, %d layers, C=%d, %d heads (%d kv), ZeRO stage %d on %d rank%s (%s): %d sequences x %d positions\n",
                     arch_name(m.cfg.arch), m.cfg.n_layer, m.cfg.d_model, m.cfg.n_head, m.cfg.n_kv_head, ZERO_STAGE, comm.world,
                     comm.world > 1 ? "s" : "", workers, B, T);

    // the same random tokens on every rank
    Rng rng = {tc.seed};
    for (int i = 0; i < B * T; i++) m.inputs[i] = (int)(rng_u64(&rng) % (uint64_t)V);
    int *tokens = (int *)xmalloc(sizeof(int) * B * T, "tokens"), *step = (int *)xmalloc(sizeof(int) * B, "tokens");
    memcpy(tokens, m.inputs, sizeof(int) * B * T);
    float *full = (float *)xmalloc(sizeof(float) * B * T * Vp, "logits"), *dec = (float *)xmalloc(sizeof(float) * B * T * Vp, "logits");
    gpt_forward(&m, NULL, 0);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) memcpy(full + ((size_t)b * T + t) * Vp, gpt_logits_host(&m, b, t), sizeof(float) * Vp);
    gpt_decode_alloc(&m, B, T);
    for (int pos = 0; pos < T; pos++) {
        for (int b = 0; b < B; b++) step[b] = tokens[b * T + pos];
        gpt_decode(&m, step, pos);
        const float *l = gpt_decode_logits_host(&m);
        for (int b = 0; b < B; b++) memcpy(dec + ((size_t)b * T + pos) * Vp, l + (size_t)b * Vp, sizeof(float) * Vp);
    }
    // per position: max |decode - full| over the B sequences' V logits, relative to the largest |full logit|
    double max_abs = 0, worst_rel = 0;
    int worst_t = 0, bitwise = 0;
    for (int t = 0; t < T; t++) {
        Err e = compare(dec + (size_t)t * Vp, full + (size_t)t * Vp, 0, B, V, (size_t)T * Vp);
        if (!(e.rel <= worst_rel)) { worst_rel = e.rel; worst_t = t; }
        if (!(e.max_abs <= max_abs)) max_abs = e.max_abs;
        bitwise += e.max_abs == 0;
    }
    int ok = worst_rel <= tol;
    g_fails += !ok;
    if (root) {
        printf("KV-cache decode vs full forward, logits of every position: max abs diff %.3e, max rel diff %.3e (position %d; "
               "tolerance %.0e); %d of %d positions bitwise equal  %s\n", max_abs, worst_rel, worst_t, tol, bitwise, T, ok ? "ok" : "FAIL");
        sampler_checks();
        printf("%s\n", g_fails ? "FAIL" : "PASS");
    }
    comm_broadcast_host(&comm, &g_fails, sizeof(g_fails), 0);
    free(tokens); free(step); free(full); free(dec);
    gpt_decode_free(&m);
    gpt_free(&m);
    comm_finalize(&comm);
    return g_fails ? 1 : 0;
}
