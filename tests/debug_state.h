// tests/debug_state.h: the PyTorch reference's debug state (format in docs/model.md)
// and how the tests compare against it. Shared by test_gpt.c (CPU, fp32) and
// test_gpt.cu (GPU, bf16): they differ only in their tolerances.
#pragma once
#include "config/train_config.h"

#define DEBUG_STATE_MAGIC 20251122

typedef struct {
    int B, T, Vp, n_steps;
    size_t num_params;
    float lr, beta1, beta2, eps, weight_decay, grad_clip;   // of the n_steps AdamW steps
    int *inputs, *targets;      // [B*T]
    float *logits;              // [B*T*Vp]
    float loss;
    float *grads;               // [num_params], flat order
    float *losses;              // [n_steps]: the loss before each step
} DebugState;

static void debug_state_read(DebugState *d, const char *path) {
    FILE *f = fopen_or_die(path, "rb");
    int32_t h[256];
    fread_or_die(h, 4, 256, f, path, "header");
    if (h[0] != DEBUG_STATE_MAGIC || h[1] != 1) fatal("%s: not a debug state (magic %d, version %d)", path, h[0], h[1]);
    d->B = h[2]; d->T = h[3]; d->Vp = h[4]; d->n_steps = h[5];
    if (d->B < 1 || d->T < 1 || d->Vp < 1 || d->n_steps < 0) fatal("%s: bad header (B %d, T %d, Vp %d, steps %d)", path, d->B, d->T, d->Vp, d->n_steps);
    d->num_params = (size_t)(uint32_t)h[6] | ((size_t)(uint32_t)h[7] << 32);
    float hp[6];
    memcpy(hp, &h[8], sizeof(hp));
    d->lr = hp[0]; d->beta1 = hp[1]; d->beta2 = hp[2]; d->eps = hp[3]; d->weight_decay = hp[4]; d->grad_clip = hp[5];
    size_t N = (size_t)d->B * d->T;
    d->inputs = (int *)xmalloc(4 * N, "inputs");
    d->targets = (int *)xmalloc(4 * N, "targets");
    d->logits = (float *)xmalloc(4 * N * d->Vp, "logits");
    d->grads = (float *)xmalloc(4 * d->num_params, "grads");
    d->losses = (float *)xmalloc(4 * (d->n_steps + 1), "losses");
    fread_or_die(d->inputs, 4, N, f, path, "inputs");
    fread_or_die(d->targets, 4, N, f, path, "targets");
    fread_or_die(d->logits, 4, N * d->Vp, f, path, "logits");
    fread_or_die(&d->loss, 4, 1, f, path, "loss");
    fread_or_die(d->grads, 4, d->num_params, f, path, "grads");
    fread_or_die(d->losses, 4, d->n_steps, f, path, "losses");
    fclose(f);
}

// the state's batch shape and optimizer settings become the run's
static void debug_state_apply(const DebugState *d, TrainConfig *tc) {
    tc->B = d->B; tc->T = d->T; tc->accum = 1; tc->total_batch = 0;
    tc->lr = d->lr; tc->beta1 = d->beta1; tc->beta2 = d->beta2; tc->eps = d->eps;
    tc->weight_decay = d->weight_decay; tc->grad_clip = d->grad_clip;
    config_resolve_batch(tc, 1);
}

static void debug_state_check(const DebugState *d, const char *path, size_t num_params, int padded_vocab) {
    if (d->num_params != num_params) fatal("%s: %zu parameters, the model has %zu", path, d->num_params, num_params);
    if (d->Vp != padded_vocab) fatal("%s: padded vocab %d, the model has %d", path, d->Vp, padded_vocab);
}

// The test's own flags (--state FILE, --tol-NAME X for each name in tol_names)
// come out of argv; the rest goes to the trainer's parser.
static char **test_split_args(int argc, char **argv, const char **state_path, const char **tol_names, double *tols,
                              int n_tols, int *nrest) {
    char **rest = (char **)xmalloc(sizeof(char *) * (argc + 1), "argv");
    *nrest = 0;
    rest[(*nrest)++] = argv[0];
    for (int i = 1; i < argc; i++) {
        int taken = 0;
        if (!strcmp(argv[i], "--state") && i + 1 < argc) { *state_path = argv[++i]; taken = 1; }
        for (int k = 0; k < n_tols && !taken; k++) {
            char flag[64];
            snprintf(flag, sizeof(flag), "--tol-%s", tol_names[k]);
            if (!strcmp(argv[i], flag) && i + 1 < argc) { tols[k] = atof(argv[++i]); taken = 1; }
        }
        if (!taken) rest[(*nrest)++] = argv[i];
    }
    return rest;
}

// a: ours, b: the reference; rows of row_len elements every row_stride (rows == 0: one run of n).
// rel = max|a - b| / max|b|: scale-aware (an elementwise relative error is
// meaningless near zero); norm_rel = ||a - b|| / ||b|| for information.
typedef struct { double max_abs, max_ref, rel, norm_rel; } Err;

static Err compare(const float *a, const float *b, size_t n, size_t rows, size_t row_len, size_t row_stride) {
    Err e = {0, 0, 0, 0};
    if (rows == 0) { rows = 1; row_len = n; row_stride = n; }
    double d2 = 0, r2 = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < row_len; i++) {
            double x = a[r * row_stride + i], y = b[r * row_stride + i];
            double d = fabs(x - y);
            if (!(d <= e.max_abs)) e.max_abs = d;   // NaN propagates as a failure
            if (fabs(y) > e.max_ref) e.max_ref = fabs(y);
            d2 += d * d; r2 += y * y;
        }
    e.rel = e.max_abs / (e.max_ref > 0 ? e.max_ref : 1);
    e.norm_rel = sqrt(d2) / (r2 > 0 ? sqrt(r2) : 1);
    if (e.max_abs != e.max_abs) e.rel = e.norm_rel = NAN;
    return e;
}
