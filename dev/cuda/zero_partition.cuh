// dev/cuda/zero_partition.cuh: a rank's optimizer partition of GPT-2 124M as zero.h lays it out,
// for the lean optimizer step's checks (dev/cuda/adamw.cu, dev/cuda/global_norm.cu).
//
// The tensors are model/model.h's (model_layout_build with config/model_config.h's gpt2-124m preset: 14 units, 148
// tensors, Vp = 50304). The plan is zero_plan_build's arithmetic, repeated here because zero.h
// itself needs the trainer's communication headers: each unit padded to a multiple of P*16
// (ZERO_ALIGN) elements, split into P equal slices; rank r owns slice r of every unit, its shard
// lays them end to end; its segments are each tensor clipped to its slice (decay flag kept). So
// at P = 1 the segments are the 148 tensors (the ~150 launches of the per-segment step), and the
// shard equals the full padded buffer. GPT-2 124M's units are multiples of 64 elements: there is no
// padding up to P = 4; at P = 5 the last rank's slices end in padding (656 elements in all).
#pragma once
#include <vector>
#include "config/train_config.h"
#include "model/model.h"

#define DEV_ZERO_ALIGN 16   // zero.h's ZERO_ALIGN

struct DevSegment { int unit; size_t so, n; int decay; };   // so: the segment's shard offset

struct DevPartition {
    int P, rank, n_units;
    size_t full_elems, shard_elems;
    std::vector<size_t> numel, full_off, shard_off, shard;   // per unit
    std::vector<DevSegment> seg;
};

static DevPartition dev_gpt2_partition(int P, int rank) {
    ModelConfig mc;
    memset(&mc, 0, sizeof(mc));
    if (!model_apply_preset(&mc, ARCH_GPT2, "gpt2-124m")) { printf("no gpt2-124m preset\n"); exit(1); }
    ModelLayout L;
    model_layout_build(&L, &mc);
    DevPartition d;
    d.P = P; d.rank = rank; d.n_units = L.n_units;
    d.full_elems = d.shard_elems = 0;
    for (int u = 0; u < L.n_units; u++) {
        size_t padded = round_up(L.units[u].numel, (size_t)P * DEV_ZERO_ALIGN), sh = padded / P;
        d.numel.push_back(L.units[u].numel);
        d.full_off.push_back(d.full_elems);
        d.shard_off.push_back(d.shard_elems);
        d.shard.push_back(sh);
        size_t lo = (size_t)rank * sh, hi = lo + sh;
        for (int k = 0; k < L.units[u].n_tensors; k++) {
            const TensorSpec *t = &L.units[u].t[k];
            size_t a = t->offset > lo ? t->offset : lo, b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
            if (a < b) d.seg.push_back(DevSegment{u, d.shard_elems + (a - lo), b - a, t->decay});
        }
        d.full_elems += padded;
        d.shard_elems += sh;
    }
    model_layout_free(&L);
    return d;
}

// value i of a random stream (seed): uniform in [-1, 1), whichever thread computes it (OpenMP fills)
static float dev_hrand(uint64_t seed, size_t i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((z >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

// the padding of the full buffer (elements past each unit's numel): where a check expects zeros
static std::vector<char> dev_full_padding(const DevPartition &d) {
    std::vector<char> pad(d.full_elems, 0);
    for (int u = 0; u < d.n_units; u++)
        for (size_t i = d.numel[u]; i < d.shard[u] * d.P; i++) pad[d.full_off[u] + i] = 1;
    return pad;
}
// the full buffer's element that shard element so of rank d.rank is
static size_t dev_full_index(const DevPartition &d, int u, size_t so) {
    return d.full_off[u] + (size_t)d.rank * d.shard[u] + (so - d.shard_off[u]);
}
