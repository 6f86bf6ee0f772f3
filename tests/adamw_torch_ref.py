#!/usr/bin/env python3
"""torch.optim.AdamW (or, with "adam", torch.optim.Adam: L2 weight decay) reference for tests/adamw_test.c.

usage: adamw_torch_ref.py CASE [CASE ...], each CASE eight arguments: DIR N STEPS BETA1 BETA2 EPS WD KIND
       (KIND adamw or adam); one process for every case, as importing torch is most of its time
reads  DIR/p0.f32 (N floats), DIR/grads.f32 (STEPS*N), DIR/lrs.f32 (STEPS learning rates),
       DIR/scales.f32 (STEPS grad scales, multiplied into the grads in float32 first)
writes DIR/p.f32, DIR/m.f32, DIR/v.f32 (param, exp_avg, exp_avg_sq after STEPS steps)
Hyperparameters are passed as the exact float32 values the C side uses.
Exit 77 when torch is not importable.
"""
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"adamw_torch_ref: torch/numpy not available ({e})")
    sys.exit(77)


def run_case(d, n, steps, b1, b2, eps, wd, kind):
    n, steps = int(n), int(steps)
    b1, b2, eps, wd = (float(np.float32(x)) for x in (b1, b2, eps, wd))
    adam = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[kind]
    p0 = np.fromfile(f"{d}/p0.f32", dtype=np.float32)
    grads = np.fromfile(f"{d}/grads.f32", dtype=np.float32).reshape(steps, n)
    lrs = np.fromfile(f"{d}/lrs.f32", dtype=np.float32)
    scales = np.fromfile(f"{d}/scales.f32", dtype=np.float32)
    assert p0.size == n and lrs.size == steps and scales.size == steps
    param = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = adam([param], lr=float(lrs[0]), betas=(b1, b2), eps=eps, weight_decay=wd, foreach=False)
    for s in range(steps):
        for g in opt.param_groups:
            g["lr"] = float(lrs[s])
        param.grad = torch.from_numpy(grads[s].copy()) * float(scales[s])
        opt.step()
    st = opt.state[param]
    param.detach().numpy().astype(np.float32).tofile(f"{d}/p.f32")
    st["exp_avg"].numpy().astype(np.float32).tofile(f"{d}/m.f32")
    st["exp_avg_sq"].numpy().astype(np.float32).tofile(f"{d}/v.f32")


def main():
    args = sys.argv[1:]
    if not args or len(args) % 8:
        sys.exit("usage: adamw_torch_ref.py DIR N STEPS BETA1 BETA2 EPS WD KIND [...]")
    torch.set_num_threads(1)
    for i in range(0, len(args), 8):
        run_case(*args[i:i + 8])


if __name__ == "__main__":
    main()
