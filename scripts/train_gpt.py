#!/usr/bin/env python3
"""scripts/train_gpt.py: the PyTorch reference trainer of zeroc.

Computes exactly what docs/model.md specifies (gpt2 and llama), with the
parameter layout of model.h, the data order of dataloader.h and the flags,
defaults and learning-rate schedules of config.h, so that its losses,
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

import numpy as np

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
# config.h: presets, defaults, schedules, flags

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

SCHED_COSINE, SCHED_CONSTANT, SCHED_WARMUP_LR, SCHED_WARMUP_DECAY_LR = 0, 1, 2, 3
SCHED_NAMES = ["cosine", "constant", "WarmupLR", "WarmupDecayLR"]


def round_up(x, m):
    return (x + m - 1) // m * m


def default_ffn(arch, C):
    # C integer division as in config.h: round_up(8 * C / 3, 64)
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
    """train_config_defaults() of config.h; float fields hold float32 values."""

    def __init__(self):
        self.model = ModelConfig()
        self.arch, self.preset = "gpt2", "tiny"
        self.train_path, self.val_path = "data/brown/train.bin", "data/brown/val.bin"
        self.shuffle = 0
        self.tokenizer_path = "data/gpt2_tokenizer.bin"
        self.B, self.T, self.accum, self.total_batch, self.steps = 4, 64, 1, 0, 50
        self.lr, self.beta1, self.beta2 = f32(6e-4), f32(0.9), f32(0.95)
        self.eps, self.weight_decay, self.grad_clip = f32(1e-8), f32(0.1), f32(1.0)
        self.sched, self.warmup, self.warmup_log, self.min_lr_frac = SCHED_COSINE, 0, 0, f32(0.1)
        self.seed = 1337
        self.init_path = self.save_dir = self.resume_dir = self.log_path = self.config_path = ""
        self.save_every, self.threads = 0, 0
        self.val_every, self.val_batches, self.sample_every, self.sample_len = 0, 8, 0, 64
        self.quiet = 0
        self.zero_stage = -1
        self.persistence_threshold, self.max_live_elems = 100000, 1000000000
        self.prefetch, self.offload, self.offload_param, self.comm = 1, 0, 0, "nccl"
        # reference-only
        self.device = "cpu"
        self.world = 1
        self.debug_state = ""


def lr_at(c, it, total):
    """config.h lr_at(): learning rate of 0-based step `it` of `total`, computed in double, returned as float32."""
    lr, W = float(c.lr), float(c.warmup)
    if c.sched == SCHED_CONSTANT:
        return f32(lr)
    if c.sched == SCHED_COSINE:
        if it < c.warmup:
            return f32(lr * (it + 1) / W)
        min_lr = lr * float(c.min_lr_frac)
        if total <= c.warmup + 1:
            return f32(lr)
        ratio = float(it - c.warmup) / float(total - 1 - c.warmup)
        if ratio > 1:
            ratio = 1.0
        return f32(min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr))
    min_lr = lr * float(c.min_lr_frac)
    if it < c.warmup:
        gamma = math.log(it + 1.0) / math.log(W) if c.warmup_log else it / W
        return f32(min_lr + (lr - min_lr) * gamma)
    if c.sched == SCHED_WARMUP_LR:
        return f32(lr)
    frac = float(total - it) / float(total - c.warmup)
    if frac < 0:
        frac = 0.0
    return f32(lr * frac)


HELP = """usage: %s [flags]

PyTorch reference trainer (docs/model.md); flags as train_gpt_cpu.
model
  --arch gpt2|llama        architecture (default gpt2)
  --preset NAME            model size preset (default tiny):
%s
  --layers N --heads N --kv-heads N --dim N --ffn N --vocab N --max-seq N
                           override one size of the preset
data
  --train PATH --val PATH  a token shard, a directory of shards or a glob (default data/brown/{train,val}.bin)
  --shuffle 0|1            shuffle shard order and sequences each epoch, seeded by --seed (default 0)
  --batch B                micro batch per rank (default 4)
  --seq T                  sequence length (default 64)
  --accum K                gradient accumulation steps (default 1)
  --total-batch N          global sequences per step; sets --accum = N / (B * world)
optimizer and schedule
  --steps N --lr X --beta1 X --beta2 X --eps X --weight-decay X --clip X (0: off)
  --lr-schedule cosine|constant|WarmupLR|WarmupDecayLR  --warmup N
  --warmup-type linear|log --min-lr-frac X
run
  --seed S --init FILE --save DIR (writes DIR/model.bin) --log FILE
  --threads N --val-every N --val-batches N
  --sample-every N --sample-len N (accepted; the reference does not sample)
  --config FILE (DeepSpeed-style JSON) --quiet 0|1
  accepted and ignored: --save-every --resume --tokenizer --zero-stage
  --persistence-threshold --max-live --prefetch --offload --comm
