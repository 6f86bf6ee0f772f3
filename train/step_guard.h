// train/step_guard.h: what stands between a step's gradients and its update, for
// both trainers. It does fp16 loss scaling as DeepSpeed does (train/loss_scaler.h),
// skips a step whose loss or gradients are not finite, stops after --max-skips, and
// never saves a non-finite model. train/loop.h's train_step calls, in order:
//
//   step_guard_dloss    the backward's dloss: 1/accum, times the loss scale S with fp16.
//                       DeepSpeed scales the loss before the backward, so every gradient
//                       comes out multiplied by S and small ones survive fp16's range.
//   zero_step_reduce    the gradients reduced to their owners (zero.h)
//   step_guard_inject   tests only (--inject-nonfinite): Inf or NaN into this rank's
//                       reduced gradient at the chosen steps
//   zero_global_norm    the norm of the scaled gradients. One Inf or NaN in any rank's
//                       partition makes it non-finite, so the norm the step computes
//                       anyway is the overflow test.
//   step_guard_check    an overflow is a loss or norm that is not finite on any rank;
//                       the ranks agree on it with comm_agree. With fp16 the scaler moves
//                       as DeepSpeed's DynamicLossScaler.update_scale does. The verdict:
//                       apply the step, skip it, or stop the run.
//   zero_step_update    only when applied, with grad_scale = clip coefficient / S. The clip
//                       coefficient comes from the unscaled norm (norm / S), so unscaling
//                       and clipping share the one multiply AdamW does anyway.
//
// A skipped step changes nothing: the parameters, the fp32 master, m and v, Adam's
// step count and the learning-rate schedule stay as they were. DeepSpeed steps
// neither its optimizer nor its scheduler after an overflow either, and skips a bf16
// step with Inf or NaN gradients too. The next step starts from zeroed gradients
// (zero_step_begin). So step k runs at lr_at(applied steps before it) with Adam's
// t = applied steps + 1, and the checkpoint records `skipped`.
//
// After --max-skips N consecutive counted skips (default 5; 0: never) the run stops,
// on every rank at the same step: every rank reaches the same verdict, so none is
// left waiting in a collective. Without fp16 every skip counts. With fp16 a
// non-finite loss counts, and so does an overflow under a static scale. An overflow
// with a finite loss under dynamic scaling is routine (the scaler lowers the scale,
// and DeepSpeed skips many steps in a row at the start), so it does not count;
// DeepSpeed's own rule stops such a run: an overflow while the scale is already
// min_loss_scale. An applied step resets the count.
//
// The gradients are unscaled by the scale their backward used. DeepSpeed's ZeRO step
// updates the scaler first and unscales by the updated scale, so on a step where the
// scale doubles and clipping does not bind it divides by twice the backward's scale
// (deepspeedai/DeepSpeed#8588).
#pragma once
#include "zero.h"
#include "zero/load.h"
#include "train/loss_scaler.h"
#include <cjson/cJSON.h>

#define STEP_GUARD_MAX_INJECT 32

typedef struct {
    int fp16;                 // loss scaling on
    LossScaler scaler;        // fp16: DeepSpeed's scaler; its scale multiplies dloss
    long long skipped;        // steps skipped so far, every cause
    int consecutive;          // consecutive counted skips (--max-skips)
    int max_skips;            // 0: no limit
    int n_inject;             // --inject-nonfinite (tests): at these steps, on this rank
    struct { int step; float value; } inject[STEP_GUARD_MAX_INJECT];
} StepGuard;

// --inject-nonfinite STEP:RANK[:inf|nan][,...]: keeps the entries for `rank`
static void step_guard_parse_inject(StepGuard *g, const char *spec, int rank, int world) {
    const char *p = spec;
    while (*p) {
        char *end;
        long step = strtol(p, &end, 10), r = -1;
        int ok = end != p && *end == ':' && step >= 1 && step < (1L << 30);
        if (ok) { p = end + 1; r = strtol(p, &end, 10); ok = end != p && r >= 0 && r < world; }
        float value = INFINITY;
        if (ok && *end == ':') {
            p = end + 1;
            if (!strncmp(p, "inf", 3)) { value = INFINITY; end = (char *)p + 3; }
            else if (!strncmp(p, "nan", 3)) { value = NAN; end = (char *)p + 3; }
            else ok = 0;
        }
        ok = ok && (*end == ',' || *end == 0);
        if (!ok) fatal("--inject-nonfinite: expected STEP:RANK[:inf|nan][,...] with STEP >= 1 and RANK in [0, %d), got '%s'",
                       world, spec);
        if (r == rank) {
            if (g->n_inject == STEP_GUARD_MAX_INJECT) fatal("--inject-nonfinite: at most %d steps per rank", STEP_GUARD_MAX_INJECT);
            g->inject[g->n_inject].step = (int)step;
            g->inject[g->n_inject++].value = value;
        }
        p = *end ? end + 1 : end;
    }
}

