#!/usr/bin/env python3
"""scripts/train_gpt.py: the PyTorch reference trainer of zeroc.

Computes exactly what docs/model.md specifies (gpt2 and llama), with the
parameter layout of model/model.h, the data order of dataloader.h and the flags,
defaults and learning-rate schedules of config/ (model_config.h, train_config.h, lr_schedule.h, flags.h), so that its losses,
gradients and logits can be compared with train_gpt_cpu / train_gpt.

fp32 throughout (TF32 is disabled on CUDA). Runs on PyTorch 1.13 (CPU) and
PyTorch 2.x (CPU or CUDA): attention is written out.

Usage (same flags as the C trainer, plus --device, --world, --debug-state):
    /usr/bin/python3 scripts/train_gpt.py --arch llama --preset tiny --steps 50 --log out/torch.jsonl
    /usr/bin/python3 scripts/train_gpt.py --init model.bin --debug-state out/debug_state.bin

Every error is one line on stderr ("error: ...") and exit status 1.
"""
import bisect
import glob
import json
import math
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import need_modules  # noqa: E402

need_modules.require("numpy", "torch")
import numpy as np  # noqa: E402

torch = None  # imported lazily (after the flags and files are checked) by load_torch()
F = None


def tune_malloc():
    """glibc returns every large block (logits, activations) to the OS on free, so each training step
    page-faults its working set back in; on CPU that costs PyTorch up to half its speed. Keep freed
    memory instead (what jemalloc/tcmalloc setups achieve). ZEROC_MALLOC_TUNING=0 turns this off."""
    if os.environ.get("ZEROC_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
        libc.mallopt(M_MMAP_THRESHOLD, 1 << 30)
        libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)
        libc.mallopt(M_TOP_PAD, 1 << 28)
    except (OSError, AttributeError):
        pass


def load_torch():
    global torch, F
    if torch is None:
        tune_malloc()
        import torch as _torch
        import torch.nn.functional as _F
        torch, F = _torch, _F
        torch.set_default_dtype(torch.float32)
    return torch


# ----------------------------------------------------------------------------
# errors


class Fatal(Exception):
    pass


def fatal(msg):
    raise Fatal(msg)


def f32(x):
    """x rounded to float32, returned as a Python float (exactly representable)."""
    return float(np.float32(x))


# ----------------------------------------------------------------------------
# config/: presets, defaults, schedules, flags

ARCH_GPT2, ARCH_LLAMA = 0, 1
ARCH_NAMES = ["gpt2", "llama"]

# name, n_layer, n_head, n_kv_head (llama), d_model, max_seq, what
PRESETS = [
    ("tiny", 2, 4, 2, 64, 64, "2 layers, 4 heads, C=64: tests"),
    ("mini", 4, 4, 2, 64, 64, "4 layers, 4 heads, C=64: the CPU demo (llama)"),
    ("small", 4, 4, 2, 128, 128, "4 layers, 4 heads, C=128"),
    ("gpt2-124m", 12, 12, 4, 768, 1024, "GPT-2 small (124M with gpt2), the GPU demo"),
    ("gpt2-350m", 24, 16, 4, 1024, 1024, "GPT-2 medium"),
]

