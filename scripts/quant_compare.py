#!/usr/bin/env python3
"""scripts/quant_compare.py: ZeRO++'s quantizers, zeroc's arrangement beside DeepSpeed's, measured on a
model's real weights and gradients: the relative RMS error, sqrt(sum (x - x')^2 / sum x^2), of what each
collective delivers.

  qwZ   each rank's slice of every gathered unit, quantized and dequantized, against the weights.
  qgZ   the reduced gradient of W ranks on N nodes of L: each rank's gradient of one micro-batch, the
        hierarchical reduction (hop 1 inside the node, hop 2 across), against the exact mean in fp64.

zeroc (util/quantize.h): blocks of 256 values, scale amax/127 (int8) or amax/7 (int4), codes -127..127 or
-7..7, fp32 in and fp32 sums, every tensor of a unit that holds a matrix quantized. DeepSpeed
(../shared/DESIGN.md section 8; partition_parameters.py CUDAQuantizer, coalesced_collectives.py
all_to_all_quant_reduce): qwZ casts to fp16, scale 128/amax over groups of about 8,000 values
(target_group_size; the group count rounded so that 8 x groups divides the slice), codes -128..127, the
weights back in fp16; qgZ int4 with scale 8/amax, codes -8..7, max(rows, cols, W) groups per tensor, sums in
fp16, 1-D tensors reduce-scattered plainly.

Usage (the model flags of scripts/train_gpt.py; --init a zeroc model.bin):
    /usr/bin/python3 scripts/quant_compare.py --arch llama --preset mini --init CKPT/model.bin \
        --train data/brown/train.bin --batch 8 --seq 64 [--world 4 --ranks-per-node 2]
Prints a markdown table. Deterministic: the same files give the same table.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_gpt as tg  # noqa: E402

np = tg.np
ALIGN = 16  # zero/plan.h ZERO_ALIGN


def rel_rms(err2, x2):
    return math.sqrt(err2 / x2) if x2 > 0 else 0.0


def zeroc_q(x, bits):
    """util/quantize.h: blocks of 256, symmetric, ties to even; x fp32, dequantized in fp32."""
    qmax = 127 if bits == 8 else 7
    n = len(x)
    pad = (-n) % 256
    b = np.concatenate([x, np.zeros(pad, np.float32)]).reshape(-1, 256)
    scale = (np.abs(b).max(axis=1, keepdims=True) / np.float32(qmax)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1))
    q = np.clip(np.rint(b / safe), -qmax, qmax) * (scale > 0)
    return (q * scale).astype(np.float32).reshape(-1)[:n]


def ds_groups_qwz(n, target=8000):
    """CUDAQuantizer.quantize's group count for a slice of n values."""
    g = max(1, math.ceil(n / target))
    while g < n and n % (8 * g):
        g += 1
    while n % (16 * g) == 0 and n / g > target:
        g *= 2
    return g


