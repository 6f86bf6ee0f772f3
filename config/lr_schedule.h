// config/lr_schedule.h: the learning rate of every optimizer step: zeroc's cosine
// and constant schedules and DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR.
#pragma once
#include "config/train_config.h"

// DeepSpeed's warm-up fraction at scheduler iteration t < W, as lr_schedules.py's _get_gamma
// evaluates it: log(t + 1) * (1 / log W) for "log", t / W for "linear".
static double ds_warmup_gamma(const TrainConfig *c, long long t, int W) {
    if (c->warmup_log) return (1.0 / log((double)W)) * log((double)t + 1);
    return (double)t / (double)W;
}

// The learning rate of optimizer step `it` of a schedule planned for `total` steps
// (lr_total_steps). `it` is 0-based and counts the optimizer steps applied before this one.
//   cosine:   zeroc's, as nanoGPT and llm.c: linear warmup lr*(it+1)/W, then cosine from
//             lr down to lr*min_lr_frac at the last step
//   constant: lr
//   WarmupLR, WarmupDecayLR, WarmupCosineLR: DeepSpeed's (deepspeed/runtime/lr_schedules.py),
//             computed in double as its Python does. DeepSpeed builds the scheduler with
//             last_batch_iteration = -1, which sets the optimizer's lr, and calls
//             scheduler.step() after every applied optimizer step (engine._take_model_step),
//             never after a step skipped for an fp16 overflow. So step `it` runs at
//             scheduler iteration t = it - 1. With W = max(2, warmup_num_steps),
//             T = total_num_steps or else `total`, and g(t) = ds_warmup_gamma:
//     WarmupLR:       t = -1: warmup_min_lr; t < W: min + (max - min) * g(t); then max
//     WarmupDecayLR:  the same warm-up; then min + (max - min) * max(0, (T - t) / max(1, T - W)):
//                     down to warmup_min_lr at T
//     WarmupCosineLR: t = -1: 0; t < W: lr * (warmup_min_ratio + g(t) * (1 - warmup_min_ratio));
//                     then lr * max(0, cos_min_ratio + (1 - cos_min_ratio) * (1 + cos(pi * (t - W + 1) / (T - W))) / 2)
//             Here max = lr, which is scheduler.params.warmup_max_lr or else the optimizer's lr,
//             and min = warmup_min_lr.
static float lr_at(const TrainConfig *c, int it, int total) {
    double lr = c->lr;
    if (c->sched == SCHED_CONSTANT) return (float)lr;
    if (c->sched == SCHED_COSINE) {
        double W = c->warmup;
        if (it < c->warmup) return (float)(lr * (it + 1) / W);
        double min_lr = lr * c->min_lr_frac;
        if (total <= c->warmup + 1) return (float)lr;
        double ratio = (double)(it - c->warmup) / (double)(total - 1 - c->warmup);
        if (ratio > 1) ratio = 1;
        return (float)(min_lr + 0.5 * (1.0 + cos(M_PI * ratio)) * (lr - min_lr));
    }
    int W = c->warmup > 2 ? c->warmup : 2;
    int T = c->sched_total > 0 ? c->sched_total : total;
    long long t = (long long)it - 1;
    if (c->sched == SCHED_WARMUP_COSINE_LR) {
        if (t < 0) return 0.0f;
        double ratio;
        if (t < W) {
            ratio = c->warmup_min_ratio + ds_warmup_gamma(c, t, W) * (1.0 - (double)c->warmup_min_ratio);
        } else {
            double cmr = c->cos_min_ratio;
            ratio = (1 + cos(M_PI * (double)(t - W + 1) / (double)(T - W))) / 2;
            ratio = cmr + (1.0 - cmr) * ratio;
            if (ratio < 0) ratio = 0;
        }
        return (float)(lr * ratio);
    }
    double min_lr = c->warmup_min_lr, delta = lr - min_lr;
    if (t < 0) return (float)min_lr;
    double gamma = 1.0;
    if (t < W) gamma = ds_warmup_gamma(c, t, W);
    else if (c->sched == SCHED_WARMUP_DECAY_LR) {
        double span = (double)(T - W) > 1.0 ? (double)(T - W) : 1.0;
        gamma = (double)(T - t) / span;
        if (gamma < 0) gamma = 0;
    }
    return (float)(min_lr + delta * gamma);
}
