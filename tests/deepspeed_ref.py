"""DeepSpeed's config semantics as plain Python, the reference tests/test_config.sh
compares zeroc's C (config/lr_schedule.h lr_at, config/ds_config.h config_resolve_batch, train/loss_scaler.h)
against. Written from DeepSpeed's documentation and the behaviour of its
deepspeed/runtime/lr_schedules.py (WarmupLR, WarmupDecayLR, WarmupCosineLR),
runtime/engine.py (when the scheduler steps), fp16/loss_scaler.py
(DynamicLossScaler.update_scale) and runtime/config.py (_set_batch_related_parameters,
_batch_assertion); no DeepSpeed code is copied or imported.

The schedulers are modelled as DeepSpeed runs them, not as zeroc computes them:
an object whose constructor sets the optimizer's lr (at iteration -1) and whose
step() is called by the engine after every applied optimizer step.
"""
import math


# ----------------------------------------------------------------------------
# learning-rate schedules

class _Warmup:
    """The warm-up shared by the three schedules: W = max(2, warmup_num_steps);
    at iteration t < W, 'log': log(t + 1) * (1 / log W), 'linear': t / W."""

    def __init__(self, warmup_num_steps, warmup_type):
        self.W = max(2, warmup_num_steps)
        self.log = warmup_type == "log"
        self.inv_log_W = 1.0 / math.log(self.W)
        self.t = -1   # last_batch_iteration: the constructor runs at -1

    def frac(self):
        return self.inv_log_W * math.log(self.t + 1) if self.log else self.t / self.W

    def step(self):
        self.t += 1


class WarmupLR(_Warmup):
    """lr = min + (max - min) * gamma; gamma = warm-up fraction while t < W, then 1.
    At t = -1 (before the first step() call) the lr is min."""

    def __init__(self, warmup_min_lr=0.0, warmup_max_lr=0.001, warmup_num_steps=1000, warmup_type="log"):
        super().__init__(warmup_num_steps, warmup_type)
        self.min_lr, self.delta = warmup_min_lr, warmup_max_lr - warmup_min_lr

    def gamma(self):
        return self.frac() if self.t < self.W else 1.0

    def lr(self):
        if self.t < 0:
            return self.min_lr
        return self.min_lr + self.delta * self.gamma()


class WarmupDecayLR(WarmupLR):
    """WarmupLR, then gamma = max(0, (T - t) / max(1, T - W)): linear decay to warmup_min_lr at T."""

    def __init__(self, total_num_steps, warmup_min_lr=0.0, warmup_max_lr=0.001, warmup_num_steps=1000, warmup_type="log"):
        super().__init__(warmup_min_lr, warmup_max_lr, warmup_num_steps, warmup_type)
        self.T = total_num_steps

    def gamma(self):
        if self.t < self.W:
            return self.frac()
        return max(0.0, float(self.T - self.t) / float(max(1.0, self.T - self.W)))


class WarmupCosineLR(_Warmup):
    """lr = optimizer lr * ratio. Warm-up: ratio = warmup_min_ratio + frac * (1 - warmup_min_ratio);
    then ratio = max(0, cos_min_ratio + (1 - cos_min_ratio) * (1 + cos(pi * (t - W + 1) / (T - W))) / 2).
    At t = -1 the lr is 0."""

    def __init__(self, lr, total_num_steps, warmup_min_ratio=0.0, warmup_num_steps=1000, cos_min_ratio=0.0001, warmup_type="log"):
        super().__init__(warmup_num_steps, warmup_type)
        self.org_lr, self.T = lr, total_num_steps
        self.wmr, self.cmr = warmup_min_ratio, cos_min_ratio

    def lr(self):
        if self.t < 0:
            return 0.0
        if self.t < self.W:
            return self.org_lr * (self.wmr + self.frac() * (1.0 - self.wmr))
        done, span = self.t - self.W + 1, self.T - self.W
        cosine = (1 + math.cos(math.pi * done / span)) / 2
        return self.org_lr * max(0.0, self.cmr + (1.0 - self.cmr) * cosine)


def engine_lrs(sched, steps):
    """The lr each of `steps` optimizer steps runs with: the engine builds the scheduler
    before training (which sets the lr) and calls scheduler.step() after every step."""
    out = []
    for _ in range(steps):
        out.append(sched.lr())
        sched.step()
    return out


# ----------------------------------------------------------------------------
# fp16 dynamic loss scaling

class LossScaleAtMinimum(Exception):
    pass


class DynamicLossScaler:
    """update_scale(overflow), as DeepSpeed's fp16 loss scaler does it:
    overflow: when hysteresis (delayed_shift) is 1 or the current hysteresis is 1, halve
    the scale (not below min_scale; already at min_scale: the run stops), else use up one
    unit of hysteresis; remember the iteration. No overflow: with consecutive_hysteresis
    refill the hysteresis; every scale_window iterations since the last overflow double
    the scale (refilling the hysteresis when not consecutive). The iteration counts every
    call."""

    def __init__(self, init_scale, scale_window, min_scale, delayed_shift, consecutive_hysteresis):
        self.scale = init_scale
        self.window, self.min_scale = scale_window, min_scale
        self.delayed_shift, self.hysteresis = delayed_shift, delayed_shift
        self.consecutive = consecutive_hysteresis
        self.iter, self.last_overflow = 0, -1

    def update_scale(self, overflow):
        if overflow:
            if self.delayed_shift == 1 or self.hysteresis == 1:
                if self.scale == self.min_scale:
                    raise LossScaleAtMinimum()
                self.scale = max(self.scale / 2, self.min_scale)
            else:
                self.hysteresis -= 1
            self.last_overflow = self.iter
        else:
            if self.consecutive:
                self.hysteresis = self.delayed_shift
            if (self.iter - self.last_overflow) % self.window == 0:
                if not self.consecutive:
                    self.hysteresis = self.delayed_shift
                self.scale *= 2
        self.iter += 1


class StaticLossScaler:
    """A static scale: never changes (an overflowing step is still skipped)."""

    def __init__(self, scale):
        self.scale, self.hysteresis = scale, 0

    def update_scale(self, overflow):
        pass


# ----------------------------------------------------------------------------
# batch sizes

def batch(train_batch_size, micro_batch, grad_acc, world):
    """Any two of the three derive the third by integer division; then all must be
    positive and train_batch_size == micro * accumulation * world. None: not given.
    Returns (micro, accumulation, train_batch_size) or raises AssertionError."""
    tb, mb, ga = train_batch_size, micro_batch, grad_acc
    if tb is not None and mb is not None and ga is not None:
        pass
    elif tb is not None and mb is not None:
        ga = tb // mb // world
    elif tb is not None and ga is not None:
        mb = tb // world // ga
    elif mb is not None and ga is not None:
        tb = mb * ga * world
    elif tb is not None:
        ga, mb = 1, tb // world
    elif mb is not None:
        tb, ga = mb * world, 1
    else:
        raise AssertionError("Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided")
    assert tb > 0, "Train batch size: %d has to be greater than 0" % tb
    assert mb > 0, "Micro batch size per gpu: %d has to be greater than 0" % mb
    assert ga > 0, "Gradient accumulation steps: %d has to be greater than 0" % ga
    assert tb == mb * ga * world, ("Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
                                   "gradient_acc_step * world_size %d != %d * %d * %d" % (tb, mb, ga, world))
    return mb, ga, tb
