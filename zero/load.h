// zero/load.h: the model states in and out, a rank's share at a time, as DeepSpeed's
// zero.Init: parameters from a ParamSource, the master and moments for checkpoints.
// Above the algorithm: train/ includes it, zero.h does not.
#pragma once
#include "zero/rank.h"

// Returns 1, or 0 with src->err set. The fp32 values land in the parameters where those
// are the master. Otherwise a unit-long staging buffer takes them, and the master slice
// and the floatX working copy, rounded to nearest even, go to memory or NVMe from there.
static int zero_load_params(Zero *z, ParamSource *src) {
    const ZeroPlan *p = &z->plan;
    int sm = z->place.separate_master, direct = !sm && z->params;
    float *staging = direct ? NULL : (float *)xmalloc(p->max_padded * sizeof(float), "parameter staging");
    int ok = 1;
    for (int i = 0; i < p->n_units && ok; i++) {
        const ZeroUnit *U = &p->u[i];
        size_t lo = ZERO_STAGE == 3 ? zero_slice_start(p, i) : 0, n = ZERO_STAGE == 3 ? U->shard : U->padded;
        floatX *held = z->params ? z->params + (ZERO_STAGE == 3 ? U->shard_off : U->full_off) : NULL;
        float *vals = direct ? (float *)held : staging;
        ok = src->read(src, i, lo, n, vals);
        if (ok && sm) zero_state_rw(z, ZS_MASTER, U->shard_off, U->shard, vals + (zero_slice_start(p, i) - lo), 1);
        if (ok && !direct) {
            if (held) zb_upload_floatX(&z->be, held, vals, n);
            else zb_state_write_floatX(&z->be, U->shard_off, vals, n);
        }
        if (ok && ZERO_STAGE == 3 && U->persistent && !z->place.whole) {
            float *whole = sm ? staging : (float *)(z->resident + U->resident_off);
            ok = src->read(src, i, 0, U->padded, whole);
            if (ok && sm) zb_upload_floatX(&z->be, z->resident + U->resident_off, whole, U->padded);
        }
    }
    free(staging);
    return ok;
}

// whether this rank holds every unit's whole fp32 master, or only its slices
static int zero_master_whole(const Zero *z) { return z->place.separate_master ? z->plan.P == 1 : ZERO_STAGE <= 2; }

// n elements of unit u's fp32 master from element lo of the padded unit, inside what this
// rank holds. Without a separate master the parameters are the master.
static void zero_master_read(Zero *z, int u, size_t lo, size_t n, float *host) {
    const ZeroUnit *U = &z->plan.u[u];
    size_t so = U->shard_off + (lo - zero_slice_start(&z->plan, u));   // its shard offset, if any
    if (z->place.separate_master) zero_state_rw(z, ZS_MASTER, so, n, host, 0);
    else if (!z->params) zb_state_read(&z->be, ZS_PARAM, so, n, host);
    else zb_download(&z->be, host, z->params + (ZERO_STAGE == 3 ? so : U->full_off + lo), n * sizeof(float));
}

// n elements of the partition's m, which 0, or v, which 1, from shard offset off
static void zero_optim_read(Zero *z, int which, size_t off, size_t n, float *host) {
    zero_state_rw(z, which ? ZS_V : ZS_M, off, n, host, 0);
}
static void zero_optim_write(Zero *z, int which, size_t off, size_t n, const float *host) {
    zero_state_rw(z, which ? ZS_V : ZS_M, off, n, (void *)host, 1);
}
