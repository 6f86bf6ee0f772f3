// zero/dpu.h: ZeRO-Offload's delayed parameter update, DPU (Ren et al., 2021). After
// --dpu-warmup updates, step t's AdamW runs on a thread beside step t+1's passes. With
// w(k) the parameters after k updates:
//
//   step t's passes read   w(t-1); the first delayed step reads w(t)
//   step t's boundary      installs w(t), starts w(t+1) = AdamW(w(t), g(t))
//   a skipped step         installs w(t), starts nothing
//   a checkpoint           installs first: it holds w(t+1), which the next step reads
//
// g(t) is taken at w(t-1): one step stale. The clip norm, loss scaler and NaN guard judge
// g(t) before its update starts; the lr counts applied updates, as without the delay.
#pragma once
#include "zero/rank.h"

// update t, Adam's 1-based step, is delayed
static int zero_dpu_delays(const Zero *z, int t) { return z->place.dpu && t > z->cfg->dpu_warmup; }

static void *zero_dpu_main(void *arg) {
    Zero *z = (Zero *)arg;
    omp_set_num_threads(z->dpu.threads);
    zb_adamw_partition(&z->be, z->adam_seg, z->plan.n_seg, z->dpu.ap);
    return NULL;
}

// the update on buffers of its own: the next backward writes the gradient, the next
// forward reads the parameters; where those are the master, dpu.params starts as them
static void zero_dpu_start(Zero *z, AdamWParams ap) {
    const ZeroPlan *p = &z->plan;
    for (int i = 0; i < p->n_units && !z->master; i++)
        memcpy(z->dpu.params + p->u[i].shard_off, zero_param_slice(z, i), p->u[i].shard * sizeof(floatX));
    zb_dpu_take_grad(&z->be, z->adam_seg, p->n_seg, &z->dpu.grad);
    for (int s = 0; s < p->n_seg; s++) z->adam_seg[s].param = z->dpu.params + z->adam_seg[s].shard_off;
    z->dpu.ap = ap;
    z->dpu.threads = omp_get_max_threads() > 1 ? omp_get_max_threads() - 1 : 1;   // a core for the next step's launches
    if (pthread_create(&z->dpu.thread, NULL, zero_dpu_main, z)) fatal("DPU: cannot start the update's thread");
    z->dpu.running = 1;
}

// waits for the update in flight and copies its parameters in; 0 when none
static int zero_dpu_install(Zero *z) {
    if (!z->dpu.running) return 0;
    pthread_join(z->dpu.thread, NULL);
    z->dpu.running = 0;
    for (int i = 0; i < z->plan.n_units; i++) {
        const ZeroUnit *U = &z->plan.u[i];
        zb_upload(&z->be, zero_param_slice(z, i), z->dpu.params + U->shard_off, U->shard * sizeof(floatX));
    }
    return 1;
}
