// dev/cuda/gpt2_plan.cuh: the partition the optimizer-step checks (dev/cuda/adamw.cu,
// dev/cuda/global_norm.cu) run on: zero/plan.h's plan of GPT-2 124M (model/model.h's
// gpt2-124m layout: 14 units, 148 tensors, Vp = 50304), the one the trainers use.
// At P = 1 the segments are the 148 tensors and the shard is the full buffer. GPT-2
// 124M's units are multiples of 64 elements, so there is no padding up to P = 4; at
// P = 5 the last rank's slices end in padding (656 elements in all).
#pragma once
#include <vector>
#include "zero/plan.h"

// The plan of rank `rank` of P: stage 1, the optimizer state partitioned over P ranks.
static ZeroPlan dev_gpt2_plan(int P, int rank) {
    ModelConfig mc;
    memset(&mc, 0, sizeof(mc));
    if (!model_apply_preset(&mc, ARCH_GPT2, "gpt2-124m")) { printf("no gpt2-124m preset\n"); exit(1); }
    ModelLayout L;
    model_layout_build(&L, &mc);
    TrainConfig tc;
    train_config_defaults(&tc);
    ZeroPlan p;
    zero_plan_build(&p, &L, 1, P, rank, &tc);
    model_layout_free(&L);
    return p;
}

// A segment as the checks read it: its unit, its offset in the shard, its length and weight-decay flag.
struct DevSegment { int unit; size_t so, n; int decay; };
static std::vector<DevSegment> dev_segments(const ZeroPlan &p) {
    std::vector<DevSegment> v;
    for (int s = 0; s < p.n_seg; s++) v.push_back(DevSegment{p.seg[s].unit, zero_seg_shard_off(&p, &p.seg[s]), p.seg[s].n, p.seg[s].decay});
    return v;
}

// The full buffer's element that this rank's shard element so (of unit u) is.
static size_t dev_full_index(const ZeroPlan &p, int u, size_t so) {
    return zero_slice_full_off(&p, u) + (so - p.u[u].shard_off);
}

// The padding of the full buffer, the elements past each unit's numel: where a check expects zeros.
static std::vector<char> dev_full_padding(const ZeroPlan &p) {
    std::vector<char> pad(p.full_elems, 0);
    for (int u = 0; u < p.n_units; u++)
        for (size_t i = p.u[u].numel; i < p.u[u].padded; i++) pad[p.u[u].full_off + i] = 1;
    return pad;
}
