// train/loss_scaler.h: fp16 loss scaling exactly as DeepSpeed does it: one small
// struct and one update per optimizer step. It follows DeepSpeed's
// deepspeed/runtime/fp16/loss_scaler.py, whose LossScaler (static) and
// DynamicLossScaler.update_scale its ZeRO optimizers create with CreateLossScaler.
//
// The settings are DeepSpeed's "fp16" block: loss_scale (0: dynamic, > 0: a static
// scale), initial_scale_power (the dynamic scale starts at 2^p), loss_scale_window,
// hysteresis (DeepSpeed's delayed_shift), consecutive_hysteresis, min_loss_scale.
//
// Once per optimizer step the caller passes `overflow`: whether any rank's
// gradients hold an Inf or NaN, agreed by every rank. loss_scaler_update then does:
//   static:  the scale never changes. An overflowing step is still skipped, since
//            DeepSpeed's ZeRO optimizers check for overflow themselves.
//   dynamic, overflow:
//            if hysteresis == 1 or the current hysteresis == 1:
//                scale = max(scale / 2, min_loss_scale)
//                If the scale already equals min_loss_scale, DeepSpeed stops the
//                run instead: LOSS_SCALER_AT_MIN, and nothing changes.
//            else: current hysteresis -= 1
//            last_overflow_iter = iter
//   dynamic, no overflow:
//            if consecutive_hysteresis: current hysteresis = hysteresis
//            if (iter - last_overflow_iter) % loss_scale_window == 0:
//                if not consecutive_hysteresis: current hysteresis = hysteresis
//                scale *= 2
//   then iter += 1, on every step, skipped or not.
// So the scale doubles after every loss_scale_window overflow-free steps, and an
// overflow halves it only once `hysteresis` overflows have used up the current
// hysteresis. The hysteresis is refilled when the scale doubles; with
// consecutive_hysteresis it is refilled after any clean step, so it counts
// consecutive overflows. A skipped step also skips the learning-rate schedule, as
// DeepSpeed steps its scheduler only after an applied step, and zeroes the
// gradients. Gradients are divided by the scale before clipping.
#pragma once
#include <math.h>

enum { LOSS_SCALER_STEP = 0, LOSS_SCALER_SKIP = 1, LOSS_SCALER_AT_MIN = 2 };

typedef struct {
    double scale;                 // the current loss scale (DeepSpeed: cur_scale)
    int dynamic;                  // 0: static scale
    double min_scale;             // min_loss_scale
    int window;                   // loss_scale_window
    int hysteresis;               // the configured hysteresis (DeepSpeed: delayed_shift)
    int cur_hysteresis;           // overflows still tolerated before the scale halves
    int consecutive_hysteresis;
    int raise_at_min;             // DeepSpeed's raise_error_at_min_scale (its default: on)
    long long iter;               // updates so far (DeepSpeed: cur_iter)
    long long last_overflow_iter; // -1 before the first overflow
    long long skipped;            // steps skipped so far (for the step line and the log)
} LossScaler;

// static_scale > 0: a static scale (fp16.loss_scale); 0: dynamic, starting at 2^initial_scale_power
static void loss_scaler_init(LossScaler *s, double static_scale, int initial_scale_power, int window,
                             int hysteresis, int consecutive_hysteresis, double min_scale) {
    s->dynamic = static_scale == 0;
    s->scale = s->dynamic ? ldexp(1.0, initial_scale_power) : static_scale;
    s->min_scale = min_scale;
    s->window = window;
    s->hysteresis = hysteresis;
    s->cur_hysteresis = hysteresis;
    s->consecutive_hysteresis = consecutive_hysteresis;
    s->raise_at_min = 1;
    s->iter = 0;
    s->last_overflow_iter = -1;
    s->skipped = 0;
}

// One optimizer step's verdict. LOSS_SCALER_STEP: apply the step. LOSS_SCALER_SKIP:
// an overflow, so skip it and zero the gradients. LOSS_SCALER_AT_MIN: an overflow
// with the scale already at its minimum; the state is left unchanged and DeepSpeed
// ends the run with "Current loss scale already at minimum - cannot decrease scale
// anymore. Exiting run." Nonzero means: do not apply this step.
static int loss_scaler_update(LossScaler *s, int overflow) {
    if (!s->dynamic) {
        s->iter++;
        if (overflow) s->skipped++;
        return overflow ? LOSS_SCALER_SKIP : LOSS_SCALER_STEP;
    }
    if (overflow) {
        if (s->hysteresis == 1 || s->cur_hysteresis == 1) {
            if (s->scale == s->min_scale && s->raise_at_min) return LOSS_SCALER_AT_MIN;
            double next = s->scale / 2;
            s->scale = next > s->min_scale ? next : s->min_scale;
        } else {
            s->cur_hysteresis--;
        }
        s->last_overflow_iter = s->iter;
    } else {
        if (s->consecutive_hysteresis) s->cur_hysteresis = s->hysteresis;
        if ((s->iter - s->last_overflow_iter) % s->window == 0) {
            if (!s->consecutive_hysteresis) s->cur_hysteresis = s->hysteresis;
            s->scale *= 2;
        }
    }
    s->iter++;
    if (overflow) s->skipped++;
    return overflow ? LOSS_SCALER_SKIP : LOSS_SCALER_STEP;
}