def ds_q(x, groups, bits):
    """DeepSpeed's symmetric quantizer: scale 2^bits / (2 amax), codes -2^(bits-1) .. 2^(bits-1) - 1,
    input in fp16; dequantized values in fp32."""
    x16 = x.astype(np.float16).astype(np.float32)
    n = len(x16)
    g = x16.reshape(groups, n // groups)
    amax = np.abs(g).max(axis=1, keepdims=True)
    scale = np.where(amax > 0, np.float32(2 ** bits / 2) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    q = np.clip(np.rint(g * scale), lo, hi)
    return np.where(scale > 0, q / np.where(scale > 0, scale, 1), 0).astype(np.float32).reshape(-1)


def units_of(layout):
    units = {}
    for t in layout:
        units.setdefault(t.unit, []).append(t)
    return list(units.values())


def main(argv):
    world, rpn = 4, 2
    rest = []
    it = iter(argv)
    for a in it:
        if a == "--world": world = int(next(it))
        elif a == "--ranks-per-node": rpn = int(next(it))
        else: rest.append(a)
    c = tg.parse_args(["quant_compare.py"] + rest)
    if not c.init_path:
        tg.fatal("--init: a zeroc model.bin whose weights to quantize")
    m = c.model
    layout, num_params = tg.build_layout(m)
    flat = tg.load_model(c.init_path, m, num_params).astype(np.float32)
    tg.load_torch()
    torch = tg.torch
    torch.manual_seed(0)
    model = tg.Model(m, "cpu")
    model.set_flat(flat)
    grads = []
    for r in range(world):   # rank r's micro-batch, as the trainer's data parallel ranks take them
        loader = tg.DataLoader(c.train_path, c.B, c.T, m.vocab_size, rank=r, world=world)
        x, y = loader.next()
        for p in model.params:
            p.grad = None
        model.loss(model.forward(tg.to_device(x, "cpu")), tg.to_device(y, "cpu")).backward()
        grads.append(model.flat_grads().astype(np.float32))
    N, L = world // rpn, rpn

    # qwZ: every unit's slices, as a gather sends them
    wz = [0.0, 0.0, 0.0]   # zeroc err2, DeepSpeed err2, x2
    for ts in units_of(layout):
        lo, hi = ts[0].offset, ts[-1].offset + ts[-1].numel
        n = hi - lo
        padded = -(-n // (world * ALIGN)) * world * ALIGN
        w = np.zeros(padded, np.float32)
        w[:n] = flat[lo:hi]
        s = padded // world
        for r in range(world):
            x = w[r * s:(r + 1) * s]
            wz[0] += float(((x - zeroc_q(x, 8)).astype(np.float64) ** 2).sum())
            d = ds_q(x, ds_groups_qwz(s), 8).astype(np.float16).astype(np.float32)
            wz[1] += float(((x - d).astype(np.float64) ** 2).sum())
            wz[2] += float((x.astype(np.float64) ** 2).sum())

    # qgZ: hop 1 sums the node's L ranks, hop 2 the N nodes' partial sums, then / W
    gz = [0.0, 0.0, 0.0]
    exact_all = sum(g.astype(np.float64) for g in grads) / world
    for ts in units_of(layout):
        lo, hi = ts[0].offset, ts[-1].offset + ts[-1].numel
        ex = exact_all[lo:hi]
        gz[2] += float((ex ** 2).sum())
        if any(t.decay for t in ts):   # zeroc: the whole unit, in blocks per slice
            nodes = []
            for nd in range(N):
                part = sum(zeroc_q(grads[nd * L + k][lo:hi], 4) for k in range(L)) if L > 1 else grads[nd][lo:hi]
                nodes.append(zeroc_q(part.astype(np.float32), 4))
            got = sum(nodes) / world
            gz[0] += float(((got - ex) ** 2).sum())
        for t in ts:   # DeepSpeed: per tensor; 1-D ones plainly
            a, b = t.offset, t.offset + t.numel
            if not t.decay or t.numel % (2 * world):
                continue
            G = max(t.rows, t.cols, world)
            while t.numel % G:
                G += 1
            nodes = []
            for nd in range(N):
                part = np.zeros(t.numel, np.float16)
                for k in range(L):
                    part = (part + ds_q(grads[nd * L + k][a:b], G, 4).astype(np.float16)).astype(np.float16)
                nodes.append(ds_q(part.astype(np.float32), G, 4).astype(np.float16))
            tot = np.zeros(t.numel, np.float16)
            for v in nodes:
                tot = (tot + v).astype(np.float16)
            got = tot.astype(np.float64) / world
            gz[1] += float(((got - exact_all[a:b]) ** 2).sum())

    print(f"{m.describe()}, {num_params:,} parameters, weights of {c.init_path}; gradients of {world} micro-batches of "
          f"{c.B} x {c.T} tokens, {N} nodes of {L}")
    print()
    print("| collective | zeroc: blocks of 256, +-127 / +-7, fp32 | DeepSpeed: fp16, ~8000 (qwZ) or max(rows, cols, W) (qgZ) values a group, -128..127 / -8..7 |")
    print("|---|---:|---:|")
    print(f"| qwZ, the gathered weights (int8) | {rel_rms(wz[0], wz[2]):.5f} | {rel_rms(wz[1], wz[2]):.5f} |")
    print(f"| qgZ, the reduced gradient (int4, 2 hops) | {rel_rms(gz[0], gz[2]):.5f} | {rel_rms(gz[1], gz[2]):.5f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