SCHED_COSINE, SCHED_CONSTANT, SCHED_WARMUP_LR, SCHED_WARMUP_DECAY_LR, SCHED_WARMUP_COSINE_LR = 0, 1, 2, 3, 4
SCHED_NAMES = ["cosine", "constant", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR"]
DS_SCHEDS = (SCHED_WARMUP_LR, SCHED_WARMUP_DECAY_LR, SCHED_WARMUP_COSINE_LR)


def round_up(x, m):
    return (x + m - 1) // m * m


def default_ffn(arch, C):
    # C integer division as in config/model_config.h: round_up(8 * C / 3, 64)
    return round_up(8 * C // 3, 64) if arch == ARCH_LLAMA else 4 * C


class ModelConfig:
    def __init__(self):
        self.arch = ARCH_GPT2
        self.n_layer = self.n_head = self.n_kv_head = self.d_model = self.d_ff = 0
        self.vocab_size = self.padded_vocab = self.max_seq = 0
        self.norm_eps = f32(1e-5)
        self.rope_theta = f32(10000.0)

    def describe(self):
        return ("%s: n_layer %d, n_head %d, n_kv_head %d, d_model %d, d_ff %d, vocab %d (padded %d), max_seq %d"
                % (ARCH_NAMES[self.arch], self.n_layer, self.n_head, self.n_kv_head, self.d_model, self.d_ff,
                   self.vocab_size, self.padded_vocab, self.max_seq))


def model_apply_preset(m, arch, name):
    for (pname, L, H, KVl, C, maxT, _) in PRESETS:
        if pname != name:
            continue
        m.arch = arch
        m.n_layer, m.n_head = L, H
        m.n_kv_head = KVl if arch == ARCH_LLAMA else H
        m.d_model = C
        m.d_ff = default_ffn(arch, C)
        m.vocab_size = 50257
        m.padded_vocab = round_up(m.vocab_size, 128)
        m.max_seq = maxT
        m.norm_eps = f32(1e-5)
        m.rope_theta = f32(10000.0)
        return True
    return False


class TrainConfig:
    """train_config_defaults() of config/train_config.h; float fields hold float32 values."""

    def __init__(self):
        self.model = ModelConfig()
        self.arch, self.preset = "gpt2", "tiny"
        self.train_path, self.val_path = "data/brown/train.bin", "data/brown/val.bin"
        self.shuffle = 0
        self.tokenizer_path = "data/gpt2_tokenizer.bin"
        # B, accum, total_batch: 0 until given; resolve_batch derives the rest as DeepSpeed does
        self.B, self.T, self.accum, self.total_batch, self.steps = 0, 64, 0, 0, 50
        self.lr, self.beta1, self.beta2 = f32(6e-4), f32(0.9), f32(0.95)
        self.eps, self.weight_decay, self.grad_clip = f32(1e-8), f32(0.1), f32(1.0)
        self.adam_w_mode = 1
        self.offload_dpu, self.dpu_warmup = 0, 40   # ZeRO-Offload's delayed parameter update (zero/dpu.h)
        self.skip_steps = set()   # steps whose update is skipped, as the C trainers' guard skips them
        self.sched, self.warmup, self.warmup_log, self.min_lr_frac = SCHED_COSINE, 0, 1, f32(0.1)
        self.warmup_min_lr, self.warmup_min_ratio, self.cos_min_ratio = f32(0.0), f32(0.0), f32(1e-4)
        self.sched_total = 0
        self.sched_from = {}   # schedule setting -> the flag or key that set it (the checks of config/flags.h)
        self.seed = 1337
        self.init_path = self.save_dir = self.resume_dir = self.log_path = self.config_path = ""
        self.save_every, self.threads = 0, 0
        self.keep_last, self.timeout = 0, 600.0
        self.val_every, self.val_batches, self.sample_every, self.sample_len = 0, 8, 0, 64
        self.sampling_flags = []   # --prompt, --temperature, ...: accepted, the reference does not sample
        self.monitor_flags = []    # --tensorboard, --csv-monitor, --job-name: accepted, the reference writes no monitor files
        self.quiet = 0
        self.zero_stage = -1
        self.persistence_threshold, self.max_live_elems = 100000, 1000000000
        self.prefetch, self.offload, self.offload_param, self.comm = 1, 0, 0, "nccl"
        # reference-only
        self.device = "cpu"
        self.world = 1
        self.debug_state = ""


def ds_warmup_gamma(c, t, W):
    """config/lr_schedule.h ds_warmup_gamma(): DeepSpeed's warm-up fraction at scheduler iteration t < W."""
    return (1.0 / math.log(W)) * math.log(t + 1.0) if c.warmup_log else t / W


def lr_total_steps(c):
    """config/train_config.h lr_total_steps(): the schedule's horizon, --lr-total-steps / total_num_steps, else --steps."""
    return c.sched_total if c.sched_total > 0 else c.steps


def lr_at(c, it, total):
    """config/lr_schedule.h lr_at(): learning rate of 0-based step `it` of `total`, computed in double, returned as float32.
    DeepSpeed's schedules run step `it` at scheduler iteration it - 1 (see config/lr_schedule.h)."""
    lr = float(c.lr)
    if c.sched == SCHED_CONSTANT:
        return f32(lr)
    if c.sched == SCHED_COSINE:
        W = float(c.warmup)
        if it < c.warmup:
            return f32(lr * (it + 1) / W)
        min_lr = lr * float(c.min_lr_frac)
        if total <= c.warmup + 1:
            return f32(lr)
        ratio = float(it - c.warmup) / float(total - 1 - c.warmup)
        if ratio > 1:
            ratio = 1.0
        return f32(min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr))
    W = max(2, c.warmup)
    T = c.sched_total if c.sched_total > 0 else total
    t = it - 1
    if c.sched == SCHED_WARMUP_COSINE_LR:
        if t < 0:
            return 0.0
        if t < W:
            ratio = float(c.warmup_min_ratio) + ds_warmup_gamma(c, t, W) * (1.0 - float(c.warmup_min_ratio))
        else:
            cmr = float(c.cos_min_ratio)
            ratio = (1 + math.cos(math.pi * float(t - W + 1) / float(T - W))) / 2
            ratio = max(0.0, cmr + (1.0 - cmr) * ratio)
        return f32(lr * ratio)
    min_lr = float(c.warmup_min_lr)
    if t < 0:
        return f32(min_lr)
    gamma = 1.0
    if t < W:
        gamma = ds_warmup_gamma(c, t, W)
    elif c.sched == SCHED_WARMUP_DECAY_LR:
        gamma = max(0.0, float(T - t) / max(1.0, float(T - W)))
    return f32(min_lr + (lr - min_lr) * gamma)


HELP = """usage: %s [flags]

PyTorch reference trainer (docs/model.md); flags as train_gpt_cpu.
model
  --arch gpt2|llama        architecture (default gpt2)
  --preset NAME            model size preset (default tiny):
%s
  --layers N --heads N --kv-heads N --dim N --ffn N --vocab N --max-seq N
                           override one size of the preset
data and batch (any two of --batch, --accum, --total-batch derive the third, as DeepSpeed does)
  --train PATH --val PATH  a token shard, a directory of shards or a glob (default data/brown/{train,val}.bin)
  --shuffle 0|1            shuffle shard order and sequences each epoch, seeded by --seed (default 0)
  --batch B                micro batch per rank (default 4)
  --seq T                  sequence length (default 64)
  --accum K                gradient accumulation steps (default 1)
  --total-batch N          global sequences per optimizer step (= batch x accum x world)
optimizer and schedule
  --steps N --lr X --beta1 X --beta2 X --eps X --weight-decay X --clip X (0: off)
  --adam-w-mode 0|1        1: AdamW (default); 0: Adam with L2 weight decay
  --lr-schedule cosine|constant|WarmupLR|WarmupDecayLR|WarmupCosineLR  --warmup N
  --min-lr-frac X          cosine: the floor as a fraction of --lr (default 0.1)
  --warmup-type log|linear DeepSpeed's schedules: the warm-up's shape (default log)
  --warmup-min-lr X        WarmupLR, WarmupDecayLR: warm-up start and decay end (default 0)
  --warmup-min-ratio X --cos-min-ratio X   WarmupCosineLR (defaults 0, 1e-4)
  --lr-total-steps N       the decay's horizon (DeepSpeed's total_num_steps; default --steps)
run
  --seed S --init FILE --save DIR (writes DIR/model.bin) --log FILE
                           --init FILE: the model is the file's (its header); --init X.safetensors: Hugging Face
                           weights (config.json beside X sets the model), computed on as transformers does
  --threads N --val-every N --val-batches N
  --sample-every N --sample-len N --prompt TEXT --num-samples N --temperature X --top-k N --top-p X
  --kv-cache 0|1 (accepted and range-checked; the reference does not sample: --sample 1 is the C trainers')
  --config FILE (DeepSpeed JSON: the keys train_gpt_cpu honours; it validates the whole file) --quiet 0|1
  accepted and ignored: --save-every --resume --keep-last --timeout --tokenizer --zero-stage
  --persistence-threshold --max-live --prefetch --offload --comm --offload-nvme --offload-param-nvme --nvme-tile
  --tensorboard --csv-monitor --job-name (the monitors: the C trainers write them)
reference only
  --device cpu|cuda        (default cpu; TF32 disabled)
  --world N                simulate N data-parallel ranks: micro batch N*B
  --debug-state FILE       one batch: logits, loss, grads and 10 AdamW losses; then exit
  --offload-dpu 0|1 --dpu-warmup N   the delayed parameter update (zero/dpu.h): after N updates, step t's
                           forward and backward read the parameters before update t-1, and the gradient is
                           applied to the parameters after it (the C trainers' semantics, written out here)
  --skip-steps S,S,...     no update at these steps (1-based), as the C trainers' step guard skips a non-finite
                           one (--inject-nonfinite): neither the lr schedule nor Adam's t advances
"""

_INT_CHARS = set("0123456789")

# config/train_config.h ranges: (lo, hi, lo_open, hi_open, integer); every flag and config value is checked against its own
FLT_BIG = 3.4e38
R_BATCH, R_ACCUM, R_TOTAL = (1, 1 << 20, 0, 0, 1), (1, 1 << 20, 0, 0, 1), (1, 1 << 30, 0, 0, 1)
R_STEPS, R_COUNT = (0, 1 << 30, 0, 0, 1), (0, 9e18, 0, 0, 1)
R_LR = R_NONNEG = R_WD = R_CLIP = (0, FLT_BIG, 0, 0, 0)
R_BETA, R_EPS, R_FRAC = (0, 1, 0, 1, 0), (0, FLT_BIG, 1, 0, 0), (0, 1, 0, 0, 0)
R_TOP_P = (0, 1, 1, 0, 0)
R_TIMEOUT = (0, 1e7, 0, 0, 0)


def range_ok(r, v):
    lo, hi, lo_open, hi_open, integer = r
    if not math.isfinite(v) or (integer and v != math.floor(v)):
        return False
    return not (v < lo or (lo_open and v == lo) or v > hi or (hi_open and v == hi))


def range_text(r):
    lo, hi, lo_open, hi_open, integer = r
    what = "an integer" if integer else "a number"
    if hi >= 9e18 or hi >= FLT_BIG:
        return "%s %s %g" % (what, ">" if lo_open else ">=", lo)
    return "%s in %s%.10g, %.10g%s" % (what, "(" if lo_open else "[", lo, hi, ")" if hi_open else "]")


def flag_number(flag, s, r):
    """config/flags.h flag_number(): integers below 2^31 as decimal integers, counts and numbers as floats."""
    v = None
    if r[4] and r[1] < 9e18:
        t = s.lstrip(" \t\n")
        body = t[1:] if t[:1] in "+-" else t
        if body and all(ch in _INT_CHARS for ch in body):
            v = float(int(t))
    else:
        try:
            v = float(s)
        except ValueError:
            v = None
    if v is None or not range_ok(r, v) or (not r[4] and not range_ok(r, float(np.float32(v)))):
        fatal("%s: expected %s, got '%s'" % (flag, range_text(r), s))
    return v


def parse_int_or_die(flag, s, lo, hi):
    return int(flag_number(flag, s, (lo, hi, 0, 0, 1)))


def sched_from_name(flag, s):
    if s in SCHED_NAMES:
        return SCHED_NAMES.index(s)
    fatal("%s: unknown schedule '%s' (cosine, constant, WarmupLR, WarmupDecayLR, WarmupCosineLR)" % (flag, s))


# which schedules use a schedule setting (config/flags.h sched_users)
SCHED_USERS = {
    "warmup": set(DS_SCHEDS) | {SCHED_COSINE}, "warmup_type": set(DS_SCHEDS), "min_lr_frac": {SCHED_COSINE},
    "warmup_min_lr": {SCHED_WARMUP_LR, SCHED_WARMUP_DECAY_LR}, "warmup_max_lr": {SCHED_WARMUP_LR, SCHED_WARMUP_DECAY_LR},
    "warmup_min_ratio": {SCHED_WARMUP_COSINE_LR}, "cos_min_ratio": {SCHED_WARMUP_COSINE_LR},
    "sched_total": {SCHED_COSINE, SCHED_WARMUP_DECAY_LR, SCHED_WARMUP_COSINE_LR},
}


def apply_json_config(c, path):
    """The keys of a DeepSpeed config that train_gpt_cpu honours (config/ds_config.h; "auto" and null: as absent).
    The reference does not validate the rest of the file: train_gpt_cpu does (--config-keys lists every key)."""
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as e:
        fatal("%s: cannot open (%s)" % (path, e.strerror))
    if len(text) > (1 << 24):
        fatal("%s: config file too large" % path)
    try:
        root = json.loads(text.decode("utf-8", "replace"))
    except ValueError:
        root = None
    if not isinstance(root, dict):
        fatal("%s: not a JSON object" % path)

    def get(obj, key, r=None):
        """the value of obj[key], None when absent, "auto" or null; numbers range-checked"""
        if not isinstance(obj, dict) or obj.get(key, "auto") in ("auto", None):
            return None
        v = obj[key]
        if r is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not range_ok(r, v)):
            fatal("%s: %s: expected %s, got %s" % (path, key, range_text(r), json.dumps(v)))
        return v

    if (v := get(root, "train_micro_batch_size_per_gpu", R_BATCH)) is not None: c.B = int(v)
    if (v := get(root, "gradient_accumulation_steps", R_ACCUM)) is not None: c.accum = int(v)
    if (v := get(root, "train_batch_size", R_TOTAL)) is not None: c.total_batch = int(v)
    if (v := get(root, "gradient_clipping", R_CLIP)) is not None: c.grad_clip = f32(v)
    zo = root.get("zero_optimization")
    if isinstance(zo, dict):
        if (v := get(zo, "stage", (0, 3, 0, 0, 1))) is not None: c.zero_stage = int(v)
        if (v := get(zo, "stage3_param_persistence_threshold", R_COUNT)) is not None: c.persistence_threshold = int(v)
        if (v := get(zo, "stage3_max_live_parameters", R_COUNT)) is not None: c.max_live_elems = int(v)
        if (v := get(zo, "overlap_comm")) is not None: c.prefetch = 1 if v is True else 0
        for key, attr in (("offload_optimizer", "offload"), ("offload_param", "offload_param")):
            dev = get(zo.get(key), "device")
            if isinstance(dev, str): setattr(c, attr, int(dev == "cpu"))
    opt = root.get("optimizer")
    op = opt.get("params") if isinstance(opt, dict) else None
    adamw_type = isinstance(opt, dict) and isinstance(opt.get("type"), str) and opt["type"].lower() == "adamw"
    if isinstance(op, dict):
        if (v := get(op, "lr", R_LR)) is not None: c.lr = f32(v)
        if (v := get(op, "eps", R_EPS)) is not None: c.eps = f32(v)
        if (v := get(op, "weight_decay", R_WD)) is not None: c.weight_decay = f32(v)
        if (b := get(op, "betas")) is not None:
            if not isinstance(b, list) or len(b) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and range_ok(R_BETA, x) for x in b):
                fatal("%s: betas: expected two numbers [a, b], each %s" % (path, range_text(R_BETA)))
            c.beta1, c.beta2 = f32(b[0]), f32(b[1])
        if (v := get(op, "adam_w_mode")) is not None: c.adam_w_mode = int(v is True or adamw_type)
    if get(root.get("fp16"), "enabled") is True:
        sys.stderr.write("note: %s: fp16.enabled: the PyTorch reference trains in fp32 (fp16 and its loss scaling "
                         "are the C trainers')\n" % path)
    sc = root.get("scheduler")
    if isinstance(sc, dict):
        if isinstance(get(sc, "type"), str):
            c.sched = sched_from_name(path, sc["type"])
            c.sched_from["sched"] = "scheduler.type"
        sp = sc.get("params")
        if isinstance(sp, dict):
            for key, attr, r in (("warmup_min_lr", "warmup_min_lr", R_NONNEG), ("warmup_min_ratio", "warmup_min_ratio", R_FRAC),
                                 ("cos_min_ratio", "cos_min_ratio", R_FRAC)):
                if (v := get(sp, key, r)) is not None:
                    setattr(c, attr, f32(v))
                    c.sched_from[attr] = "scheduler.params." + key
            if (v := get(sp, "warmup_max_lr", R_LR)) is not None:
                c.lr = f32(v)
                c.sched_from["warmup_max_lr"] = "scheduler.params.warmup_max_lr"
            if (v := get(sp, "warmup_num_steps", R_STEPS)) is not None:
                c.warmup = int(v)
                c.sched_from["warmup"] = "scheduler.params.warmup_num_steps"
            if (v := get(sp, "total_num_steps", R_STEPS)) is not None:
                c.sched_total = c.steps = int(v)
                c.sched_from["sched_total"] = "scheduler.params.total_num_steps"
            if isinstance(v := get(sp, "warmup_type"), str):
                c.warmup_log = int(v == "log")
                c.sched_from["warmup_type"] = "scheduler.params.warmup_type"


def resolve_batch(c):
    """config/ds_config.h config_resolve_batch(c, world): DeepSpeed's derivation of the missing batch setting."""
    tb, mb, ga, w = c.total_batch, c.B, c.accum, c.world
    if not tb and not mb:
        mb = 4
    if tb and mb and ga:
        pass
    elif tb and mb:
        ga = tb // mb // w
    elif tb and ga:
        mb = tb // w // ga
    elif mb and ga:
        tb = mb * ga * w
    elif tb:
        ga, mb = 1, tb // w
    else:
        tb, ga = mb * w, 1
    if mb <= 0: fatal("Micro batch size per gpu: %d has to be greater than 0 (world size %d)" % (mb, w))
    if ga <= 0: fatal("Gradient accumulation steps: %d has to be greater than 0 (world size %d)" % (ga, w))
    if tb != mb * ga * w:
        fatal("Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * "
              "world_size %d != %d * %d * %d" % (tb, mb, ga, w))
    c.total_batch, c.B, c.accum = tb, mb, ga