reference only
  --device cpu|cuda        (default cpu; TF32 disabled)
  --world N                simulate N data-parallel ranks: micro batch N*B
  --debug-state FILE       one batch: logits, loss, grads and 10 AdamW losses; then exit
"""

_INT_CHARS = set("0123456789")


def parse_int_or_die(flag, s, lo, hi):
    t = s.lstrip(" \t\n")
    body = t[1:] if t[:1] in "+-" else t
    if not body or any(ch not in _INT_CHARS for ch in body) or not (lo <= int(t) <= hi):
        fatal("%s: expected an integer in [%d, %d], got '%s'" % (flag, lo, hi, s))
    return int(t)


def parse_ll_or_die(flag, s):
    try:
        v = float(s)
    except ValueError:
        v = None
    if v is None or not math.isfinite(v) or v < 0 or v > 9e18:
        fatal("%s: expected a non-negative count, got '%s'" % (flag, s))
    return int(v)


def parse_float_or_die(flag, s):
    try:
        v = float(s)
        v32 = np.float32(v) if math.isfinite(v) else None
    except (ValueError, OverflowError):
        v32 = None
    if v32 is None or not np.isfinite(v32):
        fatal("%s: expected a number, got '%s'" % (flag, s))
    return float(v32)


def sched_from_name(flag, s):
    if s in SCHED_NAMES:
        return SCHED_NAMES.index(s)
    fatal("%s: unknown schedule '%s' (cosine, constant, WarmupLR, WarmupDecayLR)" % (flag, s))


def apply_json_config(c, path):
    """config.h apply_json_config(): the DeepSpeed-style keys the C trainer honours."""
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

    def jnum(obj, key):
        if not isinstance(obj, dict) or key not in obj:
            return None
        v = obj[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            fatal('%s: "%s" must be a number' % (path, key))
        return v

    def jint(v):
        return int(v)

    if (v := jnum(root, "train_micro_batch_size_per_gpu")) is not None: c.B = jint(v)
    if (v := jnum(root, "gradient_accumulation_steps")) is not None: c.accum = jint(v)
    if (v := jnum(root, "train_batch_size")) is not None: c.total_batch = jint(v)
    if (v := jnum(root, "gradient_clipping")) is not None: c.grad_clip = f32(v)
    zo = root.get("zero_optimization")
    if isinstance(zo, dict):
        if (v := jnum(zo, "stage")) is not None: c.zero_stage = jint(v)
        if (v := jnum(zo, "stage3_param_persistence_threshold")) is not None: c.persistence_threshold = int(v)
        if (v := jnum(zo, "stage3_max_live_parameters")) is not None: c.max_live_elems = int(v)
        if "overlap_comm" in zo: c.prefetch = 1 if zo["overlap_comm"] is True else 0
        off = zo.get("offload_optimizer")
        if isinstance(off, dict) and isinstance(off.get("device"), str): c.offload = int(off["device"] == "cpu")
    opt = root.get("optimizer")
    op = opt.get("params") if isinstance(opt, dict) else None
    if isinstance(op, dict):
        if (v := jnum(op, "lr")) is not None: c.lr = f32(v)
        if (v := jnum(op, "eps")) is not None: c.eps = f32(v)
        if (v := jnum(op, "weight_decay")) is not None: c.weight_decay = f32(v)
        if "betas" in op:
            b = op["betas"]
            if not isinstance(b, list) or len(b) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in b):
                fatal('%s: "betas" must be an array of two numbers' % path)
            c.beta1, c.beta2 = f32(b[0]), f32(b[1])
    sc = root.get("scheduler")
    if isinstance(sc, dict):
        if isinstance(sc.get("type"), str): c.sched = sched_from_name(path, sc["type"])
        sp = sc.get("params")
        if isinstance(sp, dict):
            if (v := jnum(sp, "warmup_max_lr")) is not None: c.lr = f32(v)
            if (v := jnum(sp, "warmup_num_steps")) is not None: c.warmup = jint(v)
            if (v := jnum(sp, "warmup_min_lr")) is not None: c.min_lr_frac = f32(v / c.lr) if c.lr > 0 else 0.0
            if (v := jnum(sp, "total_num_steps")) is not None: c.steps = jint(v)
            if isinstance(sp.get("warmup_type"), str): c.warmup_log = int(sp["warmup_type"] == "log")


def parse_args(argv):
    """Mirror of config.h parse_args() + config_resolve_batch(world)."""
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
        elif a == "--batch": c.B = parse_int_or_die(a, v, 1, 1 << 20)
        elif a == "--seq": c.T = parse_int_or_die(a, v, 1, 1 << 20)
        elif a == "--accum": c.accum = parse_int_or_die(a, v, 1, 1 << 20)
        elif a == "--total-batch": c.total_batch = parse_int_or_die(a, v, 1, 1 << 30)
        elif a == "--steps": c.steps = parse_int_or_die(a, v, 0, 1 << 30)
        elif a == "--lr": c.lr = parse_float_or_die(a, v)
        elif a == "--beta1": c.beta1 = parse_float_or_die(a, v)
        elif a == "--beta2": c.beta2 = parse_float_or_die(a, v)
        elif a == "--eps": c.eps = parse_float_or_die(a, v)
        elif a == "--weight-decay": c.weight_decay = parse_float_or_die(a, v)
        elif a == "--clip": c.grad_clip = parse_float_or_die(a, v)
        elif a == "--lr-schedule": c.sched = sched_from_name(a, v)
        elif a == "--warmup": c.warmup = parse_int_or_die(a, v, 0, 1 << 30)
        elif a == "--warmup-type":
            if v not in ("log", "linear"):
                fatal("%s: expected linear or log, got '%s'" % (a, v))
            c.warmup_log = int(v == "log")
        elif a == "--min-lr-frac": c.min_lr_frac = parse_float_or_die(a, v)
        elif a == "--seed": c.seed = parse_ll_or_die(a, v)
        elif a == "--init": c.init_path = v
        elif a == "--save": c.save_dir = v
        elif a == "--save-every": c.save_every = parse_int_or_die(a, v, 0, 1 << 30)
        elif a == "--resume": c.resume_dir = v
        elif a == "--log": c.log_path = v
        elif a == "--threads": c.threads = parse_int_or_die(a, v, 0, 4096)
        elif a == "--val-every": c.val_every = parse_int_or_die(a, v, 0, 1 << 30)
        elif a == "--val-batches": c.val_batches = parse_int_or_die(a, v, 0, 1 << 20)
        elif a == "--sample-every": c.sample_every = parse_int_or_die(a, v, 0, 1 << 30)
        elif a == "--sample-len": c.sample_len = parse_int_or_die(a, v, 1, 1 << 20)
        elif a == "--tokenizer": c.tokenizer_path = v
        elif a == "--quiet": c.quiet = parse_int_or_die(a, v, 0, 1)
        elif a == "--zero-stage": c.zero_stage = parse_int_or_die(a, v, 0, 3)
        elif a == "--persistence-threshold": c.persistence_threshold = parse_ll_or_die(a, v)
        elif a == "--max-live": c.max_live_elems = parse_ll_or_die(a, v)
        elif a == "--prefetch": c.prefetch = parse_int_or_die(a, v, 0, 1)
        elif a == "--offload": c.offload = parse_int_or_die(a, v, 0, 1)
        elif a == "--offload-param": c.offload_param = parse_int_or_die(a, v, 0, 1)
        elif a == "--estimate-memory": fatal("--estimate-memory: a flag of the C trainers (./train_gpt_cpu --estimate-memory N)")
        elif a == "--comm":
            if v not in ("nccl", "mpi"):
                fatal("%s: expected nccl or mpi, got '%s'" % (a, v))
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
    if arch == ARCH_GPT2 and m.n_kv_head != m.n_head:
        if "--kv-heads" in argv[1:-1]:
            fatal("--kv-heads: gpt2 uses n_kv_heads == n_heads")
        m.n_kv_head = m.n_head
    if m.d_model % m.n_head: fatal("--dim %d is not divisible by --heads %d" % (m.d_model, m.n_head))
    if m.n_head % m.n_kv_head: fatal("--heads %d is not divisible by --kv-heads %d" % (m.n_head, m.n_kv_head))
    if arch == ARCH_LLAMA and (m.d_model // m.n_head) % 2:
        fatal("llama: head dimension %d must be even for RoPE" % (m.d_model // m.n_head))
    if c.T > m.max_seq: fatal("--seq %d exceeds the model's maximum sequence length %d (--max-seq)" % (c.T, m.max_seq))
    if c.lr < 0: fatal("--lr must be >= 0")
    if c.beta1 < 0 or c.beta1 >= 1 or c.beta2 < 0 or c.beta2 >= 1: fatal("--beta1/--beta2 must be in [0, 1)")
    if c.sched >= SCHED_WARMUP_LR and c.warmup_log and c.warmup < 2: fatal("--warmup-type log needs --warmup >= 2")
    if c.sched == SCHED_WARMUP_DECAY_LR and c.steps <= c.warmup: fatal("WarmupDecayLR needs --steps > --warmup")
    # config_resolve_batch(c, world)
    if c.total_batch > 0:
        per = c.B * c.world
        if c.total_batch % per:
            fatal("--total-batch %d is not divisible by micro batch %d x world size %d" % (c.total_batch, c.B, c.world))
        c.accum = c.total_batch // per
    c.total_batch = c.B * c.accum * c.world
    return c


# ----------------------------------------------------------------------------
# model.h: the parameter layout


class TensorSpec:
    def __init__(self, unit, name, rows, cols, decay, init_std, init_value, valid_rows):
        self.unit, self.name = unit, name
        self.full_name = "%s.%s" % (unit, name)
        self.rows, self.cols, self.numel = rows, cols, rows * cols
        self.decay, self.init_std, self.init_value, self.valid_rows = decay, init_std, init_value, valid_rows
        self.offset = 0  # flat offset

    @property
    def shape(self):
        # 2-D tensors as [rows, cols]; 1-D tensors (rows == 1, decay 0) as [cols]
        return (self.rows, self.cols) if self.decay else (self.numel,)


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
# common.h: splitmix64 + Box-Muller, bit for bit, vectorized with numpy

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
    """n float32 normals from stream outputs start .. start+2n-1, exactly as rng_normal() in common.h.

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
    try:
        size = os.path.getsize(path)
        f = open(path, "rb")
    except OSError as e:
        fatal("%s: cannot open (%s)" % (path, e.strerror))
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
    try:
        size = os.path.getsize(path)
        f = open(path, "rb")
    except OSError as e:
        fatal("%s: cannot open (%s)" % (path, e.strerror))
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

    def forward(self, idx, params=None):
        """Logits [B, T, Vp] for token ids idx [B, T] (int64 tensor)."""
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
            return F.linear(x, wte)
        x = rmsnorm(x, P["final.norm_w"])
        return F.linear(x, P["final.lm_head"])

    def loss(self, logits, targets):
        """Mean cross-entropy over the first V logits (padded columns excluded from the softmax)."""
        V = self.cfg.vocab_size
        return F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))


