#!/usr/bin/env bash
# Self-tests of the PyTorch reference trainer (scripts/train_gpt.py) that need no C trainer:
#   (a) the numpy splitmix64/Box-Muller init equals a scalar pure-Python model_init_params, bit for bit
#   (b) both architectures: the forward equals an independent loop-by-loop numpy implementation of
#       docs/model.md, and autograd equals finite differences (gradcheck, float64)
#   (c) the data order of dataloader.h, --world N == N ranks, world/accum equivalence
#   (d) lr_at() of config/lr_schedule.h at hand-computed points, all five schedules
#   (e) bad inputs give one-line errors naming the file or flag
#   plus: --save/--init round trip and the --debug-state file layout.
# Exit 0 pass, 77 skip (no torch), 1 fail.
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-/usr/bin/python3}
if ! "$PY" -c "import torch, numpy" 2>/dev/null; then
    echo "skip: $PY cannot import torch and numpy"
    exit 77
fi
TMP=$(mktemp -d /tmp/test_torch_ref.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
export TMP OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec "$PY" - <<'EOF'
import math, os, struct, subprocess, sys, json, time
import numpy as np
sys.path.insert(0, "scripts")
import train_gpt as R

TMP = os.environ["TMP"]
PY = sys.executable
SCRIPT = "scripts/train_gpt.py"
failures = []
t_start = time.time()


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


# ---------------------------------------------------------------------------
# (a) init: scalar reimplementation of util/common.h / model/model.h
M64 = (1 << 64) - 1


class ScalarRng:
    def __init__(self, seed):
        self.s = seed & M64

    def u64(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def normal(self):
        u1 = ((self.u64() >> 11) + 1.0) * (1.0 / 9007199254740993.0)
        u2 = (self.u64() >> 11) * (1.0 / 9007199254740992.0)
        return np.float32(math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2))


def scalar_init(tensors, total, seed):
    rng = ScalarRng(seed)
    out = np.zeros(total, np.float32)
    for t in tensors:
        valid = t.valid_rows * t.cols
        for i in range(t.numel):
            if i >= valid:
                v = np.float32(0)
            elif t.init_std > 0:
                v = np.float32(t.init_std) * rng.normal()
            else:
                v = np.float32(t.init_value)
            out[t.offset + i] = v
    return out


# known splitmix64 outputs (seed 1234567: the reference values of Vigna's splitmix64.c)
r = ScalarRng(1234567)
first = [r.u64() for _ in range(3)]
check(first == [6457827717110365317, 3203168211198807973, 9817491932198370423], "scalar splitmix64 matches published values")
check([int(v) for v in R.splitmix64_block(1234567, 0, 3)] == first, "numpy splitmix64 matches the scalar stream")
for seed in (0, 1337, 2 ** 63 + 12345):
    r = ScalarRng(seed)
    a = np.array([r.normal() for _ in range(20000)], np.float32)
    b = R.normals_block(seed, 0, 20000)
    check(np.array_equal(a.view(np.uint32), b.view(np.uint32)), "seed %d: 20000 numpy normals bit-identical to the scalar ones" % seed)
r = ScalarRng(7)
for _ in range(2 * 1000):
    r.u64()
a = np.array([r.normal() for _ in range(3000)], np.float32)
check(np.array_equal(a, R.normals_block(7, 2000, 3000)), "numpy normals at a stream offset")
big = R.normals_block(99, 0, 1 << 20)
check(abs(big.mean()) < 0.005 and abs(big.std() - 1) < 0.005, "normals: mean %.4f std %.4f" % (big.mean(), big.std()))

for arch in ("gpt2", "llama"):
    c = R.parse_args(["x", "--arch", arch, "--vocab", "200", "--layers", "2", "--dim", "32", "--heads", "4", "--max-seq", "16", "--seq", "16"])
    tensors, total = R.build_layout(c.model)
    a = scalar_init(tensors, total, 4242)
    b = R.init_params((tensors, total), 4242)
    check(np.array_equal(a.view(np.uint32), b.view(np.uint32)), "%s: init_params bit-identical to the scalar model_init_params (%d params)" % (arch, total))
# per-tensor statistics of a bigger model
c = R.parse_args(["x", "--arch", "gpt2", "--preset", "small"])
tensors, total = R.build_layout(c.model)
flat = R.init_params((tensors, total), 1337)
ok = True
for t in tensors:
    p = flat[t.offset:t.offset + t.numel].reshape(t.rows, t.cols)
    if t.init_std > 0:
        s = p[:t.valid_rows].std()
        ok &= abs(s / t.init_std - 1) < 0.05
        ok &= not p[t.valid_rows:].any()
    else:
        ok &= bool(np.all(p == t.init_value))
check(ok, "gpt2 small: stds 0.02 and 0.02/sqrt(2L) (%.5f), padded rows 0, norms 1, biases 0" % (0.02 / math.sqrt(8)))
names = [t.full_name for t in tensors]
check(names[:3] == ["embed.wte", "embed.wpe", "layer0.ln1_w"] and names[-2:] == ["final.lnf_w", "final.lnf_b"]
      and total == 50304 * 128 + 128 * 128 + 4 * (12 * 128 * 128 + 13 * 128) + 256, "gpt2 layout: names, order, count %d" % total)
c = R.parse_args(["x", "--arch", "llama", "--preset", "gpt2-124m"])
tensors, total = R.build_layout(c.model)
C, F_, hd = 768, c.model.d_ff, 64
check(F_ == 2048 and [t.full_name for t in tensors[1:6]] == ["layer0.ln1_w", "layer0.qkv_w", "layer0.attproj_w", "layer0.ln2_w", "layer0.fc_w"]
      and tensors[2].rows == (12 + 8) * 64 and tensors[5].rows == 2 * F_ and tensors[-1].full_name == "final.lm_head",
      "llama layout: d_ff %d, qkv rows (H+2KV)hd, fused fc_w [2F,C], untied lm_head" % F_)

# ---------------------------------------------------------------------------
# (b) forward vs an independent numpy implementation; gradcheck
import torch
R.load_torch()


def ref_forward(cfg, P, idx, targets):
    """docs/model.md, loop by loop, float64."""
    B, T = idx.shape
    C, H, KV, Fd, V = cfg.d_model, cfg.n_head, cfg.n_kv_head, cfg.d_ff, cfg.vocab_size
    hd = C // H
    eps = float(np.float32(1e-5))
    gpt2 = cfg.arch == 0

    def layernorm(x, w, b):
        mu = x.mean()
        var = ((x - mu) ** 2).mean()
        return (x - mu) / math.sqrt(var + eps) * w + b

    def rmsnorm(x, w):
        return x / math.sqrt((x * x).mean() + eps) * w

    def rope(e, t):
        out = e.copy()
        for i in range(hd // 2):
            freq = np.float32(1.0) / np.float32(math.pow(10000.0, float(np.float32(2 * i) / np.float32(hd))))
            ang = float(np.float32(t) * freq)
            cs, sn = math.cos(ang), math.sin(ang)
            out[2 * i] = e[2 * i] * cs - e[2 * i + 1] * sn
            out[2 * i + 1] = e[2 * i] * sn + e[2 * i + 1] * cs
        return out

    gelu = lambda u: 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
    silu = lambda g: g / (1 + np.exp(-g))
    logits = np.zeros((B, T, cfg.padded_vocab))
    losses = []
    for b in range(B):
        x = np.stack([P["embed.wte"][idx[b, t]] + (P["embed.wpe"][t] if gpt2 else 0) for t in range(T)])
        for l in range(cfg.n_layer):
            g = lambda n: P["layer%d.%s" % (l, n)]
            q = np.zeros((T, H, hd)); k = np.zeros((T, KV, hd)); v = np.zeros((T, KV, hd))
            for t in range(T):
                h = layernorm(x[t], g("ln1_w"), g("ln1_b")) if gpt2 else rmsnorm(x[t], g("ln1_w"))
                qkv = g("qkv_w") @ h + (g("qkv_b") if gpt2 else 0)
                for hh in range(H):
                    q[t, hh] = qkv[hh * hd:(hh + 1) * hd]
                for j in range(KV):
                    k[t, j] = qkv[(H + j) * hd:(H + j + 1) * hd]
                    v[t, j] = qkv[(H + KV + j) * hd:(H + KV + j + 1) * hd]
                if not gpt2:
                    for hh in range(H):
                        q[t, hh] = rope(q[t, hh], t)
                    for j in range(KV):
                        k[t, j] = rope(k[t, j], t)
            y = np.zeros((T, C))
            for hh in range(H):
                j = hh // (H // KV)
                for t in range(T):
                    s = np.array([q[t, hh] @ k[t2, j] / math.sqrt(hd) for t2 in range(t + 1)])
                    w = np.exp(s - s.max()); w /= w.sum()
                    y[t, hh * hd:(hh + 1) * hd] = sum(w[t2] * v[t2, j] for t2 in range(t + 1))
            for t in range(T):
                x[t] = x[t] + g("attproj_w") @ y[t] + (g("attproj_b") if gpt2 else 0)
                if gpt2:
                    h = layernorm(x[t], g("ln2_w"), g("ln2_b"))
                    m = gelu(g("fc_w") @ h + g("fc_b"))
                    x[t] = x[t] + g("fcproj_w") @ m + g("fcproj_b")
                else:
                    h = rmsnorm(x[t], g("ln2_w"))
                    gu = g("fc_w") @ h
                    m = silu(gu[:Fd]) * gu[Fd:]
                    x[t] = x[t] + g("fcproj_w") @ m
        for t in range(T):
            if gpt2:
                h = layernorm(x[t], P["final.lnf_w"], P["final.lnf_b"])
                logits[b, t] = P["embed.wte"] @ h
            else:
                h = rmsnorm(x[t], P["final.norm_w"])
                logits[b, t] = P["final.lm_head"] @ h
            z = logits[b, t, :V]
            losses.append(np.log(np.exp(z - z.max()).sum()) + z.max() - z[targets[b, t]])
    return logits, float(np.mean(losses))


gen = np.random.default_rng(5)
# llama's default MLP width rounds up to 256 here; 24 keeps every kind of tensor with a tenth of the
# parameters, and so a tenth of the gradcheck's time
for arch, extra in (("gpt2", []), ("llama", ["--kv-heads", "1", "--ffn", "24"])):
    c = R.parse_args(["x", "--arch", arch, "--vocab", "20", "--layers", "2", "--dim", "8", "--heads", "2",
                      "--max-seq", "6", "--seq", "5", "--batch", "2"] + extra)
    model = R.Model(c.model)
    # random (not the training init) values everywhere, padded vocab rows included, so that
    # every term and the exclusion of padded logits from the softmax are exercised
    flat = np.zeros(model.num_params, np.float64)
    for t in model.tensors:
        n = t.numel
        flat[t.offset:t.offset + n] = (1 + 0.2 * gen.standard_normal(n)) if t.name.startswith(("ln", "norm")) \
            else (0.2 * gen.standard_normal(n) if t.decay == 0 else 0.4 * gen.standard_normal(n))
    P = {t.full_name: flat[t.offset:t.offset + t.numel].reshape(t.shape) for t in model.tensors}
    idx = gen.integers(0, 20, size=(2, 5)); tgt = gen.integers(0, 20, size=(2, 5))
    ref_logits, ref_loss = ref_forward(c.model, P, idx, tgt)
    params = [torch.tensor(P[n], dtype=torch.float64, requires_grad=True) for n in model.names]
    xi, yi = torch.tensor(idx), torch.tensor(tgt)
    logits = model.forward(xi, params)
    loss = model.loss(logits, yi)
    err = np.abs(logits.detach().numpy() - ref_logits).max()
    check(err < 1e-6 and abs(loss.item() - ref_loss) < 1e-6,
          "%s: forward equals the loop-by-loop numpy model (max logit diff %.1e, loss %.6f vs %.6f)" % (arch, err, loss.item(), ref_loss))
    # the same in fp32 is close too
    params32 = [p.detach().float() for p in params]
    l32 = model.loss(model.forward(xi, params32), yi).item()
    check(abs(l32 - ref_loss) < 1e-4, "%s: fp32 forward loss %.6f" % (arch, l32))
    # training and evaluation compute the logits of the real vocabulary only (forward(vocab=V))
    lv = model.loss(model.forward(xi, params32, vocab=c.model.vocab_size), yi).item()
    check(abs(lv - l32) <= 1e-6 * abs(l32), "%s: fp32 loss over the real vocabulary %.7f = over the padded logits %.7f" % (arch, lv, l32))
    loss.backward()
    pad = params[0].grad[20:]
    check(bool((pad == 0).all()), "%s: gradient of padded wte rows is exactly zero" % arch)
    t0 = time.time()
    ok = torch.autograd.gradcheck(lambda *ps: model.loss(model.forward(xi, list(ps)), yi), tuple(params),
                                  eps=1e-6, atol=1e-7, rtol=1e-5, raise_exception=False)
    check(ok, "%s: gradcheck of all %d parameters (float64, %.1f s)" % (arch, model.num_params, time.time() - t0))

# RoPE tables: fp32 frequencies and angles
cos, sin = R.rope_tables(8, 16, np.float32(10000.0))
fr = np.float32(1) / np.power(np.float32(10000.0), np.arange(0, 16, 2, dtype=np.float32) / np.float32(16))
ang = (np.arange(8, dtype=np.float32)[:, None] * fr[None, :]).astype(np.float32)
check(np.abs(cos - np.cos(ang.astype(np.float64))).max() < 1e-7 and np.abs(sin - np.sin(ang.astype(np.float64))).max() < 1e-7,
      "rope tables: cos/sin of t * theta^(-2i/hd) in fp32")

# ---------------------------------------------------------------------------
# (c) data order
toks = gen.integers(0, 256, size=1000)
R.write_shard(os.path.join(TMP, "order.bin"), toks)
B, T, W = 2, 8, 2
whole = R.DataLoader(os.path.join(TMP, "order.bin"), W * B, T, 256)
ranks = [R.DataLoader(os.path.join(TMP, "order.bin"), B, T, 256, rank=r, world=W) for r in range(W)]
ok = True
pos = 0
for step in range(70):
    stride = W * B * T
    if pos + stride + 1 > len(toks):
        pos = 0
    exp_x = toks[pos:pos + stride].reshape(W * B, T)
    exp_y = toks[pos + 1:pos + stride + 1].reshape(W * B, T)
    pos += stride
    x, y = whole.next()
    rx = [rl.next() for rl in ranks]
    ok &= np.array_equal(x, exp_x) and np.array_equal(y, exp_y)
    ok &= np.array_equal(np.concatenate([a for a, _ in rx]), x) and np.array_equal(np.concatenate([b for _, b in rx]), y)
check(ok, "data order: 70 micro-steps with wrap-around; world loader == concatenation of rank loaders")
whole.reset()
check(np.array_equal(whole.next()[0].reshape(-1), toks[:32]), "data reset goes back to position 0")

# ---------------------------------------------------------------------------
# (d) lr_at


def cfg(sched, warmup=0, log=False, lr=1e-3, frac=0.1, min_lr=1e-4, wmr=0.0, cmr=0.0):
    c = R.TrainConfig()
    c.sched = R.SCHED_NAMES.index(sched); c.warmup = warmup; c.warmup_log = int(log)
    c.lr = R.f32(lr); c.min_lr_frac = R.f32(frac); c.warmup_min_lr = R.f32(min_lr)
    c.warmup_min_ratio = R.f32(wmr); c.cos_min_ratio = R.f32(cmr)
    return c


# DeepSpeed's schedules run optimizer step `it` (0-based) at scheduler iteration t = it - 1
# (t = -1: the lr the scheduler's constructor sets); W = max(2, warmup)
L2 = math.log(2) / math.log(10)
cases = [
    (cfg("constant"), 0, 100, 1e-3), (cfg("constant"), 99, 100, 1e-3),
    (cfg("cosine", 10), 0, 111, 1e-4), (cfg("cosine", 10), 4, 111, 5e-4), (cfg("cosine", 10), 9, 111, 1e-3),
    (cfg("cosine", 10), 10, 111, 1e-3), (cfg("cosine", 10), 60, 111, 5.5e-4), (cfg("cosine", 10), 110, 111, 1e-4),
    (cfg("cosine", 10), 500, 111, 1e-4), (cfg("cosine"), 0, 5, 1e-3), (cfg("cosine"), 2, 5, 5.5e-4),
    (cfg("cosine"), 0, 1, 1e-3),
    (cfg("WarmupLR", 10), 0, 100, 1e-4), (cfg("WarmupLR", 10), 1, 100, 1e-4), (cfg("WarmupLR", 10), 6, 100, 5.5e-4),
    (cfg("WarmupLR", 10), 10, 100, 9.1e-4), (cfg("WarmupLR", 10), 11, 100, 1e-3), (cfg("WarmupLR", 10), 99, 100, 1e-3),
    (cfg("WarmupLR", 10, log=True), 0, 100, 1e-4), (cfg("WarmupLR", 10, log=True), 1, 100, 1e-4),
    (cfg("WarmupLR", 10, log=True), 2, 100, 1e-4 + 9e-4 * L2), (cfg("WarmupLR", 10, log=True), 10, 100, 1e-3),
    (cfg("WarmupLR", 10, log=True), 50, 100, 1e-3),
    (cfg("WarmupLR", 4, min_lr=0.0), 2, 100, 2.5e-4),
    (cfg("WarmupLR", 0, min_lr=0.0), 1, 100, 0.0), (cfg("WarmupLR", 0, min_lr=0.0), 2, 100, 5e-4),
    (cfg("WarmupLR", 0, min_lr=0.0), 3, 100, 1e-3),
    (cfg("WarmupDecayLR", 10), 6, 110, 5.5e-4), (cfg("WarmupDecayLR", 10), 11, 110, 1e-3),
    (cfg("WarmupDecayLR", 10), 61, 110, 5.5e-4), (cfg("WarmupDecayLR", 10), 110, 110, 1.09e-4),
    (cfg("WarmupDecayLR", 10), 111, 110, 1e-4), (cfg("WarmupDecayLR", 10), 200, 110, 1e-4),
    (cfg("WarmupCosineLR", 10, wmr=0.1), 0, 110, 0.0), (cfg("WarmupCosineLR", 10, wmr=0.1), 1, 110, 1e-4),
    (cfg("WarmupCosineLR", 10, wmr=0.1), 6, 110, 5.5e-4), (cfg("WarmupCosineLR", 10, wmr=0.1), 10, 110, 9.1e-4),
    (cfg("WarmupCosineLR", 10, wmr=0.1), 11, 110, 1e-3 * (1 + math.cos(math.pi / 100)) / 2),
    (cfg("WarmupCosineLR", 10, wmr=0.1), 60, 110, 5e-4), (cfg("WarmupCosineLR", 10, wmr=0.1), 110, 110, 0.0),
    (cfg("WarmupCosineLR", 10, cmr=0.1), 60, 110, 5.5e-4), (cfg("WarmupCosineLR", 10, cmr=0.1), 110, 110, 1e-4),
]
ok = True
for c_, it, total, want in cases:
    got = R.lr_at(c_, it, total)
    good = abs(got - want) <= 2e-6 * max(abs(want), 1e-12) + 1e-12 and got == float(np.float32(got))
    if not good:
        print("   lr_at(%s, warmup %d, log %d, it %d, total %d) = %.9g, want %.9g" % (R.SCHED_NAMES[c_.sched], c_.warmup, c_.warmup_log, it, total, got, want))
    ok &= good
check(ok, "lr_at: %d hand-computed points over the five schedules" % len(cases))

# ---------------------------------------------------------------------------
# CLI runs on synthetic data
period = (np.arange(30000) * 7) % 200
noise = gen.random(30000) < 0.2
period[noise] = gen.integers(0, 200, size=noise.sum())
R.write_shard(os.path.join(TMP, "train.bin"), period)
R.write_shard(os.path.join(TMP, "val.bin"), period[:4000])
BASE = ["--vocab", "200", "--layers", "1", "--train", os.path.join(TMP, "train.bin"), "--val", os.path.join(TMP, "val.bin"),
        "--seq", "16", "--threads", "1", "--quiet", "1"]


def run(args, expect_rc=0):
    p = subprocess.run([PY, SCRIPT] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != expect_rc:
        print("   command: %s\n   rc %d\n   stderr: %s" % (" ".join(args), p.returncode, p.stderr[-2000:]))
    return p


def losses(path, kind="train", key="loss"):
    with open(path) as f:
        recs = [json.loads(l) for l in f]
    return [r[key] for r in recs if r["type"] == kind], recs


for arch in ("gpt2", "llama"):
    d = os.path.join(TMP, "save_" + arch)
    p = run(["--arch", arch] + BASE + ["--steps", "0", "--save", d, "--seed", "77"])
    mpath = os.path.join(d, "model.bin")
    c = R.parse_args(["x", "--arch", arch] + BASE)
    tensors, total = R.build_layout(c.model)
    ok = p.returncode == 0 and os.path.getsize(mpath) == 1024 + 4 * total
    if ok:
        h = np.fromfile(mpath, dtype="<i4", count=256)
        ok &= list(h[:11]) == [20251121, 1, c.model.arch, 1, 4, c.model.n_kv_head, 64, c.model.d_ff, 200, 256, 64]
        ok &= h[11] == R._fbits(1e-5) and h[12] == R._fbits(10000.0) and h[13] == 0 and h[14] == total and h[15] == 0 and not h[16:].any()
        ok &= np.array_equal(np.fromfile(mpath, dtype="<f4", offset=1024), R.init_params((tensors, total), 77))
    check(ok, "%s: --steps 0 --save writes model.bin (header, %d params = init from --seed)" % (arch, total))
    la, lb = os.path.join(TMP, arch + "_a.jsonl"), os.path.join(TMP, arch + "_b.jsonl")
    pa = run(["--arch", arch] + BASE + ["--steps", "4", "--init", mpath, "--log", la, "--val-every", "2", "--val-batches", "2"])
    pb = run(["--arch", arch] + BASE + ["--steps", "4", "--seed", "77", "--log", lb, "--val-every", "2", "--val-batches", "2"])
    if pa.returncode == 0 and pb.returncode == 0:
        (a, ra), (b, rb) = losses(la), losses(lb)
        va, _ = losses(la, "val", "val_loss")
        keys_ok = all(set(r) == {"type", "step", "loss", "lr", "grad_norm", "tokens_per_sec", "ms"} for r in ra if r["type"] == "train")
        check(a == b and len(a) == 4 and len(va) == 2 and [r["step"] for r in ra] == [1, 2, 2, 3, 4, 4] and keys_ok
              and abs(a[0] - math.log(200)) < 0.1 and a[-1] < a[0],
              "%s: --init model.bin == --seed init; log records/keys; loss %.4f -> %.4f" % (arch, a[0], a[-1]))
        lrs = [r["lr"] for r in ra if r["type"] == "train"]
        c_ = cfg("cosine", lr=6e-4)
        check(lrs == [R.lr_at(c_, i, 4) for i in range(4)], "%s: logged lr follows lr_at" % arch)
    else:
        check(False, "%s: training runs" % arch)

# --world 2 --batch 2 == --batch 4 (same micro-batch) and ~= --batch 2 --accum 2 (same global batch)
lw, l4, lk = (os.path.join(TMP, n) for n in ("w.jsonl", "b4.jsonl", "k.jsonl"))
pw = run(["--arch", "llama"] + BASE + ["--steps", "3", "--world", "2", "--batch", "2", "--log", lw])
p4 = run(["--arch", "llama"] + BASE + ["--steps", "3", "--batch", "4", "--log", l4])
pk = run(["--arch", "llama"] + BASE + ["--steps", "3", "--batch", "2", "--accum", "2", "--log", lk])
if pw.returncode == 0 and p4.returncode == 0 and pk.returncode == 0:
    w, b4, k = losses(lw)[0], losses(l4)[0], losses(lk)[0]
    check(w == b4, "--world 2 --batch 2 reads and computes exactly what --batch 4 does")
    check(max(abs(x - y) for x, y in zip(w, k)) < 2e-5, "--world 2 --batch 2 ~= --batch 2 --accum 2 (max diff %.1e)" % max(abs(x - y) for x, y in zip(w, k)))
    pt = run(["--arch", "llama"] + BASE + ["--steps", "3", "--total-batch", "8", "--batch", "2", "--world", "2", "--log", lk])
    kk = losses(lk)[1]
    check(pt.returncode == 0 and all(abs(r["tokens_per_sec"] * r["ms"] / 1000 - 8 * 16) < 1e-3 for r in kk),
          "--total-batch 8 with --batch 2 --world 2: accum 2, 128 tokens per step")
else:
    check(False, "world/accum runs")

# debug state
mpath = os.path.join(TMP, "save_gpt2", "model.bin")
dpath = os.path.join(TMP, "debug.bin")
p = run(["--arch", "gpt2"] + BASE + ["--init", mpath, "--batch", "3", "--world", "2", "--debug-state", dpath, "--clip", "0.5", "--lr", "1e-3"])
c = R.parse_args(["x", "--arch", "gpt2"] + BASE)
N = R.build_layout(c.model)[1]
Bt, T, Vp = 6, 16, 256
expect = 1024 + 4 * Bt * T * 2 + 4 * Bt * T * Vp + 4 + 4 * N + 4 * 10
if p.returncode == 0 and os.path.getsize(dpath) == expect:
    raw = open(dpath, "rb").read()
    h = np.frombuffer(raw[:1024], "<i4")
    fl = lambda k: struct.unpack("<f", struct.pack("<i", int(h[k])))[0]
    o = 1024
    inp = np.frombuffer(raw[o:o + 4 * Bt * T], "<i4"); o += 4 * Bt * T
    tgt = np.frombuffer(raw[o:o + 4 * Bt * T], "<i4"); o += 4 * Bt * T
    logits = np.frombuffer(raw[o:o + 4 * Bt * T * Vp], "<f4").reshape(Bt, T, Vp); o += 4 * Bt * T * Vp
    loss = np.frombuffer(raw[o:o + 4], "<f4")[0]; o += 4
    grads = np.frombuffer(raw[o:o + 4 * N], "<f4"); o += 4 * N
    ls = np.frombuffer(raw[o:o + 40], "<f4")
    hdr_ok = list(h[:8]) == [20251122, 1, Bt, T, Vp, 10, N, 0] and not h[14:].any() and \
        [fl(k) for k in range(8, 14)] == [R.f32(1e-3), R.f32(0.9), R.f32(0.95), R.f32(1e-8), R.f32(0.1), R.f32(0.5)]
    check(hdr_ok, "debug state: header (B*world %d, T %d, Vp %d, 10 steps, %d params, float hyper-parameters)" % (Bt, T, Vp, N))
    check(np.array_equal(inp, period[:Bt * T]) and np.array_equal(tgt, period[1:Bt * T + 1]),
          "debug state: inputs/targets are the first world*B sequences")
    m = R.Model(c.model); m.set_flat(np.fromfile(mpath, "<f4", offset=1024))
    lg = m.forward(torch.tensor(inp.reshape(Bt, T).astype(np.int64)))
    ll = m.loss(lg, torch.tensor(tgt.reshape(Bt, T).astype(np.int64)))
    ll.backward()
    check(np.array_equal(lg.detach().numpy(), logits) and ll.item() == loss and np.array_equal(m.flat_grads(), grads),
          "debug state: logits, loss and grads reproduce")
    check(not logits[..., 200:].any() and not grads[200 * 64:256 * 64].any(), "debug state: padded logits and padded-row grads are 0")
    check(ls[0] == loss and all(ls[i + 1] < ls[i] for i in range(9)), "debug state: 10 losses %.4f .. %.4f, decreasing" % (ls[0], ls[-1]))
else:
    check(False, "debug state written with size %d (got %s)" % (expect, os.path.getsize(dpath) if os.path.exists(dpath) else "none"))

# ---------------------------------------------------------------------------
# (e) bad inputs: one line on stderr, exit 1, naming the file or flag
bad = os.path.join(TMP, "bad")
os.makedirs(bad)
def hdr(magic=20240520, ver=1, n=100):
    h = np.zeros(256, "<i4"); h[:3] = [magic, ver, n]; return h.tobytes()
open(os.path.join(bad, "magic.bin"), "wb").write(hdr(magic=123) + b"\0" * 200)
open(os.path.join(bad, "version.bin"), "wb").write(hdr(ver=7) + b"\0" * 200)
open(os.path.join(bad, "trunc.bin"), "wb").write(hdr(n=1000) + b"\0" * 200)
open(os.path.join(bad, "trail.bin"), "wb").write(hdr(n=100) + b"\0" * 201)
open(os.path.join(bad, "short.bin"), "wb").write(b"\0" * 100)
R.write_shard(os.path.join(bad, "few.bin"), np.zeros(10, np.int64))
R.write_shard(os.path.join(bad, "range.bin"), np.full(100, 250))
open(os.path.join(bad, "model_magic.bin"), "wb").write(b"\1" * 4096)
good_model = os.path.join(TMP, "save_gpt2", "model.bin")
open(os.path.join(bad, "model_trunc.bin"), "wb").write(open(good_model, "rb").read()[:5000])
open(os.path.join(bad, "cfg.json"), "w").write("{not json")
D = ["--vocab", "200", "--seq", "16", "--batch", "2"]
errs = [
    (D + ["--train", os.path.join(bad, "missing.bin")], "missing.bin"),
    (D + ["--train", os.path.join(bad, "magic.bin")], "magic.bin"),
    (D + ["--train", os.path.join(bad, "version.bin")], "version.bin"),
    (D + ["--train", os.path.join(bad, "trunc.bin")], "trunc.bin"),
    (D + ["--train", os.path.join(bad, "trail.bin")], "trail.bin"),
    (D + ["--train", os.path.join(bad, "short.bin")], "short.bin"),
    (D + ["--train", os.path.join(bad, "few.bin")], "few.bin"),
    (D + ["--train", os.path.join(bad, "range.bin"), "--vocab", "200"], "range.bin"),
    (D + ["--train", os.path.join(TMP, "train.bin"), "--val-every", "1", "--val", os.path.join(bad, "nope.bin")], "nope.bin"),
    (D + ["--train", os.path.join(TMP, "train.bin"), "--init", os.path.join(bad, "model_magic.bin")], "model_magic.bin"),
    (D + ["--train", os.path.join(TMP, "train.bin"), "--init", os.path.join(bad, "model_trunc.bin"), "--layers", "1"], "model_trunc.bin"),
    (D + ["--train", os.path.join(TMP, "train.bin"), "--init", good_model, "--layers", "2"], "model.bin"),
    (D + ["--train", os.path.join(TMP, "train.bin"), "--init", good_model, "--layers", "1", "--arch", "llama"], "model.bin"),
    (D + ["--init", os.path.join(bad, "nomodel.bin")], "nomodel.bin"),
    (D + ["--config", os.path.join(bad, "cfg.json")], "cfg.json"),
    (D + ["--frobnicate", "1"], "--frobnicate"),
    (D + ["--arch", "mamba"], "--arch"),
    (D + ["--preset", "huge"], "--preset"),
    (D + ["--batch", "two"], "--batch"),
    (D + ["--lr", "nan"], "--lr"),
    (D + ["--kv-heads", "2"], "--kv-heads"),
    (D + ["--seq", "100"], "--seq"),
    (D + ["--dim", "66"], "--dim"),
    (D + ["--lr-schedule", "WarmupCosineLR", "--warmup", "50", "--steps", "50"], "WarmupCosineLR"),
    (D + ["--lr-schedule", "cosine", "--warmup-min-lr", "1e-5"], "--warmup-min-lr"),
    (D + ["--eps", "-1e-8"], "--eps"),
    (D + ["--steps"], "--steps"),
    (D + ["stray"], "stray"),
]
ok = True
for args, needle in errs:
    p = run(args, expect_rc=1)
    lines = p.stderr.strip().split("\n")
    good = p.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0] and "Traceback" not in p.stderr
    print("   %s %s" % ("ok  " if good else "BAD ", lines[0] if lines else "(no stderr)"))
    ok &= good
check(ok, "%d bad inputs: exit 1 with one line naming the file or flag" % len(errs))
p = run(["--help"])
check(p.returncode == 0 and "--debug-state" in p.stdout, "--help exits 0")

print("%d failures, %.1f s" % (len(failures), time.time() - t_start))
sys.exit(1 if failures else 0)
EOF