def parse_args(argv):
    """Mirror of config/flags.h parse_args() + config_resolve_batch(world)."""
    c = TrainConfig()
    prog = argv[0]
    for i in range(1, len(argv)):
        a = argv[i]
        if a in ("--help", "-h"):
            presets = "\n".join("                             %-10s %s" % (p[0], p[6]) for p in PRESETS)
            print(HELP % (prog, presets), end="")
            sys.exit(0)
        if i + 1 >= len(argv):
            continue
        if a == "--arch": c.arch = argv[i + 1]
        if a == "--preset": c.preset = argv[i + 1]
        if a == "--config": c.config_path = argv[i + 1]
    if c.arch == "gpt2": arch = ARCH_GPT2
    elif c.arch == "llama": arch = ARCH_LLAMA
    else: fatal("--arch: unknown architecture '%s' (gpt2, llama)" % c.arch)
    if not model_apply_preset(c.model, arch, c.preset):
        fatal("--preset: unknown preset '%s' (see --help)" % c.preset)
    if c.config_path:
        apply_json_config(c, c.config_path)
    m = c.model
    ffn_set = False
    i = 1
    n = len(argv)
    while i < n:
        a = argv[i]
        if not a.startswith("--"):
            fatal("unexpected argument '%s' (see --help)" % a)
        if i + 1 >= n:
            fatal("%s: missing value" % a)
        v = argv[i + 1]
        i += 2
        if a in ("--arch", "--preset", "--config"): continue
        elif a == "--layers": m.n_layer = parse_int_or_die(a, v, 1, 1024)
        elif a == "--heads": m.n_head = parse_int_or_die(a, v, 1, 1024)
        elif a == "--kv-heads": m.n_kv_head = parse_int_or_die(a, v, 1, 1024)
        elif a == "--dim": m.d_model = parse_int_or_die(a, v, 1, 65536)
        elif a == "--ffn": m.d_ff = parse_int_or_die(a, v, 1, 1 << 20); ffn_set = True
        elif a == "--vocab":
            m.vocab_size = parse_int_or_die(a, v, 2, 65536)
            m.padded_vocab = round_up(m.vocab_size, 128)
        elif a == "--max-seq": m.max_seq = parse_int_or_die(a, v, 1, 1 << 20)
        elif a == "--train": c.train_path = v
        elif a == "--val": c.val_path = v
        elif a == "--shuffle": c.shuffle = parse_int_or_die(a, v, 0, 1)
        elif a == "--batch": c.B = int(flag_number(a, v, R_BATCH))
        elif a == "--seq": c.T = parse_int_or_die(a, v, 1, 1 << 20)
        elif a == "--accum": c.accum = int(flag_number(a, v, R_ACCUM))
        elif a == "--total-batch": c.total_batch = int(flag_number(a, v, R_TOTAL))
        elif a == "--steps": c.steps = int(flag_number(a, v, R_STEPS))
        elif a == "--lr": c.lr = f32(flag_number(a, v, R_LR))
        elif a == "--beta1": c.beta1 = f32(flag_number(a, v, R_BETA))
        elif a == "--beta2": c.beta2 = f32(flag_number(a, v, R_BETA))
        elif a == "--eps": c.eps = f32(flag_number(a, v, R_EPS))
        elif a == "--weight-decay": c.weight_decay = f32(flag_number(a, v, R_WD))
        elif a == "--clip": c.grad_clip = f32(flag_number(a, v, R_CLIP))
        elif a == "--offload-dpu": c.offload_dpu = parse_int_or_die(a, v, 0, 1)
        elif a == "--dpu-warmup": c.dpu_warmup = int(flag_number(a, v, R_COUNT))
        elif a == "--skip-steps":
            try:
                c.skip_steps = {int(x) for x in v.split(",")}
            except ValueError:
                fatal("--skip-steps: expected step numbers separated by commas, got '%s'" % v)
        elif a == "--adam-w-mode": c.adam_w_mode = parse_int_or_die(a, v, 0, 1)
        elif a == "--lr-schedule":
            c.sched = sched_from_name(a, v)
            c.sched_from["sched"] = a
        elif a == "--warmup":
            c.warmup = int(flag_number(a, v, R_STEPS))
            c.sched_from["warmup"] = a
        elif a == "--warmup-type":
            if v not in ("log", "linear"):
                fatal("%s: expected log or linear, got '%s'" % (a, v))
            c.warmup_log = int(v == "log")
            c.sched_from["warmup_type"] = a
        elif a in ("--min-lr-frac", "--warmup-min-lr", "--warmup-min-ratio", "--cos-min-ratio"):
            attr = a[2:].replace("-", "_")
            setattr(c, attr, f32(flag_number(a, v, R_NONNEG if a == "--warmup-min-lr" else R_FRAC)))
            c.sched_from[attr] = a
        elif a == "--lr-total-steps":
            c.sched_total = int(flag_number(a, v, R_STEPS))
            c.sched_from["sched_total"] = a
        elif a == "--seed": c.seed = int(flag_number(a, v, R_COUNT))
        elif a == "--init": c.init_path = v
        elif a == "--save": c.save_dir = v
        elif a == "--save-every": c.save_every = parse_int_or_die(a, v, 0, 1 << 30)
        elif a == "--keep-last": c.keep_last = parse_int_or_die(a, v, 0, 1 << 20)
        elif a == "--timeout": c.timeout = flag_number(a, v, R_TIMEOUT)
        elif a == "--resume": c.resume_dir = v
        elif a == "--log": c.log_path = v
        elif a == "--threads": c.threads = parse_int_or_die(a, v, 0, 4096)
        elif a == "--val-every": c.val_every = parse_int_or_die(a, v, 0, 1 << 30)
        elif a == "--val-batches": c.val_batches = parse_int_or_die(a, v, 0, 1 << 20)
        elif a == "--sample-every": c.sample_every = parse_int_or_die(a, v, 0, 1 << 30)
        elif a == "--sample-len": c.sample_len = parse_int_or_die(a, v, 1, 1 << 20)
        elif a == "--sample":
            if parse_int_or_die(a, v, 0, 1): fatal("--sample: a flag of the C trainers (./train_gpt_cpu --sample 1 --resume DIR)")
        elif a in ("--prompt", "--num-samples", "--temperature", "--top-k", "--top-p", "--kv-cache"):
            c.sampling_flags.append(a)
            if a == "--num-samples": parse_int_or_die(a, v, 1, 4096)
            elif a == "--top-k": parse_int_or_die(a, v, 0, 1 << 30)
            elif a == "--kv-cache": parse_int_or_die(a, v, 0, 1)
            elif a == "--temperature": flag_number(a, v, R_NONNEG)
            elif a == "--top-p": flag_number(a, v, R_TOP_P)
        elif a in ("--tensorboard", "--csv-monitor", "--job-name"): c.monitor_flags.append(a)   # train/monitor.h: the C trainers'
        elif a == "--tokenizer": c.tokenizer_path = v
        elif a == "--quiet": c.quiet = parse_int_or_die(a, v, 0, 1)
        elif a == "--zero-stage": c.zero_stage = parse_int_or_die(a, v, 0, 3)
        elif a == "--persistence-threshold": c.persistence_threshold = int(flag_number(a, v, R_COUNT))
        elif a == "--max-live": c.max_live_elems = int(flag_number(a, v, R_COUNT))
        elif a == "--prefetch": c.prefetch = parse_int_or_die(a, v, 0, 1)
        elif a == "--offload": c.offload = parse_int_or_die(a, v, 0, 1)
        elif a == "--offload-param": c.offload_param = parse_int_or_die(a, v, 0, 1)
        elif a in ("--offload-nvme", "--offload-param-nvme"): pass   # where the C trainers keep state: nothing to mirror
        elif a == "--nvme-tile": parse_int_or_die(a, v, 1, 10 ** 12)
        elif a == "--estimate-memory": fatal("--estimate-memory: a flag of the C trainers (./train_gpt_cpu --estimate-memory N)")
        elif a == "--config-keys": fatal("--config-keys: a flag of the C trainers (./train_gpt_cpu --config-keys)")
        elif a in ("--fp16", "--max-skips", "--inject-nonfinite"):
            fatal("%s: a flag of the C trainers (the PyTorch reference trains in fp32 and does not skip steps)" % a)
        elif a == "--comm":
            if v not in ("auto", "nccl", "mpi"):
                fatal("%s: expected auto, nccl or mpi, got '%s'" % (a, v))
            c.comm = v
        # reference-only flags
        elif a == "--device":
            if v not in ("cpu", "cuda") and not v.startswith("cuda:"):
                fatal("%s: expected cpu or cuda, got '%s'" % (a, v))
            c.device = v
        elif a == "--world": c.world = parse_int_or_die(a, v, 1, 1 << 16)
        elif a == "--debug-state": c.debug_state = v
        else:
            fatal("unknown flag '%s' (see --help)" % a)
    if not ffn_set:
        m.d_ff = default_ffn(arch, m.d_model)
    apply_hf_config(c, argv)
    apply_model_file(c, argv)
    m = c.model
    arch = m.arch
    if arch == ARCH_GPT2 and m.n_kv_head != m.n_head:
        if "--kv-heads" in argv[1:-1]:
            fatal("--kv-heads: gpt2 uses n_kv_heads == n_heads")
        m.n_kv_head = m.n_head
    if m.d_model % m.n_head: fatal("--dim %d is not divisible by --heads %d" % (m.d_model, m.n_head))
    if m.n_head % m.n_kv_head: fatal("--heads %d is not divisible by --kv-heads %d" % (m.n_head, m.n_kv_head))
    if arch == ARCH_LLAMA and (m.d_model // m.n_head) % 2:
        fatal("llama: head dimension %d must be even for RoPE" % (m.d_model // m.n_head))
    if c.T > m.max_seq: fatal("--seq %d exceeds the model's maximum sequence length %d (--max-seq)" % (c.T, m.max_seq))
    # config/flags.h config_check(): a schedule setting the chosen schedule does not take
    for name, where in c.sched_from.items():
        users = SCHED_USERS.get(name)
        if users and c.sched not in users:
            fatal("%s: not used by the %s schedule (used by %s)" % (where, SCHED_NAMES[c.sched],
                                                                     ", ".join(SCHED_NAMES[s] for s in sorted(users))))
    W, T = max(2, c.warmup), lr_total_steps(c)
    if c.sched == SCHED_WARMUP_COSINE_LR and T == W:
        fatal("WarmupCosineLR with total_num_steps == warmup_num_steps (%d) divides by zero after the warm-up (as in DeepSpeed)" % T)
    resolve_batch(c)
    return c


# ----------------------------------------------------------------------------
# model/model.h: the parameter layout


class TensorSpec:
    def __init__(self, unit, name, rows, cols, decay, init_std, init_value, valid_rows):
        self.unit, self.name = unit, name
        self.full_name = "%s.%s" % (unit, name)
        self.rows, self.cols, self.numel = rows, cols, rows * cols
        self.decay, self.init_std, self.init_value, self.valid_rows = decay, init_std, init_value, valid_rows
        self.offset = 0  # flat offset

    @property
    def shape(self):
        # 2-D tensors as [rows, cols]; 1-D tensors (rows == 1) as [cols]
        return (self.rows, self.cols) if self.rows > 1 else (self.numel,)


def build_layout(c):
    """model_layout_build(): the flat list of tensors, in order."""
    C, Ff, Vp, V = c.d_model, c.d_ff, c.padded_vocab, c.vocab_size
    hd = C // c.n_head
    qkv = (c.n_head + 2 * c.n_kv_head) * hd
    gpt2 = c.arch == ARCH_GPT2
    std = np.float32(0.02)
    resid_std = float(std / np.sqrt(np.float32(2.0 * c.n_layer)))  # 0.02f / sqrtf(2.0f * L) in float32
    std = float(std)
    T = []
    T.append(TensorSpec("embed", "wte", Vp, C, 1, std, 0.0, V))
    if gpt2:
        T.append(TensorSpec("embed", "wpe", c.max_seq, C, 1, std, 0.0, c.max_seq))
    for l in range(c.n_layer):
        u = "layer%d" % l
        T.append(TensorSpec(u, "ln1_w", 1, C, 0, 0.0, 1.0, 1))
        if gpt2: T.append(TensorSpec(u, "ln1_b", 1, C, 0, 0.0, 0.0, 1))
        T.append(TensorSpec(u, "qkv_w", qkv, C, 1, std, 0.0, qkv))
        if gpt2: T.append(TensorSpec(u, "qkv_b", 1, qkv, 0, 0.0, 0.0, 1))
        T.append(TensorSpec(u, "attproj_w", C, C, 1, resid_std, 0.0, C))
        if gpt2: T.append(TensorSpec(u, "attproj_b", 1, C, 0, 0.0, 0.0, 1))
        T.append(TensorSpec(u, "ln2_w", 1, C, 0, 0.0, 1.0, 1))
        if gpt2: T.append(TensorSpec(u, "ln2_b", 1, C, 0, 0.0, 0.0, 1))
        fr = Ff if gpt2 else 2 * Ff
        T.append(TensorSpec(u, "fc_w", fr, C, 1, std, 0.0, fr))
        if gpt2: T.append(TensorSpec(u, "fc_b", 1, Ff, 0, 0.0, 0.0, 1))
        T.append(TensorSpec(u, "fcproj_w", C, Ff, 1, resid_std, 0.0, C))
        if gpt2: T.append(TensorSpec(u, "fcproj_b", 1, C, 0, 0.0, 0.0, 1))
    if gpt2:
        T.append(TensorSpec("final", "lnf_w", 1, C, 0, 0.0, 1.0, 1))
        T.append(TensorSpec("final", "lnf_b", 1, C, 0, 0.0, 0.0, 1))
    else:
        T.append(TensorSpec("final", "norm_w", 1, C, 0, 0.0, 1.0, 1))
        T.append(TensorSpec("final", "lm_head", Vp, C, 1, std, 0.0, V))
    off = 0
    for t in T:
        t.offset = off
        off += t.numel
    return T, off


# ----------------------------------------------------------------------------
# util/common.h: splitmix64 + Box-Muller, bit for bit, vectorized with numpy

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_INV_2P53P1 = 1.0 / 9007199254740993.0  # as C evaluates the literal (== 2^-53)
_INV_2P53 = 1.0 / 9007199254740992.0
_TWO_PI = 6.283185307179586


def splitmix64_block(seed, start, n):
    """Outputs number start .. start+n-1 (0-based) of the splitmix64 stream seeded with `seed`."""
    with np.errstate(over="ignore"):
        idx = np.arange(start + 1, start + n + 1, dtype=np.uint64)
        z = np.uint64(seed & 0xFFFFFFFFFFFFFFFF) + idx * _GAMMA
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def normals_block(seed, start, n):
    """n float32 normals from stream outputs start .. start+2n-1, exactly as rng_normal() in util/common.h.

    numpy's SIMD log/cos may differ from libm by a few double ulps; wherever that could
    change the rounding to float32, the value is recomputed with math.log/math.cos (libm)."""
    z = splitmix64_block(seed, start, 2 * n)
    u1 = ((z[0::2] >> np.uint64(11)).astype(np.float64) + 1.0) * _INV_2P53P1
    u2 = (z[1::2] >> np.uint64(11)).astype(np.float64) * _INV_2P53
    r = np.sqrt(-2.0 * np.log(u1)) * np.cos(_TWO_PI * u2)
    out = r.astype(np.float32)
    tol = 2.0 ** -36
    risky = (((r * (1 + tol)).astype(np.float32) != out) | ((r * (1 - tol)).astype(np.float32) != out)
             | (np.abs(r) < 1e-3))
    for i in np.nonzero(risky)[0]:
        out[i] = np.float32(math.sqrt(-2.0 * math.log(float(u1[i]))) * math.cos(_TWO_PI * float(u2[i])))
    return out


def init_params(layout, seed):
    """model_init_params(): the flat float32 parameter vector."""
    tensors, total = layout
    flat = np.zeros(total, dtype=np.float32)
    counter = 0  # stream outputs consumed so far
    CHUNK = 1 << 22
    for t in tensors:
        dst = flat[t.offset:t.offset + t.numel]
        valid = t.valid_rows * t.cols
        if t.init_std > 0:
            std = np.float32(t.init_std)
            for s in range(0, valid, CHUNK):
                k = min(CHUNK, valid - s)
                dst[s:s + k] = std * normals_block(seed, counter, k)
                counter += 2 * k
        else:
            dst[:valid] = np.float32(t.init_value)
    return flat


# ----------------------------------------------------------------------------
# model files (docs/model.md)

MODEL_MAGIC, MODEL_VERSION = 20251121, 1
DEBUG_MAGIC, DEBUG_VERSION = 20251122, 1
HEADER_INTS = 256


def _fbits(x):
    return struct.unpack("<i", struct.pack("<f", x))[0]


def model_header(c, num_params):
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[0:11] = [MODEL_MAGIC, MODEL_VERSION, c.arch, c.n_layer, c.n_head, c.n_kv_head, c.d_model, c.d_ff,
               c.vocab_size, c.padded_vocab, c.max_seq]
    h[11] = _fbits(c.norm_eps)
    h[12] = _fbits(c.rope_theta)
    h[13] = 0
    h[14] = np.uint32(num_params & 0xFFFFFFFF).view(np.int32)
    h[15] = np.uint32(num_params >> 32).view(np.int32)
    return h


def open_or_die(path):
    """(binary file, its size), or a one-line error naming the file."""
    try:
        return open(path, "rb"), os.path.getsize(path)
    except OSError as e:
        fatal("%s: cannot open (%s)" % (path, e.strerror))


def write_atomic(path, chunks):
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            for ch in chunks:
                f.write(ch)
        os.replace(tmp, path)
    except OSError as e:
        fatal("%s: write failed (%s)" % (path, e.strerror))


def save_model(path, c, flat):
    h = model_header(c, flat.size)
    write_atomic(path, [h.tobytes(), np.ascontiguousarray(flat, dtype="<f4").tobytes()])


def load_model(path, c, num_params):
    """Reads a model file, checking it against the configuration. Returns the flat float32 vector."""
    f, size = open_or_die(path)
    with f:
        if size < 4 * HEADER_INTS:
            fatal("%s: truncated file: %d bytes is shorter than the 1024-byte header" % (path, size))
        h = np.frombuffer(f.read(4 * HEADER_INTS), dtype="<i4")
        if h[0] != MODEL_MAGIC:
            fatal("%s: bad magic number %d (expected %d): not a zeroc model file" % (path, h[0], MODEL_MAGIC))
        if h[1] != MODEL_VERSION:
            fatal("%s: unsupported model file version %d (expected %d)" % (path, h[1], MODEL_VERSION))
        if h[13] != 0:
            fatal("%s: unsupported dtype %d (expected 0 = fp32)" % (path, h[13]))
        want = model_header(c, num_params)
        fields = ["magic", "version", "arch", "n_layer", "n_head", "n_kv_head", "d_model", "d_ff", "vocab_size",
                  "padded_vocab", "max_seq", "norm_eps", "rope_theta", "dtype", "num_params", "num_params_hi"]
        bad = []
        for k in range(2, 16):
            if k == 12 and c.arch == ARCH_GPT2:
                continue  # rope_theta does not enter gpt2's math
            if h[k] != want[k]:
                if k in (11, 12):
                    got_v = struct.unpack("<f", struct.pack("<i", int(h[k])))[0]
                    want_v = struct.unpack("<f", struct.pack("<i", int(want[k])))[0]
                    bad.append("%s %g (expected %g)" % (fields[k], got_v, want_v))
                elif k == 2:
                    bad.append("arch %s (expected %s)" % (ARCH_NAMES[h[k]] if h[k] in (0, 1) else str(h[k]), ARCH_NAMES[want[k]]))
                elif k == 15:
                    continue
                elif k == 14:
                    got_n = (int(h[15]) << 32) | (int(h[14]) & 0xFFFFFFFF)
                    bad.append("num_params %d (expected %d)" % (got_n, num_params))
                else:
                    bad.append("%s %d (expected %d)" % (fields[k], h[k], want[k]))
        if h[15] != want[15] and h[14] == want[14]:
            got_n = (int(h[15]) << 32) | (int(h[14]) & 0xFFFFFFFF)
            bad.append("num_params %d (expected %d)" % (got_n, num_params))
        if bad:
            fatal("%s: model file does not match the configuration: %s" % (path, ", ".join(bad)))
        expect = 4 * HEADER_INTS + 4 * num_params
        if size < expect:
            fatal("%s: truncated file: expected %d bytes, got %d" % (path, expect, size))
        if size > expect:
            fatal("%s: %d trailing bytes after %d parameters" % (path, size - expect, num_params))
        flat = np.frombuffer(f.read(4 * num_params), dtype="<f4").astype(np.float32)
    if not np.all(np.isfinite(flat)):
        fatal("%s: non-finite parameter values" % path)
    return flat


# ----------------------------------------------------------------------------
# dataloader.h

SHARD_MAGIC, SHARD_VERSION = 20240520, 1


def write_shard(path, tokens):
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[0], h[1], h[2] = SHARD_MAGIC, SHARD_VERSION, len(tokens)
    write_atomic(path, [h.tobytes(), np.asarray(tokens, dtype="<u2").tobytes()])


def read_shard(path):
    f, size = open_or_die(path)
    with f:
        if size < 4 * HEADER_INTS:
            fatal("%s: truncated file: %d bytes is shorter than the 1024-byte header" % (path, size))
        h = np.frombuffer(f.read(4 * HEADER_INTS), dtype="<i4")
        if h[0] != SHARD_MAGIC:
            fatal("%s: bad magic number %d (expected %d): not a zeroc/llm.c token shard" % (path, h[0], SHARD_MAGIC))
        if h[1] != SHARD_VERSION:
            fatal("%s: unsupported shard version %d (expected %d)" % (path, h[1], SHARD_VERSION))
        n = int(h[2]) & 0xFFFFFFFF
        expect = 4 * HEADER_INTS + 2 * n
        if size < expect:
            fatal("%s: truncated file: header says %d tokens (%d bytes) but the file has %d bytes" % (path, n, expect, size))
        if size > expect:
            fatal("%s: %d trailing bytes after %d tokens" % (path, size - expect, n))
        return np.frombuffer(f.read(2 * n), dtype="<u2").astype(np.int64)


def data_files(spec):
    """dataloader.h data_files(): one shard, every *.bin of a directory, or a glob; sorted by name (bytes)."""
    if os.path.isdir(spec):
        names = [os.path.join(spec, n) for n in os.listdir(spec) if n.endswith(".bin") and len(n) >= 5 and not n.startswith(".")]
        if not names:
            fatal("%s: directory holds no .bin token shards" % spec)
    elif any(ch in spec for ch in "*?["):
        names = glob.glob(spec)
        if not names:
            fatal("%s: no file matches the pattern" % spec)
    else:
        names = [spec]
    return sorted(names, key=lambda s: s.encode())


def data_rng_state(seed, epoch, what):
    """dataloader.h data_rng(): the splitmix64 state of one permutation (what = -1: the shard order)."""
    s = int(splitmix64_block(seed, 0, 1)[0]) ^ (epoch & 0xFFFFFFFFFFFFFFFF)
    return int(splitmix64_block(s, 0, 1)[0]) ^ ((what + 1) & 0xFFFFFFFFFFFFFFFF)


def data_permute(n, state):
    """dataloader.h data_permute(): Fisher-Yates from the top, j = rng % (i + 1)."""
    a = list(range(n))
    z = splitmix64_block(state, 0, max(n - 1, 0)).tolist()
    for k, i in enumerate(range(n - 1, 0, -1)):
        j = z[k] % (i + 1)
        a[i], a[j] = a[j], a[i]
    return a


class DataLoader:
    """dataloader.h: the shards end to end (in name order or, shuffled, a seeded order per epoch) cut
    into sequences at multiples of T; each shard's sequences in order or a seeded permutation; rank
    `rank` of `world` takes entries rank*B .. rank*B+B-1 of each micro-step's world*B. The trainer
    uses rank 0 of world 1 with micro batch world*B."""

    def __init__(self, path, B, T, vocab_size, rank=0, world=1, tokens=None, shuffle=0, seed=0):
        self.path, self.B, self.T, self.rank, self.world = path, B, T, rank, world
        self.shuffle, self.seed = shuffle, seed
        files = [path] if tokens is not None else data_files(path)
        self.shards = [tokens] if tokens is not None else [read_shard(f) for f in files]
        self.n_tokens = n = sum(len(s) for s in self.shards)
        need = world * B * T + 1
        if n < need:
            fatal("%s: %d tokens%s is too few for one micro-step of %d ranks x %d sequences x %d tokens (+1)"
                  % (path, n, " in all shards" if len(files) > 1 else "", world, B, T))
        for f, s in zip(files, self.shards):
            if len(s) and s.max() >= vocab_size:
                i = int(np.argmax(s >= vocab_size))
                fatal("%s: token id %d at position %d is out of range for vocabulary size %d" % (f, s[i], i, vocab_size))
        self.n_seq = (n - 1) // T
        self.layout(0)

    def layout(self, epoch):
        K, T = len(self.shards), self.T
        self.epoch = epoch
        self.order = data_permute(K, data_rng_state(self.seed, epoch, -1)) if self.shuffle else list(range(K))
        self.start, self.first, s = [], [], 0
        for k in range(K):
            self.start.append(s)
            self.first.append(min((s + T - 1) // T, self.n_seq))
            s += len(self.shards[self.order[k]])
        self.start.append(s)
        self.first.append(self.n_seq)
        self.perm_k = -1
        self.next_entry = 0

    def sequence(self, e):
        """T + 1 tokens of entry e of the epoch's list"""
        k = bisect.bisect_right(self.first, e, 0, len(self.shards)) - 1
        j = e
        if self.shuffle:
            if self.perm_k != k:
                m = self.first[k + 1] - self.first[k]
                self.perm = data_permute(m, data_rng_state(self.seed, self.epoch, self.order[k]))
                self.perm_k = k
            j = self.first[k] + self.perm[e - self.first[k]]
        off, need, parts = j * self.T - self.start[k], self.T + 1, []
        while need > 0:
            s = self.shards[self.order[k]]
            part = s[off:off + need]
            parts.append(part)
            need -= len(part)
            k, off = k + 1, 0
        return np.concatenate(parts)

    def next(self):
        stride = self.world * self.B
        if self.next_entry + stride > self.n_seq:
            self.layout(self.epoch + 1)
        e0 = self.next_entry + self.rank * self.B
        buf = np.stack([self.sequence(e0 + b) for b in range(self.B)])
        self.next_entry += stride
        return buf[:, :-1], buf[:, 1:]

    def reset(self):
        if self.epoch != 0:
            self.layout(0)
        self.next_entry = 0


# ----------------------------------------------------------------------------
# the model (docs/model.md), functional over a dict name -> tensor


def rope_tables(T, hd, theta):
    """cos/sin [T, hd/2] as float32: freq = 1 / powf(theta, 2i/hd) and angle = t * freq in fp32."""
    th = np.float32(theta)
    freqs = []
    for i in range(hd // 2):
        e = np.float32(2 * i) / np.float32(hd)
        p = np.float32(math.pow(float(th), float(e)))  # powf: the correctly rounded float32 power
        freqs.append(np.float32(1.0) / p)
    cos = np.empty((T, hd // 2), dtype=np.float32)
    sin = np.empty((T, hd // 2), dtype=np.float32)
    for t in range(T):
        for i, fr in enumerate(freqs):
            ang = float(np.float32(t) * fr)
            cos[t, i] = math.cos(ang)
            sin[t, i] = math.sin(ang)
    return cos, sin


class Model:
    def __init__(self, cfg, device="cpu"):
        load_torch()
        self.cfg = cfg
        self.layout = build_layout(cfg)
        self.tensors, self.num_params = self.layout
        self.names = [t.full_name for t in self.tensors]
        self.device = device
        self.params = []
        self._rope = {}
        self._mask = {}

    def set_flat(self, flat):
        """Creates the parameter tensors (leaves, fp32) from a flat float32 numpy vector."""
        self.params = []
        for t in self.tensors:
            a = torch.from_numpy(np.array(flat[t.offset:t.offset + t.numel], dtype=np.float32).reshape(t.shape))
            self.params.append(a.to(self.device).requires_grad_(True))

    def flat(self, tensors=None):
        tensors = self.params if tensors is None else tensors
        return np.concatenate([x.detach().to("cpu", torch.float32).reshape(-1).numpy() for x in tensors])

    def flat_grads(self):
        out = []
        for p, t in zip(self.params, self.tensors):
            out.append(np.zeros(t.numel, np.float32) if p.grad is None else p.grad.detach().cpu().reshape(-1).numpy())
        return np.concatenate(out)

    def param_dict(self, params=None):
        return dict(zip(self.names, self.params if params is None else params))

    def rope(self, T, dtype, device):
        key = (T, dtype, str(device))
        if key not in self._rope:
            hd = self.cfg.d_model // self.cfg.n_head
            cos, sin = rope_tables(T, hd, self.cfg.rope_theta)
            self._rope[key] = (torch.from_numpy(cos).to(device=device, dtype=dtype).view(T, 1, hd // 2),
                               torch.from_numpy(sin).to(device=device, dtype=dtype).view(T, 1, hd // 2))
        return self._rope[key]

    def mask(self, T, device):
        key = (T, str(device))
        if key not in self._mask:
            self._mask[key] = torch.ones(T, T, dtype=torch.bool, device=device).tril()
        return self._mask[key]

    def forward(self, idx, params=None, vocab=None):
        """Logits [B, T, Vp] for token ids idx [B, T] (int64 tensor). vocab=V: only the first V columns,
        the real vocabulary (what the loss reads: training and evaluation compute no padded logits and
        copy no slice of them; the same values as the first V columns of the full logits)."""
        c = self.cfg
        P = self.param_dict(params)
        gpt2 = c.arch == ARCH_GPT2
        B, T = idx.shape
        C, H, KV = c.d_model, c.n_head, c.n_kv_head
        hd = C // H
        eps = c.norm_eps
        wte = P["embed.wte"]
        dtype, dev = wte.dtype, wte.device
        scale = float(np.float32(1.0) / np.sqrt(np.float32(hd)))
        mask = self.mask(T, dev)
        if not gpt2:
            cos, sin = self.rope(T, dtype, dev)

        def rmsnorm(x, w):
            return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * w

        def rope(e):  # e [B, T, nh, hd]: rotate interleaved pairs (2i, 2i+1)
            e2 = e.reshape(B, T, e.shape[2], hd // 2, 2)
            e0, e1 = e2[..., 0], e2[..., 1]
            return torch.stack((e0 * cos - e1 * sin, e0 * sin + e1 * cos), dim=-1).reshape(B, T, e.shape[2], hd)

        x = F.embedding(idx, wte)
        if gpt2:
            x = x + P["embed.wpe"][:T]
        for l in range(c.n_layer):
            p = "layer%d." % l
            if gpt2:
                h = F.layer_norm(x, (C,), P[p + "ln1_w"], P[p + "ln1_b"], eps)
            else:
                h = rmsnorm(x, P[p + "ln1_w"])
            qkv = F.linear(h, P[p + "qkv_w"], P.get(p + "qkv_b"))
            q, k, v = qkv.split([H * hd, KV * hd, KV * hd], dim=-1)
            q = q.reshape(B, T, H, hd)
            k = k.reshape(B, T, KV, hd)
            v = v.reshape(B, T, KV, hd)
            if not gpt2:
                q, k = rope(q), rope(k)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, nh, T, hd]
            if KV != H:  # query head h uses kv head h / (H/KV)
                k = k.repeat_interleave(H // KV, dim=1)
                v = v.repeat_interleave(H // KV, dim=1)
            att = torch.matmul(q, k.transpose(-2, -1)) * scale
            att = att.masked_fill(~mask, float("-inf"))
            att = torch.softmax(att, dim=-1)
            y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, C)
            x = x + F.linear(y, P[p + "attproj_w"], P.get(p + "attproj_b"))
            if gpt2:
                h = F.layer_norm(x, (C,), P[p + "ln2_w"], P[p + "ln2_b"], eps)
                m = F.gelu(F.linear(h, P[p + "fc_w"], P[p + "fc_b"]), approximate="tanh")
            else:
                h = rmsnorm(x, P[p + "ln2_w"])
                g, u = F.linear(h, P[p + "fc_w"]).split([c.d_ff, c.d_ff], dim=-1)
                m = F.silu(g) * u
            x = x + F.linear(m, P[p + "fcproj_w"], P.get(p + "fcproj_b"))
        if gpt2:
            x = F.layer_norm(x, (C,), P["final.lnf_w"], P["final.lnf_b"], eps)
            head = wte
        else:
            x = rmsnorm(x, P["final.norm_w"])
            head = P["final.lm_head"]
        return F.linear(x, head if vocab is None else head[:vocab])

    def loss(self, logits, targets):
        """Mean cross-entropy over the first V logits (padded columns excluded from the softmax); with
        logits of forward(vocab=V) the slice and reshape are views, nothing is copied."""
        V = self.cfg.vocab_size
        return F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))


# ----------------------------------------------------------------------------
# Hugging Face's names and layouts (formats/safetensors.h, config/hf_config.h, model/hf.h): --init X.safetensors

ST_MAX_HEADER = 100000000
ST_DTYPE_SIZES = {"F32": 4, "BF16": 2, "F16": 2, "F64": 8, "I64": 8, "U64": 8, "I32": 4, "U32": 4, "I16": 2, "U16": 2,
                  "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


def is_safetensors(path):
    """formats/safetensors.h st_sniff(): a .safetensors name, or a plausible header length followed by '{'."""
    if path.endswith(".safetensors"):
        return True
    try:
        with open(path, "rb") as f:
            b = f.read(9)
    except OSError:
        return False
    return len(b) == 9 and 2 <= struct.unpack("<Q", b[:8])[0] <= ST_MAX_HEADER and b[8:9] == b"{"


def read_safetensors(path):
    """formats/safetensors.h st_open(): the same checks. Returns ({name: (dtype, shape, begin, end)}, data bytes)."""
    f, size = open_or_die(path)
    with f:
        if size < 8:
            fatal("%s: truncated file: %d bytes, no 8-byte header length" % (path, size))
        n = struct.unpack("<Q", f.read(8))[0]
        if n > ST_MAX_HEADER:
            fatal("%s: header length %d exceeds the format's limit of %d bytes (not a safetensors file?)" % (path, n, ST_MAX_HEADER))
        if 8 + n > size:
            fatal("%s: truncated file: the header is %d bytes but the file has only %d after the length" % (path, n, size - 8))
        text = f.read(n)
        if not text.startswith(b"{"):
            fatal("%s: the header does not start with '{' (not a safetensors file)" % path)

        def no_duplicates(pairs):
            seen = {}
            for k, v in pairs:
                if k in seen:
                    fatal("%s: tensor %s appears twice in the header" % (path, k))
                seen[k] = v
            return seen
        try:
            header = json.loads(text.decode("utf-8"), object_pairs_hook=no_duplicates)
        except (ValueError, UnicodeDecodeError):
            header = None
        if not isinstance(header, dict):
            fatal("%s: the header is not valid JSON" % path)
        data = f.read()
    entries = {}
    for name, e in header.items():
        if name == "__metadata__":
            if not isinstance(e, dict) or not all(isinstance(v, str) for v in e.values()):
                fatal("%s: __metadata__ must map strings to strings" % path)
            continue
        if (not isinstance(e, dict) or not isinstance(e.get("dtype"), str) or not isinstance(e.get("shape"), list)
                or not isinstance(e.get("data_offsets"), list) or len(e["data_offsets"]) != 2):
            fatal('%s: tensor %s: needs "dtype", "shape" and "data_offsets" [begin, end]' % (path, name))
        dtype, shape, (b, en) = e["dtype"], e["shape"], e["data_offsets"]
        if dtype not in ST_DTYPE_SIZES:
            fatal('%s: tensor %s: unknown dtype "%s"' % (path, name, dtype))
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            fatal("%s: tensor %s: bad shape" % (path, name))
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (b, en)) or b < 0 or en < b:
            fatal("%s: tensor %s: bad data_offsets" % (path, name))
        need = int(np.prod(shape, dtype=np.int64)) * ST_DTYPE_SIZES[dtype]
        if en - b != need:
            fatal("%s: tensor %s: data_offsets span %d bytes, but %s %s needs %d" % (path, name, en - b, dtype, shape, need))
        entries[name] = (dtype, tuple(shape), b, en)
    at = 0
    for name, (_, _, b, en) in sorted(entries.items(), key=lambda kv: (kv[1][2], kv[1][3])):
        if b != at:
            fatal("%s: tensor %s: data starts at byte %d, expected %d (tensors must tile the data without gaps or overlaps)"
                  % (path, name, b, at))
        at = en
    if at != len(data):
        fatal("%s: %s file: the header describes %d bytes of tensor data, the file holds %d"
              % (path, "truncated" if at > len(data) else "oversized", at, len(data)))
    return entries, data


def st_tensor_f32(path, name, entry, data, shape):
    """model/hf.h hf_read_f32(): the tensor as float32 after checking its shape, dtype and values."""
    dtype, got, b, en = entry
    if got != tuple(shape):
        fatal("%s: tensor %s has shape %s, this model needs %s (sizes from config.json)" % (path, name, list(got), list(shape)))
    raw = data[b:en]
    if dtype == "F32":
        a = np.frombuffer(raw, "<f4").astype(np.float32)
    elif dtype == "BF16":
        a = (np.frombuffer(raw, "<u2").astype(np.uint32) << np.uint32(16)).view(np.float32)
    elif dtype == "F16":
        a = np.frombuffer(raw, "<f2").astype(np.float32)
    else:
        fatal("%s: tensor %s has dtype %s; zeroc reads F32, BF16 and F16" % (path, name, dtype))
    if not np.all(np.isfinite(a)):
        fatal("%s: tensor %s: non-finite value at element %d" % (path, name, int(np.argmin(np.isfinite(a)))))
    return a.reshape(shape)


def hf_config_path(weights):
    return os.path.join(os.path.dirname(weights), "config.json")


def read_hf_config(path):
    """config/hf_config.h hf_config_read(): config.json -> (ModelConfig, tied), transformers' defaults for absent keys."""
    try:
        with open(path, "rb") as f:
            root = json.loads(f.read().decode("utf-8", "replace"))
    except OSError as e:
        fatal("%s: cannot open (%s)" % (path, e.strerror))
    except ValueError:
        root = None
    if not isinstance(root, dict):
        fatal("%s: not a JSON object" % path)

    def get(obj, key, dflt):
        v = obj.get(key)
        return dflt if v is None else v

    def hint(key, dflt, lo, hi):
        v = get(root, key, dflt)
        if (isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer())
                or not lo <= v <= hi):
            fatal('%s: "%s" must be an integer in [%d, %d]' % (path, key, lo, hi))
        return int(v)

    def hfloat(obj, key, dflt):
        v = get(obj, key, dflt)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            fatal('%s: "%s" must be a positive number' % (path, key))
        return f32(v)

    def hbool(key, dflt):
        v = get(root, key, dflt)
        if not isinstance(v, bool):
            fatal('%s: "%s" must be true or false' % (path, key))
        return v

    def rope_type_default(key):
        v = root.get(key)
        if v is None:
            return
        t = (v.get("rope_type") or v.get("type")) if isinstance(v, dict) else None
        if t != "default":
            fatal('%s: "%s" asks for %s RoPE scaling: zeroc implements the default rotary embedding only'
                  % (path, key, t if isinstance(t, str) else "an unknown"))

    typ = root.get("model_type") if isinstance(root.get("model_type"), str) else None
    archs = root.get("architectures")
    a0 = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if typ is None and a0 is not None:
        typ = {"GPT2LMHeadModel": "gpt2", "LlamaForCausalLM": "llama"}.get(a0, a0)
    if typ is None:
        fatal('%s: no "model_type" (gpt2 or llama)' % path)
    m = ModelConfig()
    m.rope_theta = f32(10000.0)
    if typ == "gpt2":
        m.arch = ARCH_GPT2
        m.n_layer = hint("n_layer", 12, 1, 1024)
        m.n_head = m.n_kv_head = hint("n_head", 12, 1, 1024)
        m.d_model = hint("n_embd", 768, 1, 65536)
        m.d_ff = hint("n_inner", 4 * m.d_model, 1, 1 << 20)
        m.max_seq = hint("n_positions", 1024, 1, 1 << 20)
        m.vocab_size = hint("vocab_size", 50257, 2, 65536)
        m.norm_eps = hfloat(root, "layer_norm_epsilon", 1e-5)
        act = root.get("activation_function")
        if isinstance(act, str) and act not in ("gelu_new", "gelu_pytorch_tanh"):
            fatal('%s: "activation_function" is "%s": zeroc\'s gpt2 uses the tanh GELU (gelu_new)' % (path, act))
        if not hbool("scale_attn_weights", True):
            fatal('%s: "scale_attn_weights" false is not zeroc\'s attention' % path)
        if hbool("scale_attn_by_inverse_layer_idx", False):
            fatal('%s: "scale_attn_by_inverse_layer_idx" is not zeroc\'s attention' % path)
        if not hbool("tie_word_embeddings", True):
            fatal('%s: "tie_word_embeddings" false: zeroc\'s gpt2 ties its output head to wte' % path)
        tied = True
    elif typ == "llama":
        m.arch = ARCH_LLAMA
        m.n_layer = hint("num_hidden_layers", 32, 1, 1024)
        m.n_head = hint("num_attention_heads", 32, 1, 1024)
        m.n_kv_head = hint("num_key_value_heads", m.n_head, 1, 1024)
        m.d_model = hint("hidden_size", 4096, 1, 65536)
        m.d_ff = hint("intermediate_size", 11008, 1, 1 << 20)
        m.max_seq = hint("max_position_embeddings", 2048, 1, 1 << 20)
        m.vocab_size = hint("vocab_size", 32000, 2, 65536)
        m.norm_eps = hfloat(root, "rms_norm_eps", 1e-6)
        rp = root.get("rope_parameters")
        m.rope_theta = hfloat(rp, "rope_theta", hfloat(root, "rope_theta", 10000.0)) if isinstance(rp, dict) \
            else hfloat(root, "rope_theta", 10000.0)
        rope_type_default("rope_scaling")
        rope_type_default("rope_parameters")
        act = root.get("hidden_act")
        if isinstance(act, str) and act != "silu":
            fatal('%s: "hidden_act" is "%s": zeroc\'s llama MLP is SwiGLU (silu)' % (path, act))
        if hbool("attention_bias", False):
            fatal('%s: "attention_bias" true: zeroc\'s llama has no biases' % path)
        if hbool("mlp_bias", False):
            fatal('%s: "mlp_bias" true: zeroc\'s llama has no biases' % path)
        if m.d_model % m.n_head == 0 and hint("head_dim", m.d_model // m.n_head, 1, 65536) != m.d_model // m.n_head:
            fatal('%s: "head_dim" must be hidden_size / num_attention_heads = %d in zeroc' % (path, m.d_model // m.n_head))
        tied = hbool("tie_word_embeddings", False)
    else:
        fatal('%s: model_type "%s" is not supported (gpt2, llama)' % (path, typ))
    if m.d_model % m.n_head:
        fatal("%s: width %d is not divisible by %d heads" % (path, m.d_model, m.n_head))
    if m.n_head % m.n_kv_head:
        fatal("%s: %d heads are not divisible by %d key/value heads" % (path, m.n_head, m.n_kv_head))
    if m.arch == ARCH_LLAMA and (m.d_model // m.n_head) % 2:
        fatal("%s: head dimension %d must be even for RoPE" % (path, m.d_model // m.n_head))
    m.padded_vocab = round_up(m.vocab_size, 128)
    return m, tied


def take_model(c, file, whose, path, argv):
    """config/train_config.h config_take_model(): the run takes the model a file holds; an explicit --arch, size flag or
    --preset that disagrees with it is one error naming both values."""
    m = c.model
    given = lambda flag: flag in argv[1:-1]
    if given("--arch") and m.arch != file.arch:
        fatal("--arch %s disagrees with %s %s (%s): the model comes from it; drop or fix the flag"
              % (ARCH_NAMES[m.arch], whose, ARCH_NAMES[file.arch], path))
    preset = given("--preset")
    for flag, what, by_preset, mine, theirs in (
            ("--layers", "layers", True, m.n_layer, file.n_layer),
            ("--heads", "heads", True, m.n_head, file.n_head),
            ("--kv-heads", "key/value heads", file.arch == ARCH_LLAMA, m.n_kv_head, file.n_kv_head),
            ("--dim", "width", True, m.d_model, file.d_model),
            ("--ffn", "MLP width", False, m.d_ff, file.d_ff),
            ("--vocab", "vocabulary", True, m.vocab_size, file.vocab_size),
            ("--max-seq", "maximum sequence length", True, m.max_seq, file.max_seq)):
        if mine == theirs or not (given(flag) or (preset and by_preset)):
            continue
        if given(flag):
            fatal("%s %d disagrees with %s %s %d (%s): the model comes from it; drop or fix the flag" % (flag, mine, whose, what, theirs, path))
        fatal("--preset %s (%s %d) disagrees with %s %s %d (%s): the model comes from it; drop or fix the flag"
              % (c.preset, what, mine, whose, what, theirs, path))
    c.model = file
    c.arch = ARCH_NAMES[file.arch]


def apply_hf_config(c, argv):
    """config/hf_config.h hf_config_for_init(): with --init X.safetensors the model is the one X's config.json describes."""
    if not c.init_path or not is_safetensors(c.init_path):
        return
    path = hf_config_path(c.init_path)
    hf, _ = read_hf_config(path)
    take_model(c, hf, "config.json's", path, argv)
    c.preset = "config.json"


def apply_model_file(c, argv):
    """train/checkpoint.h config_from_run_files(): with --init FILE (a zeroc model file) the model is the one its header
    describes (a file that cannot be read is reported where it is loaded)."""
    if not c.init_path or is_safetensors(c.init_path):
        return
    try:
        with open(c.init_path, "rb") as f:
            h = np.frombuffer(f.read(4 * HEADER_INTS), dtype="<i4")
    except OSError:
        return
    if len(h) < HEADER_INTS or h[0] != MODEL_MAGIC or h[2] not in (ARCH_GPT2, ARCH_LLAMA):
        return
    m = ModelConfig()
    m.arch, m.n_layer, m.n_head, m.n_kv_head, m.d_model, m.d_ff, m.vocab_size, m.padded_vocab, m.max_seq = (int(x) for x in h[2:11])
    m.norm_eps = struct.unpack("<f", struct.pack("<i", int(h[11])))[0]
    m.rope_theta = struct.unpack("<f", struct.pack("<i", int(h[12])))[0]
    take_model(c, m, "the model file's", c.init_path, argv)
    c.preset = "(model file)"


class HFTensor:
    """model/hf.h HFTensor: Hugging Face tensor `name` holds rows [row0, row0 + rows) of zeroc tensor `zeroc`."""

    def __init__(self, name, spec, row0, rows, conv1d=False, rope_hd=0):
        self.name, self.zeroc, self.row0, self.rows, self.cols = name, spec, row0, rows, spec.cols
        self.conv1d, self.rope_hd, self.decay = conv1d, rope_hd, spec.decay
        self.shape = ((self.cols, rows) if conv1d else (rows, self.cols)) if spec.decay else (rows * self.cols,)

    def to_zeroc(self, a):
        """The Hugging Face array as zeroc's rows [rows, cols]: the inverse of model/hf.h hf_index()."""
        a = np.asarray(a, np.float32).reshape(self.shape)
        if self.conv1d:
            a = a.T  # Conv1D [in, out] -> Linear [out, in]
        a = a.reshape(self.rows, self.cols)
        if self.rope_hd:  # half-split row s*hd/2 + i -> interleaved row 2i + s, within each head
            hd = self.rope_hd
            a = a.reshape(self.rows // hd, 2, hd // 2, self.cols).transpose(0, 2, 1, 3).reshape(self.rows, self.cols)
        return a


def hf_tensors(c, tensors):
    """model/hf.h hf_tensors(): the table, in zeroc's flat order."""
    S = {t.full_name: t for t in tensors}
    gpt2 = c.arch == ARCH_GPT2
    hd, H, KV, Ff = c.d_model // c.n_head, c.n_head, c.n_kv_head, c.d_ff
    P = "transformer." if gpt2 else "model."
    out = [HFTensor(P + ("wte.weight" if gpt2 else "embed_tokens.weight"), S["embed.wte"], 0, c.vocab_size)]
    if gpt2:
        out.append(HFTensor(P + "wpe.weight", S["embed.wpe"], 0, c.max_seq))
    for l in range(c.n_layer):
        z = "layer%d." % l
        if gpt2:
            for zn, hn in (("ln1_w", "ln_1.weight"), ("ln1_b", "ln_1.bias"), ("qkv_w", "attn.c_attn.weight"),
                           ("qkv_b", "attn.c_attn.bias"), ("attproj_w", "attn.c_proj.weight"), ("attproj_b", "attn.c_proj.bias"),
                           ("ln2_w", "ln_2.weight"), ("ln2_b", "ln_2.bias"), ("fc_w", "mlp.c_fc.weight"), ("fc_b", "mlp.c_fc.bias"),
                           ("fcproj_w", "mlp.c_proj.weight"), ("fcproj_b", "mlp.c_proj.bias")):
                s = S[z + zn]
                out.append(HFTensor("%sh.%d.%s" % (P, l, hn), s, 0, s.rows, conv1d=bool(s.decay)))
        else:
            L = "%slayers.%d." % (P, l)
            out += [HFTensor(L + "input_layernorm.weight", S[z + "ln1_w"], 0, 1),
                    HFTensor(L + "self_attn.q_proj.weight", S[z + "qkv_w"], 0, H * hd, rope_hd=hd),
                    HFTensor(L + "self_attn.k_proj.weight", S[z + "qkv_w"], H * hd, KV * hd, rope_hd=hd),
                    HFTensor(L + "self_attn.v_proj.weight", S[z + "qkv_w"], (H + KV) * hd, KV * hd),
                    HFTensor(L + "self_attn.o_proj.weight", S[z + "attproj_w"], 0, c.d_model),
                    HFTensor(L + "post_attention_layernorm.weight", S[z + "ln2_w"], 0, 1),
                    HFTensor(L + "mlp.gate_proj.weight", S[z + "fc_w"], 0, Ff),
                    HFTensor(L + "mlp.up_proj.weight", S[z + "fc_w"], Ff, Ff),
                    HFTensor(L + "mlp.down_proj.weight", S[z + "fcproj_w"], 0, c.d_model)]
    if gpt2:
        out += [HFTensor(P + "ln_f.weight", S["final.lnf_w"], 0, 1), HFTensor(P + "ln_f.bias", S["final.lnf_b"], 0, 1)]
    else:
        out += [HFTensor(P + "norm.weight", S["final.norm_w"], 0, 1), HFTensor("lm_head.weight", S["final.lm_head"], 0, c.vocab_size)]
    return out


def load_hf(path, c):
    """model/hf.h hf_import(), for the reference: {Hugging Face name: float32 array} for the model c (from config.json)."""
    entries, data = read_safetensors(path)
    _, tied = read_hf_config(hf_config_path(path))
    hf = hf_tensors(c, build_layout(c)[0])
    gpt2 = c.arch == ARCH_GPT2
    prefix = "transformer." if gpt2 else "model."
    strip = hf[0].name not in entries and hf[0].name[len(prefix):] in entries
    out, used = {}, set()
    for h in hf:
        src = hf[0] if (tied and not gpt2 and h.name == "lm_head.weight") else h
        name = src.name[len(prefix):] if strip and src.name.startswith(prefix) else src.name
        if name not in entries:
            fatal("%s: missing tensor %s" % (path, name))
        out[h.name] = st_tensor_f32(path, name, entries[name], data, h.shape)
        used.add(name)
    for name in entries:
        if name in used or (name.endswith((".attn.bias", ".attn.masked_bias")) if gpt2 else name.endswith(".rotary_emb.inv_freq")):
            continue
        if tied and name == "lm_head.weight":
            if not np.array_equal(st_tensor_f32(path, name, entries[name], data, hf[0].shape), out[hf[0].name]):
                fatal("%s: lm_head.weight differs from the embedding, but config.json ties them (tie_word_embeddings)" % path)
            continue
        fatal("%s: unexpected tensor %s (not part of zeroc's %s)" % (path, name, ARCH_NAMES[c.arch]))
    return out


class HFModel(Model):
    """The model on Hugging Face's tensors, by their names, computing as transformers' GPT2LMHeadModel and
    LlamaForCausalLM do (Conv1D y = x W + b with W [in, out]; rotate_half RoPE; the head tied to wte in
    gpt2): what proves model/hf.h's names and layouts right, since its logits and gradients must equal zeroc's.
    Model's interface: params in the order of hf_tensors(), forward() gives [B, T, Vp] logits (padded
    columns zero), flat() and flat_grads() are in zeroc's flat order (debug state, --save)."""

    def __init__(self, cfg, arrays, device="cpu"):
        super().__init__(cfg, device)
        self.hf = hf_tensors(cfg, self.tensors)
        self.tensors = self.hf  # .decay: make_optimizer() pairs params with these
        self.names = [h.name for h in self.hf]
        self.params = [torch.from_numpy(np.array(arrays[h.name], np.float32)).to(device).requires_grad_(True) for h in self.hf]

    def _to_flat(self, arrays):
        flat = np.zeros(self.num_params, np.float32)
        for h, a in zip(self.hf, arrays):
            o = h.zeroc.offset + h.row0 * h.cols
            flat[o:o + h.rows * h.cols] = h.to_zeroc(a).reshape(-1)
        return flat

    def flat(self, tensors=None):
        return self._to_flat([p.detach().cpu().numpy() for p in (self.params if tensors is None else tensors)])

    def flat_grads(self):
        return self._to_flat([np.zeros(h.shape, np.float32) if p.grad is None else p.grad.detach().cpu().numpy()
                              for h, p in zip(self.hf, self.params)])

    def pad_vocab(self, logits):
        return F.pad(logits, (0, self.cfg.padded_vocab - self.cfg.vocab_size))

    def head(self, x, w, vocab):
        """Hugging Face's head has V rows: the logits padded to Vp with zeros, or with vocab only the first vocab"""
        return F.linear(x, w[:vocab]) if vocab is not None else self.pad_vocab(F.linear(x, w))

    def forward(self, idx, params=None, vocab=None):
        c = self.cfg
        P = self.param_dict(params)
        B, T = idx.shape
        C, H, KV = c.d_model, c.n_head, c.n_kv_head
        hd = C // H
        eps = c.norm_eps
        dev = idx.device
        causal = self.mask(T, dev)

        def attention(q, k, v, scale_div):  # [B, nh, T, hd]; transformers' eager attention
            if KV != H:  # repeat_kv
                k = k.repeat_interleave(H // KV, dim=1)
                v = v.repeat_interleave(H // KV, dim=1)
            att = torch.matmul(q, k.transpose(-2, -1))
            att = att / scale_div if scale_div else att * hd ** -0.5
            att = att.masked_fill(~causal, torch.finfo(att.dtype).min)
            return torch.matmul(torch.softmax(att, dim=-1, dtype=torch.float32), v).transpose(1, 2).reshape(B, T, C)

        if c.arch == ARCH_GPT2:
            def gelu_new(x):
                return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

            def conv1d(x, p):  # Conv1D: y = x W + b, W [in, out]
                return x @ P[p + ".weight"] + P[p + ".bias"]
            wte = P["transformer.wte.weight"]
            x = F.embedding(idx, wte) + P["transformer.wpe.weight"][:T]
            for l in range(c.n_layer):
                p = "transformer.h.%d." % l
                h = F.layer_norm(x, (C,), P[p + "ln_1.weight"], P[p + "ln_1.bias"], eps)
                q, k, v = conv1d(h, p + "attn.c_attn").split(C, dim=-1)
                q, k, v = (t.reshape(B, T, H, hd).transpose(1, 2) for t in (q, k, v))
                x = x + conv1d(attention(q, k, v, torch.full([], hd ** 0.5, dtype=q.dtype, device=dev)), p + "attn.c_proj")
                h = F.layer_norm(x, (C,), P[p + "ln_2.weight"], P[p + "ln_2.bias"], eps)
                x = x + conv1d(gelu_new(conv1d(h, p + "mlp.c_fc")), p + "mlp.c_proj")
            x = F.layer_norm(x, (C,), P["transformer.ln_f.weight"], P["transformer.ln_f.bias"], eps)
            return self.head(x, wte, vocab)

        def rmsnorm(x, w):  # LlamaRMSNorm
            return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

        def rotate_half(x):
            return torch.cat((-x[..., hd // 2:], x[..., :hd // 2]), dim=-1)
        # LlamaRotaryEmbedding (default rope type): inv_freq over even indices, cos/sin of cat(freqs, freqs)
        inv_freq = 1.0 / (float(c.rope_theta) ** (torch.arange(0, hd, 2, dtype=torch.int64, device=dev).float() / hd))
        freqs = torch.arange(T, device=dev).float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = F.embedding(idx, P["model.embed_tokens.weight"])
        for l in range(c.n_layer):
            p = "model.layers.%d." % l
            h = rmsnorm(x, P[p + "input_layernorm.weight"])
            q = F.linear(h, P[p + "self_attn.q_proj.weight"]).reshape(B, T, H, hd).transpose(1, 2)
            k = F.linear(h, P[p + "self_attn.k_proj.weight"]).reshape(B, T, KV, hd).transpose(1, 2)
            v = F.linear(h, P[p + "self_attn.v_proj.weight"]).reshape(B, T, KV, hd).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            x = x + F.linear(attention(q, k, v, None), P[p + "self_attn.o_proj.weight"])
            h = rmsnorm(x, P[p + "post_attention_layernorm.weight"])
            m = F.silu(F.linear(h, P[p + "mlp.gate_proj.weight"])) * F.linear(h, P[p + "mlp.up_proj.weight"])
            x = x + F.linear(m, P[p + "mlp.down_proj.weight"])
        x = rmsnorm(x, P["model.norm.weight"])
        return self.head(x, P["lm_head.weight"], vocab)


# ----------------------------------------------------------------------------
# training


def make_optimizer(model, c, lr):
    # nanoGPT's parameter groups: every tensor of 2 or more dimensions decays (matrices and
    # embeddings), biases and norms do not; test_gpt.c checks zeroc's decay flags against them
    decay = [p for p in model.params if p.dim() >= 2]
    no_decay = [p for p in model.params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": c.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # adam_w_mode 0: DeepSpeed's Adam with L2 weight decay (added to the gradient) == torch.optim.Adam
    adam = torch.optim.AdamW if c.adam_w_mode else torch.optim.Adam
    return adam(groups, lr=lr, betas=(c.beta1, c.beta2), eps=c.eps)


def clip_and_norm(model, clip):
    """Global L2 norm of the gradient before clipping, accumulated in float64 (torch 1.13's float32
    norm kernels are off by up to ~1e-5 relative on large tensors); then, if clip > 0, the gradient is
    scaled by min(1, clip / (norm + 1e-6)) as torch.nn.utils.clip_grad_norm_ and docs/model.md do."""
    grads = [p.grad for p in model.params if p.grad is not None]
    if not grads:
        return 0.0
    sq = torch.stack([torch.linalg.vector_norm(g.detach(), 2, dtype=torch.float64) for g in grads]).pow(2).sum()
    norm = float(torch.sqrt(sq))
    if clip > 0:
        coef = clip / (norm + 1e-6)
        if coef < 1.0:
            coef = f32(coef)
            for g in grads:
                g.detach().mul_(coef)
    return norm


def set_lr(opt, lr):
    for g in opt.param_groups:
        g["lr"] = lr


def to_device(a, device):
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(device)


def sync(device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def write_debug_state(c, model, loader, device, log):
    """docs/model.md debug state: one micro-batch of world*B sequences, then 10 AdamW steps on it."""
    n_steps = 10
    x, y = loader.next()
    Bt, T = x.shape
    xi, yi = to_device(x, device), to_device(y, device)
    for p in model.params:
        p.grad = None
    logits = model.forward(xi)
    loss = model.loss(logits, yi)
    loss.backward()
    logits_np = logits.detach().cpu().numpy().astype("<f4").reshape(-1)
    loss0 = np.float32(loss.item())
    grads = model.flat_grads().astype("<f4")
    del logits
    opt = make_optimizer(model, c, c.lr)
    losses = []
    for i in range(n_steps):
        opt.zero_grad(set_to_none=True)
        l = model.loss(model.forward(xi), yi)
        l.backward()
        losses.append(l.item())
        clip_and_norm(model, c.grad_clip)
        set_lr(opt, c.lr)
        opt.step()
        log("debug-state step %d: loss %.6f" % (i + 1, losses[-1]))
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[0:6] = [DEBUG_MAGIC, DEBUG_VERSION, Bt, T, c.model.padded_vocab, n_steps]
    h[6] = np.uint32(model.num_params & 0xFFFFFFFF).view(np.int32)
    h[7] = np.uint32(model.num_params >> 32).view(np.int32)
    for k, v in enumerate([c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, c.grad_clip]):
        h[8 + k] = _fbits(v)
    write_atomic(c.debug_state, [h.tobytes(), x.astype("<i4").tobytes(), y.astype("<i4").tobytes(),
                                 logits_np.tobytes(), np.array([loss0], "<f4").tobytes(), grads.tobytes(),
                                 np.array(losses, "<f4").tobytes()])
    # beside it: the parameters after the steps, and which tensors decayed (test_gpt.c compares both per tensor)
    write_atomic(c.debug_state + ".params", [model.flat().astype("<f4").tobytes()])
    # nanoGPT's groups (dim >= 2 decays) by zeroc tensor; an HF model's parameters map onto zeroc's by .zeroc
    decays = {getattr(t, "zeroc", t).full_name: p.dim() >= 2 for t, p in zip(model.tensors, model.params)}
    groups = "".join("%s %d\n" % (t.full_name, decays[t.full_name]) for t in model.layout[0])
    write_atomic(c.debug_state + ".decay", [groups.encode()])
    log("wrote %s: B %d, T %d, Vp %d, %d params, loss %.6f" % (c.debug_state, Bt, T, c.model.padded_vocab,
                                                                model.num_params, float(loss0)))


def run(argv):
    c = parse_args(argv)
    m = c.model
    quiet = bool(c.quiet)

    def log(s):
        if not quiet:
            print(s, flush=True)

    ignored = [f for f, on in (("--resume", c.resume_dir), ("--save-every", c.save_every), ("--keep-last", c.keep_last), ("--sample-every", c.sample_every),
                               ("--offload", c.offload), ("--offload-param", c.offload_param)) if on] + c.sampling_flags + c.monitor_flags
    if ignored:
        log("note: the reference ignores %s" % ", ".join(ignored))
    # check every file before the (slow) torch import
    layout = build_layout(m)
    num_params = layout[1]
    hf_init = bool(c.init_path) and is_safetensors(c.init_path)
    hf_arrays = load_hf(c.init_path, m) if hf_init else None
    flat0 = load_model(c.init_path, m, num_params) if c.init_path and not hf_init else None
    BW = c.B * c.world
    need_train = c.steps > 0 or bool(c.debug_state)
    train = DataLoader(c.train_path, BW, c.T, m.vocab_size, shuffle=c.shuffle, seed=c.seed) if need_train else None
    val = DataLoader(c.val_path, BW, c.T, m.vocab_size) if (c.val_every > 0 and c.steps > 0 and not c.debug_state) else None
    if c.debug_state:
        d = os.path.dirname(c.debug_state)
        try:
            if d:
                os.makedirs(d, exist_ok=True)
            open(c.debug_state + ".tmp", "wb").close()
        except OSError as e:
            fatal("%s: cannot write (%s)" % (c.debug_state, e.strerror))
    logf = None
    if c.log_path and not c.debug_state:
        d = os.path.dirname(c.log_path)
        try:
            if d:
                os.makedirs(d, exist_ok=True)
            logf = open(c.log_path, "w")
        except OSError as e:
            fatal("%s: cannot open (%s)" % (c.log_path, e.strerror))

    load_torch()
    device = c.device
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            fatal("--device %s: CUDA is not available" % device)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision("highest")
    if c.threads > 0:
        torch.set_num_threads(c.threads)

    if hf_init:  # the model on Hugging Face's tensors, computing as transformers does
        model = HFModel(m, hf_arrays, device)
        del hf_arrays
        log("loaded %d parameters from %s (Hugging Face names and layouts)" % (num_params, c.init_path))
    else:
        model = Model(m, device)
        if flat0 is None:
            t0 = time.time()
            flat0 = init_params(layout, c.seed)
            log("initialized %d parameters from seed %d in %.1f s" % (num_params, c.seed, time.time() - t0))
        else:
            log("loaded %d parameters from %s" % (num_params, c.init_path))
        model.set_flat(flat0)
        del flat0
    log("model %s, %d parameters" % (m.describe(), num_params))

    if c.debug_state:
        write_debug_state(c, model, train, device, log)
        return 0

    log("train %s: %d tokens; B %d x world %d x T %d x accum %d = %d tokens/step, %d steps, torch %s on %s, %d threads"
        % (c.train_path, train.n_tokens if train else 0, c.B, c.world, c.T, c.accum, c.total_batch * c.T, c.steps,
           torch.__version__, device, torch.get_num_threads()))
    opt = make_optimizer(model, c, lr_at(c, 0, lr_total_steps(c)))

    def emit(rec):
        if logf:
            logf.write(json.dumps(rec) + "\n")
            logf.flush()

    def evaluate(eval_params):
        val.reset()
        tot = 0.0
        with torch.no_grad():
            for _ in range(c.val_batches):
                x, y = val.next()
                tot += model.loss(model.forward(to_device(x, device), eval_params, vocab=m.vocab_size), to_device(y, device)).item()
        return tot / max(1, c.val_batches)

    tokens_per_step = c.total_batch * c.T
    # DPU: `stale` holds the parameters before the last update while that update is delayed;
    # the passes read them, their gradient goes to the current parameters' update
    stale = None
    applied = 0
    for step in range(1, c.steps + 1):
        sync(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for _ in range(c.accum):
            x, y = train.next()
            loss = model.loss(model.forward(to_device(x, device), stale, vocab=m.vocab_size), to_device(y, device))
            (loss / c.accum).backward()
            loss_sum += loss.item()
        if stale is not None:
            for p, q in zip(model.params, stale):
                p.grad = q.grad
        step_loss = loss_sum / c.accum
        norm = clip_and_norm(model, c.grad_clip)
        lr = lr_at(c, applied, lr_total_steps(c))
        set_lr(opt, lr)
        skip = step in c.skip_steps
        delayed = c.offload_dpu and applied + 1 > c.dpu_warmup and not skip
        stale = [p.detach().clone().requires_grad_(True) for p in model.params] if delayed else None
        if not skip:
            opt.step()
            applied += 1
        sync(device)
        dt = time.perf_counter() - t0
        tps = tokens_per_step / dt if dt > 0 else 0.0
        emit({"type": "train", "step": step, "loss": step_loss, "lr": lr, "grad_norm": norm,
              "tokens_per_sec": tps, "ms": dt * 1000.0})
        log("step %d/%d | loss %.6f | lr %.2e | norm %.4f | %.1f ms | %.0f tok/s"
            % (step, c.steps, step_loss, lr, norm, dt * 1000.0, tps))
        if c.val_every > 0 and (step % c.val_every == 0 or step == c.steps):
            vl = evaluate(stale if step < c.steps else None)   # DPU: the last step's update lands before
            emit({"type": "val", "step": step, "val_loss": vl})
            log("step %d/%d | val loss %.6f" % (step, c.steps, vl))
    if logf:
        logf.close()
    if c.save_dir:
        try:
            os.makedirs(c.save_dir, exist_ok=True)
        except OSError as e:
            fatal("%s: cannot create directory (%s)" % (c.save_dir, e.strerror))
        path = os.path.join(c.save_dir, "model.bin")
        save_model(path, m, model.flat())
        log("saved %s" % path)
    return 0


def main():
    try:
        return run(sys.argv)
    except Fatal as e:
        sys.stdout.flush()
        print("error: %s" % e, file=sys.stderr, flush=True)
        return 1
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return 1
    except OSError as e:
        print("error: %s: %s" % (e.filename or "I/O", e.strerror or e), file=sys.stderr, flush=True)
        return 1
    except MemoryError:
        print("error: out of memory", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
