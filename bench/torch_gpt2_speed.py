#!/usr/bin/env python3
"""bench/torch_gpt2_speed.py: the PyTorch speed baseline for bench/gpu_train.sh.

GPT-2 (nanoGPT's model: the same architecture as zeroc's --arch gpt2, tied embeddings, vocabulary
padded to 50304) trained the way a fast PyTorch trainer does it: bf16 autocast, fused causal
attention (F.scaled_dot_product_attention: flash on an H100), fused AdamW, optionally torch.compile.
It measures speed only (random tokens; the loss is printed so a broken run shows), so it is not a
correctness reference: scripts/train_gpt.py (fp32, TF32 off) is that.

    python3 bench/torch_gpt2_speed.py --device cuda --batch 16 --seq 1024 --steps 30 [--compile 1]

Prints one line per step, then the median over the steps after --warmup:
    torch_gpt2_speed: eager|compile, B=16 T=1024: 123456 tok/s, 132.7 ms/step (median of 25 steps), 124.44M parameters
Errors are one line on stderr and exit status 1.
"""
import math
import statistics
import sys
import time


def die(msg):
    print("error: " + msg, file=sys.stderr)
    sys.exit(1)


def parse(argv):
    a = {"device": "cuda", "batch": 16, "seq": 1024, "steps": 30, "warmup": 5, "compile": 0,
         "layers": 12, "heads": 12, "dim": 768, "vocab": 50304}
    i = 0
    while i < len(argv):
        k = argv[i]
        if k in ("-h", "--help"):
            print(__doc__.strip())
            sys.exit(0)
        if not k.startswith("--") or k[2:] not in a or i + 1 >= len(argv):
            die("%s: unknown flag or missing value (see --help)" % k)
        v = argv[i + 1]
        try:
            a[k[2:]] = v if k == "--device" else int(v)
        except ValueError:
            die("%s: expected an integer, got '%s'" % (k, v))
        i += 2
    if a["steps"] <= a["warmup"]:
        die("--steps %d must exceed --warmup %d" % (a["steps"], a["warmup"]))
    if a["dim"] % a["heads"]:
        die("--dim %d is not divisible by --heads %d" % (a["dim"], a["heads"]))
    return a


def build(a, torch):
    nn, F = torch.nn, torch.nn.functional
    C, H = a["dim"], a["heads"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.c_fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.c_fc_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(a["vocab"], C), nn.Embedding(a["seq"], C)
            self.h = nn.ModuleList(Block() for _ in range(a["layers"]))
            self.ln_f = nn.LayerNorm(C)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for b in self.h:
                x = b(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)   # tied head
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))

    return GPT()


def main(argv):
    a = parse(argv)
    try:
        import torch
    except ImportError as e:
        die("cannot import torch (%s)" % e)
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        die("torch %s has no scaled_dot_product_attention: this baseline needs torch >= 2.0 (the GPU machine has it)"
            % torch.__version__)
    dev = a["device"]
    if dev.startswith("cuda") and not torch.cuda.is_available():
        die("--device %s: CUDA is not available" % dev)
    torch.manual_seed(1337)
    torch.backends.cuda.matmul.allow_tf32 = True   # what a fast trainer sets; the fp32 parts are few
    model = build(a, torch).to(dev)
    nparam = sum(p.numel() for p in model.parameters())
    fused = dev.startswith("cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            **({"fused": True} if fused else {}))   # the fused CUDA AdamW (torch >= 2.0)
    step_fn = model
    if a["compile"]:
        step_fn = torch.compile(model)
    B, T = a["batch"], a["seq"]
    g = torch.Generator(device="cpu").manual_seed(7)
    data = torch.randint(0, 50257, (a["steps"], B, T + 1), generator=g).to(dev)
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
    times = []
    for s in range(a["steps"]):
        x, y = data[s, :, :-1], data[s, :, 1:]
        sync()
        t0 = time.perf_counter()
        with torch.autocast(device_type="cuda" if fused else "cpu", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        lv = loss.item()   # the host reads the loss every step, as zeroc's step line does
        sync()
        dt = time.perf_counter() - t0
        times.append(dt)
        if not math.isfinite(lv):
            die("step %d: loss %g is not finite" % (s + 1, lv))
        print("step %3d/%d | loss %.4f | %.1f ms | %.0f tok/s" % (s + 1, a["steps"], lv, dt * 1e3, B * T / dt), flush=True)
    ms = statistics.median(times[a["warmup"]:]) * 1e3
    print("torch_gpt2_speed: %s, B=%d T=%d: %.0f tok/s, %.1f ms/step (median of %d steps), %.2fM parameters"
          % ("compile" if a["compile"] else "eager", B, T, B * T / ms * 1e3, ms, a["steps"] - a["warmup"], nparam / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