static StepGuard step_guard_init(const TrainConfig *tc, const Comm *comm) {
    StepGuard g;
    memset(&g, 0, sizeof(g));
    g.fp16 = tc->fp16;
    loss_scaler_init(&g.scaler, tc->loss_scale, tc->initial_scale_power, tc->loss_scale_window, tc->hysteresis,
                     tc->consecutive_hysteresis, tc->min_loss_scale);
    g.max_skips = tc->max_skips;
    step_guard_parse_inject(&g, tc->inject_nonfinite, comm->rank, comm->world);
    return g;
}

// d(step loss)/d(micro-batch mean loss) for the backward: 1/accum, times the loss scale with fp16
static float step_guard_dloss(const StepGuard *g, int accum) {
    return (g->fp16 ? (float)g->scaler.scale : 1.0f) / accum;
}

// --inject-nonfinite: Inf or NaN into the first element of this rank's reduced
// gradient partition. It comes after the reduction so that only this rank sees it:
// the other ranks must learn of the overflow through step_guard_check's agreement.
static void step_guard_inject(const StepGuard *g, Zero *z, int step) {
    for (int i = 0; i < g->n_inject; i++) {
        if (g->inject[i].step != step) continue;
        const ZeroPlan *p = &z->plan;
        if (p->n_seg == 0) fatal("--inject-nonfinite: rank %d holds no gradient elements", p->rank);
        zgrad_t *at = zero_grad_slice(z, p->seg[0].unit) + zero_seg_in_slice(p, &p->seg[0]);
        float v = g->inject[i].value;
        if (sizeof(zgrad_t) == sizeof(float)) zb_upload(&z->be, at, &v, sizeof(float));
        else zb_upload_floatX(&z->be, (floatX *)at, &v, 1);
    }
}

typedef struct {
    int apply;            // run AdamW (zero_step_update)
    float grad_scale;     // what AdamW multiplies the gradients by: clip coefficient / loss scale
    float norm;           // the global norm of the unscaled gradients
    double scale;         // the loss scale this step's backward used (1 without fp16)
    const char *skipped;  // why the step was skipped: "overflow", "non-finite loss", "non-finite gradients"; NULL: applied
    int counted;          // a skip --max-skips counts (not an fp16 overflow the dynamic scaler handles)
    char stop[512];       // non-empty: the run must stop (after logging the step) with this message
} StepVerdict;

// The verdict on optimizer step `step` (1-based) from its loss (already averaged
// over the ranks) and this rank's global norm of the scaled gradients. Collective.
static StepVerdict step_guard_check(StepGuard *g, Comm *comm, int step, float loss, float scaled_norm, float grad_clip) {
    StepVerdict v;
    memset(&v, 0, sizeof(v));
    v.scale = g->fp16 ? g->scaler.scale : 1.0;
    v.norm = scaled_norm / (float)v.scale;
    char why[256];
    snprintf(why, sizeof(why), "rank %d: loss %g, gradient norm %g", comm->rank, loss, scaled_norm);
    int overflow = !comm_agree(comm, isfinite(loss) && isfinite(scaled_norm), why, sizeof(why));
    int loss_bad = !isfinite(loss);   // the same on every rank: the loss is all-reduced
    if (g->fp16 && loss_scaler_update(&g->scaler, overflow) == LOSS_SCALER_AT_MIN) {
        // DeepSpeed's DynamicLossScaler raises here (raise_error_at_min_scale)
        snprintf(v.stop, sizeof(v.stop), "step %d: Current loss scale already at minimum - cannot decrease scale anymore. "
                 "Exiting run. (fp16: scale %g = min_loss_scale, gradients still overflow; %s)", step, v.scale, why);
    }
    if (!overflow) {
        g->consecutive = 0;
        v.apply = 1;
        v.grad_scale = zero_clip_coef(grad_clip, v.norm) / (float)v.scale;
        return v;
    }
    g->skipped++;
    v.skipped = loss_bad ? "non-finite loss" : g->fp16 ? "overflow" : "non-finite gradients";
    int counted = v.counted = !g->fp16 || loss_bad || !g->scaler.dynamic;
    if (counted) g->consecutive++;
    if (counted && g->max_skips > 0 && g->consecutive >= g->max_skips && !v.stop[0])
        snprintf(v.stop, sizeof(v.stop), "step %d: %d consecutive steps skipped (%s; %s): stopping (--max-skips %d). "
                 "Parameters and optimizer state are those of the last applied step; lower the learning rate or "
                 "resume from the last checkpoint", step, g->consecutive, v.skipped, why, g->max_skips);
    return v;
}