# ----------------------------------------------------------------------------
# training


def make_optimizer(model, c, lr):
    decay = [p for p, t in zip(model.params, model.tensors) if t.decay]
    no_decay = [p for p, t in zip(model.params, model.tensors) if not t.decay]
    groups = [{"params": decay, "weight_decay": c.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(c.beta1, c.beta2), eps=c.eps)


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
    log("wrote %s: B %d, T %d, Vp %d, %d params, loss %.6f" % (c.debug_state, Bt, T, c.model.padded_vocab,
                                                                model.num_params, float(loss0)))


def run(argv):
    c = parse_args(argv)
    m = c.model
    quiet = bool(c.quiet)

    def log(s):
        if not quiet:
            print(s, flush=True)

    ignored = [f for f, on in (("--resume", c.resume_dir), ("--save-every", c.save_every), ("--sample-every", c.sample_every),
                               ("--offload", c.offload), ("--offload-param", c.offload_param)) if on]
    if ignored:
        log("note: the reference ignores %s" % ", ".join(ignored))
    # check every file before the (slow) torch import
    layout = build_layout(m)
    num_params = layout[1]
    flat0 = load_model(c.init_path, m, num_params) if c.init_path else None
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
    opt = make_optimizer(model, c, lr_at(c, 0, c.steps))

    def emit(rec):
        if logf:
            logf.write(json.dumps(rec) + "\n")
            logf.flush()

    def evaluate():
        val.reset()
        tot = 0.0
        with torch.no_grad():
            for _ in range(c.val_batches):
                x, y = val.next()
                tot += model.loss(model.forward(to_device(x, device)), to_device(y, device)).item()
        return tot / max(1, c.val_batches)

    tokens_per_step = c.total_batch * c.T
    for step in range(1, c.steps + 1):
        sync(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for _ in range(c.accum):
            x, y = train.next()
            loss = model.loss(model.forward(to_device(x, device)), to_device(y, device))
            (loss / c.accum).backward()
            loss_sum += loss.item()
        step_loss = loss_sum / c.accum
        norm = clip_and_norm(model, c.grad_clip)
        lr = lr_at(c, step - 1, c.steps)
        set_lr(opt, lr)
        opt.step()
        sync(device)
        dt = time.perf_counter() - t0
        tps = tokens_per_step / dt if dt > 0 else 0.0
        emit({"type": "train", "step": step, "loss": step_loss, "lr": lr, "grad_norm": norm,
              "tokens_per_sec": tps, "ms": dt * 1000.0})
        log("step %d/%d | loss %.6f | lr %.2e | norm %.4f | %.1f ms | %.0f tok/s"
            % (step, c.steps, step_loss, lr, norm, dt * 1000.0, tps))
        if c.val_every > 0 and (step % c.val_every == 0 or step == c.steps):
            vl = evaluate()
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