// Whether every element of the fp32 master weights is finite. Collective: each
// rank checks its own partition. On failure every rank gets the first failing
// rank's one-line `where`.
static int step_guard_master_finite(Zero *z, char *where, size_t n) {
    const ZeroPlan *p = &z->plan;
    float *buf = (float *)xmalloc(p->max_shard * sizeof(float), "finiteness check");
    int ok = 1;
    for (int u = 0; u < p->n_units && ok; u++) {
        const ZeroUnit *U = &p->u[u];
        size_t lo = (size_t)p->part * U->shard, len = lo >= U->numel ? 0 : U->numel - lo < U->shard ? U->numel - lo : U->shard;
        zero_master_read(z, u, lo, U->shard, buf);
        size_t i = first_nonfinite(buf, len);
        if (i < len) {
            ok = 0;
            snprintf(where, n, "the fp32 master weights hold %g (unit %s, element %zu)", buf[i], z->layout->units[u].name, lo + i);
        }
    }
    free(buf);
    return comm_agree(z->comm, ok, where, n);
}

// ----------------------------------------------------------------------------
// In the checkpoint manifest: the skip counts and the loss scaler's state.
// DeepSpeed saves its loss scaler with the optimizer. Here the scaler's settings
// come from the resumed run's flags and config, its state from the checkpoint.

static void step_guard_to_json(const StepGuard *g, cJSON *m) {
    cJSON_AddNumberToObject(m, "skipped_steps", (double)g->skipped);
    cJSON_AddNumberToObject(m, "consecutive_skips", g->consecutive);
    if (!g->fp16) return;
    const LossScaler *s = &g->scaler;
    cJSON *ls = cJSON_AddObjectToObject(m, "loss_scaler");
    cJSON_AddNumberToObject(ls, "scale", s->scale);
    cJSON_AddNumberToObject(ls, "cur_hysteresis", s->cur_hysteresis);
    cJSON_AddNumberToObject(ls, "iter", (double)s->iter);
    cJSON_AddNumberToObject(ls, "last_overflow_iter", (double)s->last_overflow_iter);
    cJSON_AddNumberToObject(ls, "skipped", (double)s->skipped);
}

// Restores what step_guard_to_json wrote. Checkpoints of older runs lack it: then
// the counts are zero and the scaler fresh. Returns 0 with a one-line err on a
// malformed entry.
static int step_guard_from_json(StepGuard *g, const cJSON *m, const char *path, char *err, size_t errn) {
    const cJSON *sk = cJSON_GetObjectItem(m, "skipped_steps"), *cs = cJSON_GetObjectItem(m, "consecutive_skips");
    const cJSON *ls = cJSON_GetObjectItem(m, "loss_scaler");
    if ((sk && !cJSON_IsNumber(sk)) || (cs && !cJSON_IsNumber(cs)) || (ls && !cJSON_IsObject(ls))) {
        snprintf(err, errn, "%s: malformed skipped_steps, consecutive_skips or loss_scaler", path);
        return 0;
    }
    g->skipped = sk ? (long long)sk->valuedouble : 0;
    g->consecutive = cs ? cs->valueint : 0;
    if (!g->fp16 || !ls) return 1;
    const char *keys[] = {"scale", "cur_hysteresis", "iter", "last_overflow_iter", "skipped"};
    double val[5];
    for (int i = 0; i < 5; i++) {
        const cJSON *x = cJSON_GetObjectItem(ls, keys[i]);
        if (!cJSON_IsNumber(x)) { snprintf(err, errn, "%s: loss_scaler.%s missing or not a number", path, keys[i]); return 0; }
        val[i] = x->valuedouble;
    }
    if (!(val[0] > 0) || !isfinite(val[0])) { snprintf(err, errn, "%s: loss_scaler.scale %g is not a positive number", path, val[0]); return 0; }
    if (g->scaler.dynamic) g->scaler.scale = val[0];   // a static scale is the run's setting
    g->scaler.cur_hysteresis = (int)val[1];
    g->scaler.iter = (long long)val[2];
    g->scaler.last_overflow_iter = (long long)val[3];
    g->scaler.skipped = (long long)val[4];
    return 1;
}
